"""The growing job of the training-health checks, one copy for the server and browser suites and
the health benchmark: a local job (plain Python, no Paddle) whose one trainer grows its process
tree to 93 % of a 256 MiB limit, says when it crossed 90 % (`crossed <epoch seconds>` in its
log), reports one step and holds there until the file `GO_FILE` exists; then it grows past the
limit and is stopped with MemoryLimitExceeded.

`health_job_body` is the REST body (`POST /jobs`) that runs it; `write_grower` puts its script
into a trainer package, for callers that submit it another way (the benchmark, to a backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The trainer's memory limit, in MiB (the job's `trainer_mem`).
LIMIT_MIB = 256
#: The script's file name in the trainer package; the job's entry point runs it.
SCRIPT = "grow.py"
ENTRY_POINT = f"python {SCRIPT}"
#: Grows the replica's whole tree (itself and its launcher, its parent) to 93 % of LIMIT_MIB,
#: stamping the 90 % crossing; reports; holds until GO_FILE; then goes over the limit.
GROWER = """\
import os, time
from paddle_nbext_job import flush, report
limit = int(os.environ["LIMIT_MIB"]) << 20
def resident(pid):
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
held = []
crossed = None
while (used := resident(os.getpid()) + resident(os.getppid())) < 0.93 * limit:
    if crossed is None and used >= 0.9 * limit:
        crossed = time.time()
    held.append(b"x" * (1 << 20))
print(f"crossed {crossed or time.time():.3f}", flush=True)
report(1, loss=1.0)
flush()
print("holding", flush=True)
while not os.path.exists(os.environ["GO_FILE"]):
    time.sleep(0.05)
while True:
    held.append(b"x" * (4 << 20))
"""


def write_grower(package: Path) -> str:
    """The grower script in `package` (made if missing); returns the entry point that runs it."""
    package.mkdir(parents=True, exist_ok=True)
    (package / SCRIPT).write_text(GROWER)
    return ENTRY_POINT


def job_env(go: Path) -> dict[str, str]:
    """The job's environment: its limit, and the file whose existence lets it go over."""
    return {"LIMIT_MIB": str(LIMIT_MIB), "GO_FILE": str(go)}


def health_job_body(name: str, package: str, go: Path) -> dict[str, Any]:
    """`POST /jobs` body of the growing job: one trainer, collective, `LIMIT_MIB` MiB, its script
    in `package` (as the request names it: relative to the home, or absolute)."""
    return {
        "job_name": name,
        "mode": "collective",
        "entry_point": ENTRY_POINT,
        "trainer_package": package,
        "trainer_mem": f"{LIMIT_MIB}Mi",
        "env": job_env(go),
    }
