"""A started local backend hears of a job's end from its master's exit (a pidfd it watches): the
terminal event comes on the stream and the master it started is reaped, not left a zombie
(an ended job is never polled again)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from paddle_jobs.local_jobs import OWNER, backend_for, request
from paddle_nbext.model.contract import is_terminal


def test_the_end_is_published_and_the_master_reaped(home: Path) -> None:
    async def scenario() -> tuple[str, bool]:
        backend = backend_for(home, poll_interval=30.0)  # the poll alone would take 30 s
        await backend.start()
        try:
            async with backend.events.subscribe(OWNER) as events:
                await backend.submit(request(home, job_name="quick", mode="collective", trainers=1, entry_point="true"))
                while True:
                    event = await asyncio.wait_for(events.get(), 25)
                    phase = (event.job or {}).get("phase")
                    if event.name == "quick" and isinstance(phase, str) and is_terminal(phase):
                        break
                # Read while the backend (the master's parent) lives: dropping it would reap too.
                master = int((home / ".paddle-jobs" / "quick" / "master.pid").read_text())
                return phase, Path(f"/proc/{master}").exists()
        finally:
            await backend.stop()

    phase, listed = asyncio.run(scenario())
    assert phase == "Succeeded"
    assert not listed  # reaped: a zombie would still be listed in /proc
