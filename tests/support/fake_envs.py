"""Jobs' Python environments made on disk as `runtime/environments.py` leaves them (`env.json`,
`last-used` whose mtime is the last use, installed files), for the housekeeping tests."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

DAY = 86400


def make_env(envs: Path, key: str, *, days_ago: float, payload: int, built_by: str = "builder") -> int:
    """An environment of one package, last used `days_ago` days ago; returns the bytes of its files."""
    path = envs / key
    site = path / "lib" / "python3.11" / "site-packages" / "tinypkg"
    site.mkdir(parents=True)
    (site / "__init__.py").write_bytes(b"x" * payload)
    info = {
        "key": key,
        "requirements": ["tinypkg==1.0"],
        "requirements_file": "requirements.txt",
        "python": "3.11.9",
        "platform": "linux-x86_64",
        "image": "",
        "installer": "uv",
        "installed": ["tinypkg==1.0"],
        "built": time.time() - days_ago * DAY - 60,
        "built_by": built_by,
        "seconds": 1.5,
    }
    (path / "env.json").write_text(json.dumps(info))
    (path / "install.log").write_text("Installed 1 package\n")
    used = path / "last-used"
    used.touch()
    moment = time.time() - days_ago * DAY
    os.utime(used, (moment, moment))
    return sum(each.stat().st_size for each in path.rglob("*") if each.is_file())


def use_env(logs_dir: Path, job: str, key: str) -> None:
    """Make a job's logs say it uses environment `key`, as its launcher does once it is ready."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    (logs_dir / "environment.json").write_text(json.dumps({"job": job, "state": "ready", "key": key, "reused": True}))
