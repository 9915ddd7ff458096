"""scripts/setup.sh: it waits for the Debian package lock instead of failing at once; on a fresh
machine it brings what it needs or names what is missing in one sentence (Go and the pinned
toolchain, Python's venv module, a machine without apt-get); the demo's set-up installs only what
the demo uses. scripts/demo.sh runs from a clone anywhere and says in one sentence when it has no
home to run its job from."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GO_PIN = (ROOT / "scripts" / "go-toolchain.txt").read_text().strip()


def run_apt_get(tmp_path: Path, locked_times: int, wait: int = 30) -> subprocess.CompletedProcess[str]:
    """`apt_get update` with an apt-get that reports a held lock `locked_times` times first."""
    fake = tmp_path / "bin" / "apt-get"
    fake.parent.mkdir(exist_ok=True)
    count = tmp_path / "calls"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo x >> "{count}"\n'
        f'if [ "$(wc -l < "{count}")" -le {locked_times} ]; then\n'
        '  echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2; exit 100\n'
        "fi\n"
        'echo "apt-get $*"\n'
    )
    fake.chmod(0o755)
    script = f'source "{ROOT}/scripts/apt_get.sh"; sleep() {{ :; }}; apt_get update -qq'
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "APT_LOCK_WAIT": str(wait)}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_a_held_lock_is_waited_for(tmp_path: Path) -> None:
    done = run_apt_get(tmp_path, locked_times=2)
    assert done.returncode == 0, done.stderr
    assert "waiting for the Debian package lock" in done.stderr
    assert len((tmp_path / "calls").read_text().splitlines()) == 3


def test_a_lock_held_past_the_wait_fails_with_apts_own_words(tmp_path: Path) -> None:
    done = run_apt_get(tmp_path, locked_times=100, wait=10)
    assert done.returncode == 1
    assert "Could not get lock" in done.stderr


def test_other_errors_fail_at_once(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "apt-get"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "E: Unable to locate package chromium" >&2; exit 100\n')
    fake.chmod(0o755)
    done = subprocess.run(
        ["bash", "-c", f'source "{ROOT}/scripts/apt_get.sh"; apt_get install chromium'],
        env={"PATH": f"{fake.parent}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "Unable to locate package" in done.stderr and "waiting" not in done.stderr


def test_the_repeat_run_stops_at_the_first_red_run_and_names_it(tmp_path: Path) -> None:
    """`scripts/test.sh --repeat N` (the proof that the suite needs no luck) runs pytest N times,
    each a fresh process, and says which run went red; `--busy K` loads the cores meanwhile."""
    counter = tmp_path / "runs"
    flaky = tmp_path / "test_second_run_fails.py"
    flaky.write_text(
        "from pathlib import Path\n"
        f"COUNTER = Path({str(counter)!r})\n"
        "def test_red_on_the_second_run():\n"
        "    runs = len(COUNTER.read_text().splitlines()) + 1 if COUNTER.exists() else 1\n"
        "    COUNTER.write_text('x\\n' * runs)\n"
        "    assert runs != 2\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PADDLE_NBEXT_SKIP_CHECKS": "1", "PADDLE_NBEXT_TEST_KUBECONFIG": "unused"}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "test.sh"), "--repeat", "3", "--busy", "1", str(flaky)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "run 1 of 3 (busy loops: 1)" in done.stdout and "run 2 of 3 failed" in done.stderr
    assert "run 3 of 3" not in done.stdout
    bad = subprocess.run(
        ["bash", str(ROOT / "scripts" / "test.sh"), "--repeat", "five"], env=env, capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "--repeat and --busy take whole numbers" in bad.stderr


def fake_command(folder: Path, name: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("#!/bin/sh\n" + body)
    (folder / name).chmod(0o755)


def copy_of_scripts(tmp_path: Path) -> Path:
    """A tree holding the set-up scripts alone: they `cd` to their checkout, so what they make
    (.venv, node_modules) lands in the copy and never in this checkout."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "scripts", tree / "scripts")
    return tree


