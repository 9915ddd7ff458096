"""`binder/postBuild` turns a clean venv and a fresh checkout into a working paddle-nbext setup.

This is what Binder does on launch and what the README's demo command does on a new machine, so
it runs for real: a new venv (`python -m venv`), a copy of the checkout (the tracked and
not-ignored files, no node_modules, no prebuilt assets), a throwaway HOME, and then postBuild
with that venv first on PATH.  Afterwards the venv's own `jupyter` must list the server
extension and the panel as enabled and OK, Paddle must import, and JupyterLab started there must
land on the demo notebook and serve the extension's API.

It installs JupyterLab and Paddle and builds the panel, so it is the slowest test (minutes);
the pip and npm caches of the real HOME are reused to keep downloads out of the second run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from support.jupyter_process import JupyterProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
REAL_HOME = Path.home()
ANSI = re.compile(r"\x1b\[[0-9;]*m")
DEMO_URL = "/lab/tree/examples/demo.ipynb"

# Variables that would point the new venv's Jupyter at this machine's own setup.
_LEAKY = (
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHOME",
    "CONDA_PREFIX",
    "JUPYTER_CONFIG_DIR",
    "JUPYTER_DATA_DIR",
    "JUPYTER_PATH",
    "JUPYTER_RUNTIME_DIR",
    "JUPYTER_CONFIG_PATH",
    "JUPYTERLAB_DIR",
    "JUPYTERLAB_SETTINGS_DIR",
    "JUPYTERLAB_WORKSPACES_DIR",
    "JUPYTER_PREFER_ENV_PATH",
    "PIP_USER",
)


def _checkout_copy(dest: Path) -> None:
    """Copy what a fresh clone holds (tracked + new, not ignored, still present) to `dest`."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        source = ROOT / rel
        if source.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _clean_env(venv: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LEAKY}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(home)
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(REAL_HOME / ".cache" / "pip"))
    env["npm_config_cache"] = os.environ.get("npm_config_cache", str(REAL_HOME / ".npm"))
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 120) -> str:
    """Run `cmd`; its output (colours removed) or an assertion naming the command and the tail."""
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    output = ANSI.sub("", done.stdout + done.stderr)
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{output[-6000:]}"
    return output


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_postbuild_on_clean_venv_gives_working_extension(tmp_path: Path) -> None:
    if shutil.which("npm") is None:
        pytest.fail("npm (Node 20) is needed to build the panel; install nodejs")
    try:
        _postbuild_and_check(tmp_path)
    finally:  # the venv (Paddle) and node_modules are ~2 GB: never leave them in pytest's tmp
        for heavy in (tmp_path / "venv", tmp_path / "repo"):
            shutil.rmtree(heavy, ignore_errors=True)


def _postbuild_and_check(tmp_path: Path) -> None:
    repo, venv, home = tmp_path / "repo", tmp_path / "venv", tmp_path / "home"
    home.mkdir()
    _checkout_copy(repo)
    assert not (repo / "paddle_nbext" / "labextension").exists(), "the copy must not carry prebuilt assets"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = _clean_env(venv, home)

    log = _run(["bash", str(repo / "binder" / "postBuild")], env, cwd=tmp_path, timeout=2100)
    assert "postBuild: done" in log, log[-3000:]

    server_list = _run([str(venv / "bin" / "jupyter"), "server", "extension", "list"], env, cwd=home)
    lines = server_list.splitlines()
    assert any("paddle_nbext_server" in line and "enabled" in line for line in lines), server_list
    assert any(re.match(r"\s*paddle_nbext_server \S+ OK$", line.rstrip()) for line in lines), server_list

    lab_list = _run([str(venv / "bin" / "jupyter"), "labextension", "list"], env, cwd=home)
    panel = [line for line in lab_list.splitlines() if "paddle-nbext-labextension" in line]
    assert panel and "enabled" in panel[0] and "OK" in panel[0], lab_list

    probe = (
        "import json, paddle, paddle_nbext, paddle_nbext_server;"
        "print(json.dumps({'paddle': paddle.__version__, 'file': paddle_nbext.__file__,"
        " 'version': paddle_nbext_server.__version__}))"
    )
    probe_output = _run([str(venv / "bin" / "python"), "-c", probe], env, cwd=home)
    facts = json.loads(next(line for line in probe_output.splitlines() if line.startswith('{"paddle"')))
    assert facts["paddle"] == "3.0.0"
    assert Path(facts["file"]).is_relative_to(venv), f"paddle_nbext must be a real install in the venv, got {facts['file']}"
    assert facts["version"] != "0.0.0", "the installed package must know its version"

    config_dir = _run([str(venv / "bin" / "jupyter"), "--config-dir"], env, cwd=home).strip().splitlines()[-1]
    config = json.loads((Path(config_dir) / "jupyter_server_config.json").read_text())
    assert config["ServerApp"]["default_url"] == config["LabApp"]["default_url"] == DEMO_URL

    # What a Binder user gets: JupyterLab started in the checkout sends them to the demo, and
    # the extension's API answers with the installed version.
    landing, version = _lab_landing(venv, env, repo)
    assert landing.endswith(DEMO_URL), landing
    assert (repo / "examples" / "demo.ipynb").is_file()
    assert version == {"version": facts["version"], "api": "v1"}


def _lab_landing(venv: Path, env: dict[str, str], root: Path) -> tuple[str, dict[str, str]]:
    """Start the venv's `jupyter lab` in `root` on a free loopback port; return where `/`
    redirects to and what `/paddle/api/v1/version` answers.  The server is always stopped."""
    port = free_port()
    token = secrets.token_hex(16)
    command = [
        str(venv / "bin" / "jupyter"),
        "lab",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
    ]
    base = f"http://127.0.0.1:{port}/"
    with JupyterProcess(
        command, url=base, token=token, log_path=root.parent / "jupyter-lab.log", env=env, cwd=root, name="jupyter lab"
    ) as lab:
        landing = requests.get(base, headers=lab.headers, allow_redirects=False, timeout=10)
        assert landing.status_code in (301, 302), landing.status_code
        version = requests.get(f"{base}paddle/api/v1/version", headers=lab.headers, timeout=10)
        assert version.status_code == 200, version.text
        return landing.headers["Location"].split("?")[0], version.json()
