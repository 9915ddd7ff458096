"""The job master's entry point: `python -m paddle_nbext_server.backends.local.master <job_dir>`
(`store.MASTER_MODULE`; the backend starts it detached, in its own session).  It runs the job's
`lifecycle.Master` to the job's end; a master that fails records the job as Failed with the
error, and on every way out no process of the job survives it."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from paddle_nbext.model.contract import TERMINAL_PHASES, Phase, now_iso

from ....runtime import supervise
from ..record_json import NewerRecord
from .lifecycle import Master, request_cancel


def main(argv: list[str]) -> int:
    # First thing: a cancel that arrives while the job is being read must not kill the master
    # before it can record Cancelled.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, request_cancel)
    supervise.mark("master.main")
    if len(argv) != 1:
        print("usage: python -m paddle_nbext_server.backends.local.master <job_dir>", file=sys.stderr)
        return 2
    job_dir = Path(argv[0])
    # Orphans of the replicas come to the master (`Master.stop_adopted`), not to init.
    supervise.prctl(supervise.PR_SET_CHILD_SUBREAPER, 1)
    try:
        master = Master(job_dir)
    except (OSError, ValueError, NewerRecord) as error:
        print(f"paddle-nbext local master: cannot read the job in {job_dir}: {error}", file=sys.stderr)
        return 2
    try:
        return master.run()
    except BaseException as error:
        master.kill_everything()
        master.reap()
        if master.phase not in TERMINAL_PHASES:
            master.phase = Phase.FAILED
            master.message = f"The job master failed: {type(error).__name__}: {error}"
            master.finished = now_iso()
            master.write_status()
        raise
    finally:
        master.kill_everything()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
