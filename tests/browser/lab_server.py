"""A real JupyterLab (subprocess) with paddle-nbext for browser tests and the panel benchmark.

Everything it writes lives in one temporary directory: HOME (the local backend's jobs and the
trainer package), Jupyter config/data/runtime dirs and JupyterLab settings (news and update
checks off, so no pop-up covers the panel).  The built labextension is found through
JUPYTER_PATH, so the tests do not depend on `jupyter labextension develop` having been run.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests
from support.jupyter_process import JupyterProcess, free_port

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

REPO = Path(__file__).resolve().parents[2]
LABEXT_BUILD = REPO / "paddle_nbext" / "labextension"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# A cold JupyterLab (fresh server, fresh browser context, nothing cached) on a CI machine whose
# 2 cores are shared can take well over 30 s to load its bundles and activate the plugins;
# waits for the app to start are therefore generous (they only cost time when it is slow).
APP_START_TIMEOUT_MS = 60_000
PANEL_TAB = '.jp-SideBar [data-id="paddle-nbext-panel"]'


@dataclass
class LabServer:
    url: str  # base URL ending in '/'
    token: str
    home: Path
    jupyter: JupyterProcess

    def api(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """Call the paddle-nbext REST API as the notebook user (token auth)."""
        headers = {"Authorization": f"token {self.token}", **kwargs.pop("headers", {})}
        return requests.request(method, f"{self.url}paddle/api/v1/{path}", headers=headers, timeout=30, **kwargs)

    def page_url(self, path: str) -> str:
        return f"{self.url}{path}?token={self.token}"

    def log(self) -> str:
        return self.jupyter.log_tail()


def _settings_dir(root: Path) -> Path:
    settings = root / "lab-settings"
    notify = settings / "@jupyterlab" / "apputils-extension"
    notify.mkdir(parents=True)
    (notify / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    return settings


def start_lab(
    root: Path,
    *,
    with_extension: bool = True,
    python_path: list[Path] | None = None,
    extra_args: list[str] | None = None,
) -> LabServer:
    """Start JupyterLab bound to 127.0.0.1 and wait until it answers.

    `python_path` puts folders first on the server's module path: where a class that
    `extra_args` name lives (the panel benchmark's `--PaddleNbext.backend_class`)."""
    if not (LABEXT_BUILD / "package.json").is_file():
        raise RuntimeError(f"{LABEXT_BUILD} is missing: build the extension first (cd labextension && npm ci && npm run build:prod)")
    home = root / "home"
    home.mkdir(parents=True)
    jpath = root / "jupyter-path"
    (jpath / "labextensions").mkdir(parents=True)
    (jpath / "labextensions" / "paddle-nbext-labextension").symlink_to(LABEXT_BUILD)
    config_dir = root / "jupyter-config"
    config_dir.mkdir()
    (config_dir / "jupyter_server_config.json").write_text(
        json.dumps(
            {
                "ServerApp": {"jpserver_extensions": {"paddle_nbext_server": with_extension}},
                "LocalBackend": {"jobs_dir": str(home / ".paddle-jobs"), "poll_interval": 0.1, "grace_period": 2.0},
                "LabApp": {"news_url": None},
            }
        )
    )
    token = secrets.token_hex(16)
    port = free_port()
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}",
        "JUPYTER_PATH": str(jpath),
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "JUPYTER_DATA_DIR": str(root / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(root / "jupyter-runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(_settings_dir(root)),
        "JUPYTERLAB_WORKSPACES_DIR": str(root / "lab-workspaces"),
        "PYTHONUNBUFFERED": "1",
    }
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [*map(str, python_path), env.get("PYTHONPATH")]))
    args = [
        "--allow-root",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={home}",
        "--ServerApp.open_browser=False",
        *(extra_args or []),
    ]
    jupyter = JupyterProcess(
        [sys.executable, "-m", "jupyterlab", *args],
        url=f"http://127.0.0.1:{port}/",
        token=token,
        log_path=root / "jupyter.log",
        env=env,
        cwd=home,
        name="JupyterLab",
        stop_grace=15,
    )
    return LabServer(jupyter.url, token, home, jupyter.start())


def stop_lab(server: LabServer) -> None:
    """Stop the server and everything it started (its process group), then wait for it."""
    server.jupyter.stop()


def open_lab(page: Any, server: LabServer) -> Any:
    """Load JupyterLab with a fresh layout (the panel starts closed) and wait until the app has
    started, i.e. the panel's sidebar tab is there; returns that tab."""
    page.goto(server.page_url("lab") + "&reset", timeout=APP_START_TIMEOUT_MS)
    tab = page.locator(PANEL_TAB)
    tab.wait_for(timeout=APP_START_TIMEOUT_MS)
    return tab


def copy_ps_package(home: Path, name: str = "ps_pkg") -> Path:
    """A trainer package in HOME holding a copy of examples/ps_train.py."""
    package = home / name
    package.mkdir(exist_ok=True)
    shutil.copy(REPO / "examples" / "ps_train.py", package / "ps_train.py")
    return package


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, headless, driven by Playwright's sync API (never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def fresh_page(browser: Browser, timeout_ms: int = 30_000) -> Iterator[Page]:
    """A page in a context of its own (no cookies or storage from another test), 1400×1000."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    try:
        yield page
    finally:
        context.close()
