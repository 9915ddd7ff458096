"""Against a real `jupyter server` process: the shipped enable-file turns the extension on and
`jupyter server extension list` says OK; with the stock token identity provider the browser
(cookie + XSRF) and the kernel (token) are the same owner, the server's OS account; and jobs
submitted before a server restart are listed with the right status after it."""

from __future__ import annotations

import getpass
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from .real_server import RealServer, server_env, start_server


def wait_phase(server: RealServer, name: str, phase: str) -> dict[str, Any]:
    while True:  # bounded by the pytest timeout
        job: dict[str, Any] = requests.get(f"{server.api}/jobs/{name}", headers=server.headers(), timeout=10).json()
        if job["phase"] == phase:
            return job
        assert job["phase"] not in {"Succeeded", "Failed", "Cancelled"} - {phase}, job
        time.sleep(0.1)


def test_extension_is_enabled_and_validates(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(Path(sys.executable).with_name("jupyter")), "server", "extension", "list"],
        env=server_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    assert "paddle_nbext_server enabled" in output, output
    assert re.search(r"paddle_nbext_server \S+ OK", output), output


def test_browser_and_kernel_are_the_same_owner_and_xsrf_is_enforced(tmp_path: Path) -> None:
    server = start_server(tmp_path)
    try:
        kernel = requests.get(f"{server.api}/config", headers=server.headers(), timeout=10).json()
        assert kernel["user"] == getpass.getuser()

        browser = requests.Session()
        assert browser.get(f"{server.url}login", timeout=10).status_code == 200  # sets the _xsrf cookie
        assert browser.get(f"{server.url}api/status", params={"token": server.token}, timeout=10).status_code == 200
        assert browser.get(f"{server.api}/config", timeout=10).json()["user"] == kernel["user"]

        spec = {"entry_point": "python t.py"}
        refused = browser.post(f"{server.api}/jobs", params={"dry_run": "true"}, json=spec, timeout=10)
        assert refused.status_code == 403 and set(refused.json()) >= {"error", "message", "field"}
        xsrf = browser.cookies.get("_xsrf")
        assert xsrf is not None, "the login page set no _xsrf cookie"
        accepted = browser.post(f"{server.api}/jobs", params={"dry_run": "true"}, json=spec, headers={"X-XSRFToken": xsrf}, timeout=10)
        assert accepted.status_code == 200 and accepted.json()["job"]["owner"] == kernel["user"], accepted.text

        anonymous = requests.get(f"{server.api}/jobs", timeout=10)
        assert anonymous.status_code == 403 and anonymous.json()["error"] == "forbidden"
    finally:
        server.stop()


@pytest.mark.timeout(300)
def test_jobs_survive_a_server_restart(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "nap.py").write_text("import sys, time\nprint('napping', flush=True)\ntime.sleep(float(sys.argv[1]))\n")
    common = {"mode": "collective", "trainer_package": "work"}
    first = start_server(tmp_path)
    try:
        for name, seconds in (("short", "0"), ("long", "300")):
            body = {"job_name": name, "entry_point": f"python nap.py {seconds}", **common}
            response = requests.post(f"{first.api}/jobs", json=body, headers=first.headers(), timeout=30)
            assert response.status_code == 201, response.text
        wait_phase(first, "short", "Succeeded")
        wait_phase(first, "long", "Running")
    finally:
        first.stop()

    second = start_server(tmp_path)
    try:
        jobs = requests.get(f"{second.api}/jobs", headers=second.headers(), timeout=30).json()["jobs"]
        assert {job["name"]: job["phase"] for job in jobs} == {"short": "Succeeded", "long": "Running"}
        assert [job["name"] for job in jobs] == ["long", "short"]  # newest first
        log = requests.get(f"{second.api}/jobs/short/logs", headers=second.headers(), timeout=30)
        assert "napping" in log.text
        cancelled = requests.post(f"{second.api}/jobs/long/cancel", headers=second.headers(), timeout=120).json()
        assert cancelled["phase"] == "Cancelled"
    finally:
        for name in ("short", "long"):
            requests.delete(f"{second.api}/jobs/{name}", headers=second.headers(), timeout=120)
        second.stop()
