"""What a replica's launcher does before the entry point, kept small: it imports the environment
and rank modules only when the job has requirements or ranks, reads the Paddle version from the
metadata directories without `importlib.metadata` (same answers, cases included), looks for
pservers named by address at the short pace, and writes the benchmark's timings only when asked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from paddle_nbext_server.jobfiles import runtime_files
from paddle_nbext_server.runtime import environments, launcher, supervise

from .test_launcher import inputs

#: Run inside the bundle's launcher, as a plain script's modules: which modules did one start load?
PROBE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import launcher
code = launcher.main()
optional = ("environments", "env_build", "env_index", "env_requirements", "env_status", "gang", "importlib.metadata")
print(json.dumps({"code": code, "loaded": sorted(m for m in optional if m in sys.modules)}))
"""


def loaded_by_a_start(tmp_path: Path, **overrides: str) -> tuple[int, list[str]]:
    """The launcher's exit code and which of the optional modules it loaded."""
    bundle = tmp_path / "runtime"
    runtime_files.write_bundle(bundle)
    env = inputs(PADDLE_NBEXT_MODE="collective", PADDLE_NBEXT_WORKDIR=str(tmp_path), PADDLE_NBEXT_ENTRY="true", **overrides)
    done = subprocess.run([sys.executable, "-c", PROBE, str(bundle)], env=env, capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(done.stdout.splitlines()[-1])
    return int(found["code"]), [str(name) for name in found["loaded"]]


def test_a_plain_replica_never_imports_the_environment_or_rank_modules_nor_importlib_metadata(tmp_path: Path) -> None:
    assert loaded_by_a_start(tmp_path) == (0, [])


def test_a_trainer_of_several_ranks_imports_the_rank_supervision(tmp_path: Path) -> None:
    code, loaded = loaded_by_a_start(tmp_path, PADDLE_NBEXT_PROCS="2")
    assert code == 0 and "gang" in loaded


def test_a_job_with_requirements_imports_the_environment_module(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("not a requirement line ===\n", encoding="utf-8")
    code, loaded = loaded_by_a_start(tmp_path, PADDLE_NBEXT_REQUIREMENTS="requirements.txt", PADDLE_NBEXT_ENVS_DIR=str(tmp_path / "envs"))
    assert code == 4 and "environments" in loaded  # the environment step ran (and refused the file)


def test_the_launcher_reads_the_requirements_variable_the_environment_module_names() -> None:
    assert launcher.REQUIREMENTS_VAR == environments.REQUIREMENTS_VAR


@pytest.mark.parametrize(
    ("host", "address"), [("127.0.0.1", True), ("10.0.3.7", True), ("::1", True), ("localhost", False), ("job-ps-0.job", False)]
)
def test_pservers_named_by_address_are_looked_for_at_the_short_pace(host: str, address: bool) -> None:
    assert launcher.is_address(host) is address


# ------------------------------------------------------------------ the Paddle version from the listing


def interpreter_answers(tmp_path: Path, *dirs: tuple[str, str, str]) -> tuple[str | None, str | None]:
    """(preflight's answer, importlib.metadata's) for `paddlepaddle` in an interpreter whose only
    distributions are `dirs` (directory name, metadata file name, its Version)."""
    site = tmp_path / "site"
    for directory, file, version in dirs:
        (site / directory).mkdir(parents=True)
        (site / directory / file).write_text(
            f"Metadata-Version: 2.1\nName: paddlepaddle\nVersion: {version}\n\nBody: no\n", encoding="utf-8"
        )
    bundle = tmp_path / "runtime"
    runtime_files.write_bundle(bundle)
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import preflight, importlib.metadata as m\n"
        "try: theirs = m.version('paddlepaddle')\n"
        "except m.PackageNotFoundError: theirs = None\n"
        "print(json.dumps([preflight.installed('paddlepaddle'), theirs]))"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-S", "-c", code, str(bundle)], env=env, capture_output=True, text=True, timeout=60, check=True)
    ours, theirs = json.loads(done.stdout)
    return ours, theirs


@pytest.mark.parametrize(
    "dirs",
    [
        (("paddlepaddle-3.0.0.dist-info", "METADATA", "3.0.0"),),
        (("paddlepaddle-3.0.0.dist-info", "METADATA", "3.0.0.post1"),),  # the file's Version, not the name's
        (("paddlepaddle-3.0.0-py3.11.egg-info", "PKG-INFO", "3.0.0"),),
        (("PaddlePaddle-3.0.0.dist-info", "METADATA", "3.0.0"),),
        (("paddlepaddle-3.0.0.dist-info", "METADATA", "3.0.0"), ("paddlepaddle-3.1.0.dist-info", "METADATA", "3.1.0")),  # two: theirs
        (),
    ],
)
def test_the_listed_version_is_the_one_importlib_metadata_gives(tmp_path: Path, dirs: tuple[tuple[str, str, str], ...]) -> None:
    ours, theirs = interpreter_answers(tmp_path, *dirs)
    assert ours == theirs


# ------------------------------------------------------------------ timings for the benchmark


def test_timings_are_written_only_when_the_benchmark_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timings = tmp_path / "timings.jsonl"
    monkeypatch.delenv(supervise.TIMINGS_VAR, raising=False)
    supervise.mark("launcher.main", "trainer-0")
    assert not timings.exists()
    monkeypatch.setenv(supervise.TIMINGS_VAR, str(timings))
    supervise.mark("launcher.main", "trainer-0")
    supervise.mark("master.decided")
    lines = [json.loads(line) for line in timings.read_text().splitlines()]
    assert [(line["who"], line["event"]) for line in lines] == [("trainer-0", "launcher.main"), ("", "master.decided")]
    assert all(isinstance(line["t"], float) and isinstance(line["pid"], int) for line in lines)
    monkeypatch.setenv(supervise.TIMINGS_VAR, str(tmp_path / "no-such-dir" / "timings.jsonl"))
    supervise.mark("launcher.main", "trainer-0")  # a timing never fails the replica


def test_a_replica_of_a_deleted_job_writes_nothing_into_the_home(tmp_path: Path) -> None:
    """Issue 46: a job deleted 0.7 s after its submit left `checkpoints/.attempts/0` and `logs/`,
    written by a replica that started after the delete, and the next submit of the name was
    refused.  A replica whose job folder is gone (its jobs folder still there) runs nothing and
    makes no folder; with its folder there it runs as before."""
    jobs = tmp_path / "home" / ".paddle-jobs"
    job = jobs / "gone-1"
    jobs.mkdir(parents=True)
    overrides = {
        "PADDLE_NBEXT_WORKDIR": str(job / "package"),
        "PADDLE_NBEXT_CHECKPOINT_DIR": str(job / "checkpoints"),
        "PADDLE_NBEXT_ATTEMPT": "0.",
        "PADDLE_NBEXT_LOG_DIR": str(job / "logs"),
    }
    bundle = tmp_path / "runtime"
    runtime_files.write_bundle(bundle)
    env = inputs(PADDLE_NBEXT_MODE="collective", PADDLE_NBEXT_ENTRY="true", **overrides)
    done = subprocess.run([sys.executable, str(bundle / "launcher.py")], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "the job was deleted" in done.stdout, done.stdout + done.stderr
    assert list(jobs.iterdir()) == []
    (job / "package").mkdir(parents=True)
    done = subprocess.run([sys.executable, str(bundle / "launcher.py")], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "the job was deleted" not in done.stdout, done.stdout + done.stderr
    assert (job / "checkpoints" / ".attempts" / "0").is_file()  # a live job's replica fences its attempt