def test_the_demo_setup_installs_only_what_the_demo_uses(tmp_path: Path) -> None:
    """No Debian package (Chromium, the real node's, Ceph's), no Go, no npm ci of the panel's dev
    tools or the hub's proxy: only the package with its paddle extra, and JupyterLab."""
    tree = copy_of_scripts(tmp_path)
    calls = tmp_path / "calls"
    fake = tmp_path / "bin"
    for name in ("apt-get", "npm", "go"):
        fake_command(fake, name, f'echo "{name} $*" >> "{calls}"\n')
    fake_command(tree / ".venv" / "bin", "python", f'echo "python $*" >> "{calls}"\n')
    env = {"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(tree / "scripts" / "setup.sh"), "--demo"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == [
        "python -m pip install -q --upgrade pip",
        "python -m pip install -q -e .[paddle] jupyterlab",
    ]
    assert "ready for the demo" in done.stdout
    assert "bash scripts/setup.sh --demo" in (ROOT / "scripts" / "demo.sh").read_text()


def test_a_python_without_venv_is_named_in_one_sentence(tmp_path: Path) -> None:
    """Debian's python3 without python3-venv has no ensurepip, so `python3 -m venv` cannot work:
    the set-up stops at once with one sentence saying what to install (and installs nothing)."""
    tree = copy_of_scripts(tmp_path)
    shadow = tmp_path / "no_ensurepip" / "ensurepip"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('ensurepip is not available (Debian: python3-venv)')\n")
    calls = tmp_path / "calls"
    fake = tmp_path / "bin"
    for name in ("apt-get", "npm"):
        fake_command(fake, name, f'echo "{name} $*" >> "{calls}"\n')
    env = {"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHON": sys.executable, "PYTHONPATH": str(shadow.parent)}
    done = subprocess.run(["bash", str(tree / "scripts" / "setup.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"setup: {sys.executable} cannot make the virtualenv .venv (its venv module has no ensurepip): install Debian's "
        "python3-venv (apt-get install python3-venv, as root) or set PYTHON to a Python 3.10+ that has it."
    ]
    assert not (tree / ".venv").exists()
    assert not calls.exists() or "apt-get install" not in calls.read_text()


@pytest.fixture
def empty_go_home(tmp_path: Path) -> Iterator[dict[str, str]]:
    """An environment with no `go` on PATH and every Go cache and setting empty: a fresh machine's
    Go (the machine's own Go, /usr/local/go here, is kept out of the search by the tests)."""
    home = tmp_path / "home"
    home.mkdir()
    path = os.pathsep.join(("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"))
    if shutil.which("go", path=path):
        pytest.skip(f"this machine has {shutil.which('go', path=path)} on the system's own PATH: no fresh machine's Go to start from")
    env = {
        "PATH": path,
        "HOME": str(home),
        "GOPATH": str(home / "gopath"),
        "GOMODCACHE": str(home / "gomodcache"),
        "GOCACHE": str(home / "gocache"),
        "GOENV": str(home / "goenv"),
    }
    yield env
    for walked, _, _ in os.walk(home):  # Go makes the module cache read-only
        os.chmod(walked, stat.S_IRWXU)
    shutil.rmtree(home)


@pytest.mark.slow
def test_the_go_setup_brings_the_pinned_toolchain_from_nothing(tmp_path: Path, empty_go_home: dict[str, str]) -> None:
    """scripts/setup_go.sh with no `go` on PATH and empty Go caches: as root it takes Debian's Go
    (installing golang-1.N-go from backports when no Debian Go is there yet), which fetches the
    pinned toolchain; that toolchain then builds a tiny module whose binary is of the pin."""
    env = {**empty_go_home, "PADDLE_NBEXT_GO_SEARCH": "/usr/lib/go-1.*/bin/go"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "setup_go.sh")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(
        rf"^setup: Go ready: {re.escape(GO_PIN)} \(GOTOOLCHAIN={re.escape(GO_PIN)}, bootstrapped by (/usr/lib/go-1\.\d+/bin/go)\)$",
        done.stdout,
        re.M,
    )
    assert found, done.stdout + done.stderr
    assert GO_PIN.startswith("go1.26.")
    assert (Path(env["GOMODCACHE"]) / "golang.org" / f"toolchain@v0.0.1-{GO_PIN}.linux-amd64" / "bin" / "go").is_file()
    module = tmp_path / "tiny"
    module.mkdir()
    (module / "go.mod").write_text("module tiny\n\ngo 1.26.0\n")
    (module / "main.go").write_text('package main\n\nimport (\n\t"fmt"\n\t"runtime"\n)\n\nfunc main() { fmt.Println(runtime.Version()) }\n')
    build_env = {**env, "GOTOOLCHAIN": GO_PIN, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
    built = subprocess.run(
        [found[1], "build", "-o", str(tmp_path / "tiny.bin"), "."], cwd=module, env=build_env, capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stderr
    assert subprocess.run([str(tmp_path / "tiny.bin")], capture_output=True, text=True, check=True).stdout.strip() == GO_PIN


def test_no_go_at_all_is_named_in_one_sentence(tmp_path: Path, empty_go_home: dict[str, str]) -> None:
    """Not root and no Go anywhere it looks: one sentence says what is missing and how to get it."""
    fake = tmp_path / "bin"
    fake_command(fake, "id", "echo 1000\n")
    env = {**empty_go_home, "PATH": f"{fake}:{empty_go_home['PATH']}", "PADDLE_NBEXT_GO_SEARCH": ""}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "setup_go.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"setup: Go is missing (the cluster tests build their control plane with {GO_PIN}, which any Go 1.21+ fetches): run "
        "`bash scripts/setup.sh` as root to install Debian's golang-1.N-go from backports, or put a Go 1.21 or newer on PATH."
    ]


def test_every_go_build_uses_the_one_pinned_toolchain() -> None:
    """The pin lives in scripts/go-toolchain.txt alone; the control plane build sets it as
    GOTOOLCHAIN on every go command it runs, and no go.mod pins a toolchain of its own."""
    source = (ROOT / "tests" / "support" / "controlplane" / "build.py").read_text()
    assert '"GOTOOLCHAIN": GO_TOOLCHAIN' in source and "go-toolchain.txt" in source
    assert "os.environ" not in source.split("def _go_env", 1)[1].split("def ", 2)[1], "a go command's environment without the pin"
    for modfile in (ROOT / "tests" / "support" / "controlplane" / "gomod").glob("*/go.mod"):
        assert not re.search(r"^toolchain ", modfile.read_text(), re.M), f"{modfile} pins a toolchain; the pin is scripts/go-toolchain.txt"
    assert re.fullmatch(r"go1\.\d+\.\d+", GO_PIN)
    development = (ROOT / "docs" / "development.md").read_text()
    assert f"`scripts/go-toolchain.txt` ({GO_PIN})" in " ".join(development.split()), "docs/development.md names another pinned Go"


def test_a_python_without_a_paddle_wheel_is_named_in_one_sentence(tmp_path: Path) -> None:
    """Python 3.14 passes "3.10 or newer", but the paddle extra's paddlepaddle 3.0.0 has no wheel
    for it: one sentence says which Pythons work, before a venv or pip's "No matching distribution"."""
    tree = copy_of_scripts(tmp_path)
    calls = tmp_path / "calls"
    fake = tmp_path / "bin"
    fake_command(fake, "python3.14", 'case "$2" in *"version_info[:2]"*) echo 3.14 ;; *) exit 0 ;; esac\n')
    fake_command(fake, "npm", f'echo "npm $*" >> "{calls}"\n')
    env = {"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHON": str(fake / "python3.14")}
    done = subprocess.run(["bash", str(tree / "scripts" / "setup.sh"), "--demo"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"setup: {fake / 'python3.14'} is Python 3.14, for which paddlepaddle 3.0.0 (the paddle extra) has no wheel: set PYTHON "
        "to a Python 3.10 to 3.13."
    ]
    assert not (tree / ".venv").exists() and not calls.exists()


def tools_only(folder: Path, *names: str) -> Path:
    """A PATH folder holding just these commands of the machine (links), so what else the machine
    has installed (apt-get, chromium, containerd) stays out of the script's sight."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        found = shutil.which(name)
        assert found, f"the test needs {name} on this machine"
        (folder / name).symlink_to(found)
    return folder


def test_no_apt_get_stops_the_test_setup_in_one_sentence(tmp_path: Path) -> None:
    """Not Debian (no apt-get): the set-up cannot bring Chromium, the real nodes' or Ceph's packages,
    so it stops before making anything, saying where it works and what the demo needs instead of
    the shell's "apt-get: command not found"."""
    tree = copy_of_scripts(tmp_path)
    calls = tmp_path / "calls"
    fake = tools_only(tmp_path / "bin", "dirname", "id", "readlink")
    fake_command(fake, "npm", f'echo "npm $*" >> "{calls}"\n')
    env = {"PATH": str(fake), "HOME": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["/bin/bash", str(tree / "scripts" / "setup.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "setup: this machine has no apt-get, so the set-up cannot install the Debian bookworm packages the test suite needs (chromium "
    ), lines
    assert lines[0].endswith("): run it on Debian 12, or run `bash scripts/setup.sh --demo` for the demo, which needs none of them."), lines
    assert not (tree / ".venv").exists() and not calls.exists()


def test_no_apt_get_and_no_venv_module_is_named_in_one_sentence(tmp_path: Path) -> None:
    """A Python without ensurepip on a machine without apt-get, even as root: no Debian advice, the
    one sentence says to install the system's own venv package or to pick another Python."""
    tree = copy_of_scripts(tmp_path)
    shadow = tmp_path / "no_ensurepip" / "ensurepip"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('ensurepip is not available')\n")
    fake = tools_only(tmp_path / "bin", "dirname", "readlink")
    fake_command(fake, "id", "echo 0\n")
    env = {"PATH": str(fake), "HOME": str(tmp_path), "PYTHON": sys.executable, "PYTHONPATH": str(shadow.parent)}
    done = subprocess.run(["/bin/bash", str(tree / "scripts" / "setup.sh"), "--demo"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"setup: {sys.executable} cannot make the virtualenv .venv (its venv module has no ensurepip): install your system's "
        "package of Python's venv module, or set PYTHON to a Python 3.10+ that has it."
    ]
    assert not (tree / ".venv").exists()


def demo_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A clone for scripts/demo.sh whose set-up, server and CLI are stand-ins writing to `calls`:
    the stand-in server answers every request, so the demo goes on to its submit at once."""
    tree = copy_of_scripts(tmp_path)
    shutil.copytree(ROOT / "examples", tree / "examples")
    calls = tmp_path / "calls"
    fake_command(tree / "scripts", "setup.sh", f'echo "setup $*" >> "{calls}"\n')
    venv = tree / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    server = (
        "import http.server, sys\n"
        "port = int(next(a for a in sys.argv if a.startswith('--port=')).split('=')[1])\n"
        "class Ok(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers()\n"
        "    def log_message(self, *args):\n"
        "        pass\n"
        "http.server.HTTPServer(('127.0.0.1', port), Ok).serve_forever()\n"
    )
    (tmp_path / "server.py").write_text(server)
    fake_command(venv, "jupyter", f'echo "jupyter $*" >> "{calls}"\nexec "{sys.executable}" "{tmp_path / "server.py"}" "$@"\n')
    fake_command(venv, "paddle-nbext", f'echo "paddle-nbext $*" >> "{calls}"\n')
    return tree, calls


def test_the_demo_runs_from_a_clone_outside_the_home(tmp_path: Path) -> None:
    """Trainer code must live under the home, and the clone is elsewhere: the demo copies the
    examples into ~/paddle-nbext-demo and submits that copy to a server whose home is $HOME."""
    tree, calls = demo_tree(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    done = subprocess.run(["bash", str(tree / "scripts" / "demo.sh")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not tree.is_relative_to(home)
    made = calls.read_text().splitlines()
    assert made[0] == "setup --demo"
    assert any(line.startswith("jupyter server") and f"--ServerApp.root_dir={home}" in line for line in made), made
    submit = next(line for line in made if line.startswith("paddle-nbext submit"))
    assert f"--package {home}/paddle-nbext-demo --entry python ps_train.py" in submit, submit
    assert (home / "paddle-nbext-demo" / "ps_train.py").is_file()
    assert f"{home}/paddle-nbext-demo/demo.ipynb" in done.stdout


@pytest.mark.parametrize("home", [None, "a-file/home"], ids=["unset", "not-a-directory"])
def test_a_demo_without_a_home_says_so_in_one_sentence(tmp_path: Path, home: str | None) -> None:
    """No HOME, or one nothing can be made in: one sentence before the set-up's minutes."""
    tree, calls = demo_tree(tmp_path)
    (tmp_path / "a-file").write_text("")
    env = {"PATH": "/usr/bin:/bin"} | ({"HOME": str(tmp_path / home)} if home else {})
    done = subprocess.run(["bash", str(tree / "scripts" / "demo.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    problem = f"{tmp_path / str(home)}/paddle-nbext-demo cannot be made" if home else "HOME is not set"
    assert done.stderr.strip().splitlines() == [
        f"demo: the demo runs its job from a copy of the examples in your home directory, but {problem}: set HOME to a "
        "directory you can write to and run it again."
    ]
    assert not calls.exists(), "the set-up ran"
