"""A job's environment build as its master says it: the job's message ("Preparing environment:
...") while the replicas' launchers build the environment of its `requirements`, and the build's
steps in the timeline (building, then ready or reused, or failed).

The launchers do the build (`runtime/environments.py`) and write its status beside the logs; the
master only reads that file, again only when it changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ....jobfiles import timeline


class EnvironmentProgress:
    """Reads the environment's status file of one job for its master's loop."""

    def __init__(self, logs: Path, plan_env: Mapping[str, str], writer: timeline.TimelineWriter) -> None:
        self.logs = logs
        self.plan_env = plan_env
        self.timeline = writer
        self._seen: tuple[int, str | None] = (0, None)  # (the file's mtime, its message)
        self._state = ""  # the last state said in the timeline

    def message(self) -> str | None:
        """The job's message while its environment is built; None: the job has no requirements,
        or no build said anything yet."""
        from ....runtime import environments  # first asked once the replicas run, off their start's way

        if environments.REQUIREMENTS_VAR not in self.plan_env:
            return None
        path = self.logs / environments.STATUS_FILE
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            return None
        if stamp != self._seen[0]:
            status = environments.read_json(str(path))
            self._seen = (stamp, environments.phase_message(status) if status else None)
            self.say(status or {})
        return self._seen[1]

    def say(self, status: dict[str, Any]) -> None:
        """The environment's steps in the timeline: building, then ready (or reused) or failed."""
        state = status.get("state")
        if not isinstance(state, str) or state == self._state:
            return
        self._state = state
        if state == "building":
            from ....runtime import environments

            self.timeline.add("environment", f"{environments.phase_message(status) or 'Preparing environment'}.")
        elif state == "ready":
            packages = status.get("packages")
            what = f" ({packages} package{'s' if packages != 1 else ''})" if isinstance(packages, int) else ""
            self.timeline.add("environment", f"Environment {'reused' if status.get('reused') else 'ready'}{what}.")
        elif state == "failed":
            self.timeline.add("environment", f"The environment could not be built: {status.get('reason') or 'see the environment log'}.")
