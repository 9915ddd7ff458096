"""Python API: `submit()`, `jobs()`, the `Job` handle, and the original design's `PaddleJob` +
`dist_train()` as a thin layer over them.

A `Job` is a name plus the last status the server sent; every method that needs fresh data asks
the server (there is no hidden polling here — the live view in notebooks is the status widget,
created only when a job is displayed in a kernel that has a frontend).
"""

from __future__ import annotations

import inspect
import os
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any, ClassVar, Literal, overload

from . import display
from .client import Client, PaddleNbextError
from .health import Timeline, Usage
from .metrics import SPARKLINE_POINTS, MetricsTable, metrics_html, table_from
from .model.contract import Phase, Role, is_terminal
from .model.spec import JobSpec
from .model.status import JobStatus, SubmitPlan
from .ranklog import rank_lines, rank_stream

__all__ = [
    "Job",
    "JobList",
    "LogText",
    "PaddleJob",
    "SubmitPlan",
    "connect",
    "dist_train",
    "environments",
    "get_client",
    "jobs",
    "prune_environments",
    "remove_environment",
    "submit",
    "ENTRY_SCRIPT_NAME",
]

#: The file the server writes `entry_script` to, inside the job's package snapshot.
ENTRY_SCRIPT_NAME = "paddle_entry.py"
ENTRY_SCRIPT_COMMAND = f"python {ENTRY_SCRIPT_NAME}"
#: Phases only a `Job` handle shows, never the server: not asked yet, and deleted through it.
UNKNOWN = "Unknown"
DELETED = "Deleted"

_default_client: Client | None = None


def connect(url: str | None = None, token: str | None = None) -> Client:
    """Use this server for every later call (default: discovered from the environment)."""
    global _default_client
    _default_client = Client(url, token)
    return _default_client


def get_client(client: Client | None = None) -> Client:
    """The given client, else the default one (created on first use)."""
    global _default_client
    if client is not None:
        return client
    if _default_client is None:
        _default_client = Client()
    return _default_client


def _in_widget_frontend() -> bool:
    """True inside a Jupyter kernel (a frontend can show widgets); False in terminal IPython."""
    ipython_module = sys.modules.get("IPython")
    if ipython_module is None:
        return False
    shell = ipython_module.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class LogText(str):
    """Log output that displays as the raw text (no quotes, newlines kept)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self) if self else "(no output yet)")

    def _repr_html_(self) -> str:
        import html

        return f"<pre class='paddle-logs'>{html.escape(str(self))}</pre>"


class Job:
    """Handle for one job on the server.  `last` is the status from the latest request (phase
    `Unknown` until the server was asked, `Deleted` after `delete()`)."""

    def __init__(self, name: str, client: Client | None = None, status: JobStatus | None = None):
        self.name = name
        self.client = get_client(client)
        self.last: JobStatus = (
            status if status is not None else JobStatus(name=name, owner="", backend="", phase=UNKNOWN, message="", spec={}, created="")
        )

    @property
    def phase(self) -> str:
        return str(self.last.phase)

    @property
    def done(self) -> bool:
        return is_terminal(self.phase)

    def status(self) -> JobStatus:
        """Fresh status from the server (see docs/architecture.md, "Job status")."""
        self.last = self.client.get_job(self.name)
        return self.last

    def wait(self, timeout: float | None = None, poll: float = 1.0, on_status: Callable[[JobStatus], None] | None = None) -> Job:
        """Block until the job ends (Succeeded, Failed or Cancelled); returns the job.

        A job whose record the server cannot read (phase Unknown, the message naming the damaged
        file) returns at once too: waiting would never end, and the message says what to do.
        `on_status` is called with every status fetched, the last one included (to show progress).
        Raises `TimeoutError` naming the current phase when `timeout` seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def fetched() -> JobStatus:
            status = self.status()
            if on_status is not None:
                on_status(status)
            return status

        while not (status := fetched()).terminal and status.phase != Phase.UNKNOWN:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.name} is still {self.phase} after {timeout:g} s")
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))
        return self

    def logs(
        self,
        role: str = Role.TRAINER,
        index: int = 0,
        *,
        tail: int | None = None,
        previous: bool = False,
        follow: bool = False,
        rank: int | None = None,
    ) -> LogText | None:
        """The replica's log.  With `follow=True` it is printed as it is written until the replica
        ends, and nothing is returned (so a notebook does not show it twice).  `rank`: only that
        rank's lines of a trainer of several ranks (without their `[rank r] ` prefix; `tail`
        counts the trainer's lines)."""
        if follow:
            for chunk in self.follow_logs(role, index, tail=tail, rank=rank):
                sys.stdout.write(chunk)
                sys.stdout.flush()
            return None
        text = self.client.logs(self.name, role=role, index=index, tail=tail, previous=previous)
        return LogText(text if rank is None else rank_lines(text, rank))

    def follow_logs(self, role: str = Role.TRAINER, index: int = 0, *, tail: int | None = None, rank: int | None = None) -> Iterator[str]:
        chunks = self.client.follow_logs(self.name, role=role, index=index, tail=tail)
        return chunks if rank is None else rank_stream(chunks, rank)

    def metrics(self, points: int | None = None) -> MetricsTable:
        """What the replicas `report()`ed: one dict per point (replica, role, index, step, time
        and the metrics), in each replica's order; `.to_pandas()` gives a DataFrame.  With
        `points`, at most that many per replica and metric (first, last and extremes kept)."""
        return table_from(self.metrics_raw(points=points))

    def metrics_raw(self, points: int | None = None, since: str | None = None) -> dict[str, Any]:
        """The server's answer as is: per replica series, progress, and a `cursor` for `since`."""
        return self.client.metrics(self.name, points=points, since=since)

    def usage(self) -> Usage:
        """CPU cores and memory each replica uses now (its whole process tree on the local
        backend) beside its request and limit, its peak, and recent samples; renders as a table
        (`.to_dict()` is the server's answer).  When there are no figures, `.reason` says why."""
        return Usage(self.client.usage(self.name))

    def timeline(self) -> Timeline:
        """What happened to the job so far, oldest first, with times: submitted, waiting and
        why, started, first step, checkpoints, warnings, restarts and causes, the end."""
        return Timeline(self.client.timeline(self.name))

    def cancel(self) -> Job:
        """Stop the job; its record and logs stay (use `delete()` to remove them)."""
        self.last = self.client.cancel(self.name)
        return self

    def resume(self, **changes: Any) -> Job:
        """Start this Cancelled or Failed job again as a new job from its latest checkpoint
        (same spec unless `changes` say otherwise, e.g. `job_name=`, `trainers=`); the new job."""
        status = self.client.resume(self.name, **changes)
        return Job(status.name, self.client, status)

    def checkpoints(self) -> dict[str, Any]:
        """Its checkpoints (step, time, size), their size, the job dir's size and the job it
        was resumed from (`GET /jobs/{name}/checkpoints`)."""
        return self.client.checkpoints(self.name)

    def delete(self, keep_checkpoints: bool = False) -> None:
        """Remove the job, its processes or objects, its snapshot, its logs and its checkpoints
        (`keep_checkpoints=True` moves those to `~/paddle-checkpoints/` first)."""
        self.client.delete(self.name, keep_checkpoints=keep_checkpoints)
        # Nothing of the job is left to count: no replicas, and no spec whose replica counts a
        # view would show as wanted.
        self.last = replace(self.last, phase=DELETED, message="Deleted.", replicas=[], spec={})

    def widget(self, interval: float = 2.0) -> Any:
        """A live status view (ipywidgets), refreshed every `interval` seconds until the job ends."""
        from .widgets.status import JobStatusView

        return JobStatusView(self, interval=interval)

    # ---- reprs
    def __repr__(self) -> str:
        return f"<Job {self.name}: {self.phase}>"

    def __str__(self) -> str:
        return display.status_text(self.last)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(display.status_text(self.last))

    def _repr_html_(self) -> str:
        """The card; an ended job's has its progress bar and loss sparkline too, as the live view
        had (what `%%paddle_submit --wait` ends on)."""
        card = display.status_html(self.last)
        if not self.done:
            return card
        try:
            return card + metrics_html(self.metrics_raw(points=SPARKLINE_POINTS), self.phase)
        except PaddleNbextError:
            return card  # a server without metrics, or the job is gone: the status matters more

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any] | None:
        """In a notebook, a running job displays as a live status widget; elsewhere (terminal
        IPython, ended jobs) the text/HTML reprs are used and ipywidgets is never imported."""
        if self.done or self.phase == DELETED or not _in_widget_frontend():
            return None
        bundle: dict[str, Any] | None = self.widget()._repr_mimebundle_()
        if bundle:
            bundle["text/plain"] = display.status_text(self.last)
            bundle["text/html"] = display.status_html(self.last)
        return bundle


class JobList(list[Job]):
    """`jobs()` result: a list of `Job` that displays as a table."""

    def statuses(self) -> Iterable[JobStatus]:
        return (job.last for job in self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(display.jobs_text(self.statuses()))

    def _repr_html_(self) -> str:
        return display.jobs_html(self.statuses())


def jobs(client: Client | None = None) -> JobList:
    """The caller's jobs, newest first."""
    client = get_client(client)
    return JobList(Job(status.name, client, status) for status in client.list_jobs())


def environments(client: Client | None = None) -> list[dict[str, Any]]:
    """Your jobs' Python environments (built from their packages' requirements files), most
    recently used first: key, requirements, packages, size (bytes), built, last_used, in_use_by."""
    return list(get_client(client).environments().get("environments") or [])


def prune_environments(
    unused_days: int = 30, *, dry_run: bool = False, cache: bool = False, client: Client | None = None
) -> dict[str, Any]:
    """Remove the environments no job started with for `unused_days` days and no running job
    uses (`cache=True`: the download cache too; `dry_run=True`: only say what would go).  Returns
    what was removed and kept, and the bytes `freed`."""
    return get_client(client).prune_environments(unused_days=unused_days, dry_run=dry_run, cache=cache)


def remove_environment(key: str, client: Client | None = None) -> dict[str, Any]:
    """Remove one environment now (refused while a running job uses it): `{"key", "size"}`."""
    return get_client(client).remove_environment(key)


def notifications(client: Client | None = None) -> dict[str, Any]:
    """Your notification settings (`settings`), the events you may pick (`events`), and per channel
    (`channels["webhook"]`, `channels["email"]`) whether the admin offers it, whether the last
    delivery worked (`ok`), its error in words (`last_error`) and how many messages wait (`pending`)."""
    return get_client(client).notifications()


def set_notifications(
    *,
    events: list[str] | None = None,
    webhook_url: str | None = None,
    webhook_format: str | None = None,
    email: str | None = None,
    client: Client | None = None,
) -> dict[str, Any]:
    """Set where you are told about your jobs, once for all of them.  What you leave out keeps its
    value; `""` turns a channel off.  `events`: any of failed, succeeded, stalled, memory, started;
    `webhook_format`: "json" (the event as an object) or "slack" (Slack/Mattermost's `{"text": ...}`).
    A webhook host the admin does not allow raises `ApiError` (400) naming `webhook_url`."""
    client = get_client(client)
    settings = dict(client.notifications()["settings"])
    settings.pop("updated", None)
    changes = {"events": events, "webhook_url": webhook_url, "webhook_format": webhook_format, "email": email}
    settings.update({key: value for key, value in changes.items() if value is not None})
    return client.set_notifications(settings)


@overload
def submit(
    entry_point: str | None = None, *, script: str | None = None, dry_run: Literal[False] = False, client: Client | None = None, **spec: Any
) -> Job: ...


@overload
def submit(
    entry_point: str | None = None, *, script: str | None = None, dry_run: Literal[True], client: Client | None = None, **spec: Any
) -> SubmitPlan: ...


@overload
def submit(
    entry_point: str | None = None, *, script: str | None = None, dry_run: bool, client: Client | None = None, **spec: Any
) -> Job | SubmitPlan: ...


def submit(
    entry_point: str | None = None,
    *,
    script: str | None = None,
    dry_run: bool = False,
    client: Client | None = None,
    **spec: Any,
) -> Job | SubmitPlan:
    """Submit a job; returns its `Job` (or, with `dry_run=True`, the server's `SubmitPlan`).

    `spec` takes the job fields of docs/architecture.md (`job_name`, `trainers`, `trainer_cpu`, ...).
    `script` is Python source the server writes as `paddle_entry.py` into the package snapshot;
    it is then run with `python paddle_entry.py` unless `entry_point` says otherwise.
    `trainer_package` defaults to the current directory (absolute), as the design asks."""
    client = get_client(client)
    body = {k: v for k, v in spec.items() if v is not None}
    if entry_point is not None:
        body["entry_point"] = entry_point
    elif script is not None:
        body["entry_point"] = ENTRY_SCRIPT_COMMAND
    body.setdefault("trainer_package", os.getcwd())
    body["trainer_package"] = os.path.abspath(os.path.expanduser(str(body["trainer_package"])))
    if dry_run:
        return client.submit(body, entry_script=script, dry_run=True)
    status = client.submit(body, entry_script=script)
    return Job(status.name, client, status)


# ---- the original design's names ------------------------------------------------------------


class PaddleJob:
    """The original design's job description; its fields are the job model's (the field table
    `paddle_nbext.model.spec.JOB_FIELDS`): each is a keyword argument and an attribute, None (the
    server's default) unless given.

    Only `job_name` and the resources are usually given; `entry_point` can come from
    `dist_train(trainer=...)` instead."""

    __signature__: ClassVar[inspect.Signature]

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(JobSpec.FIELDS))
        if unknown:
            raise TypeError(f"PaddleJob() got unknown field(s) {', '.join(unknown)}; the job fields are: {', '.join(JobSpec.FIELDS)}")
        for name in JobSpec.FIELDS:
            setattr(self, name, values.get(name))

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"PaddleJob has no field {name!r}; the job fields are: {', '.join(JobSpec.FIELDS)}")

    def to_spec(self) -> dict[str, Any]:
        """The set fields as a job-spec dict (None, and an empty env, mean: the server's default)."""
        spec = {name: getattr(self, name) for name in JobSpec.FIELDS}
        return {name: value for name, value in spec.items() if value is not None and not (name == "env" and not value)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PaddleJob) and self.to_spec() == other.to_spec()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        return f"PaddleJob({', '.join(f'{name}={value!r}' for name, value in self.to_spec().items())})"


PaddleJob.__signature__ = inspect.Signature(
    [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in JobSpec.FIELDS]
)


def _function_script(function: Callable[..., Any]) -> str:
    """Entry script for a function trainer: its source, then a call to it.

    The function runs in a fresh Python process on every trainer replica, so it must be
    self-contained: imports inside its body (or at the top of the script file it lives in is NOT
    enough — only the function's own source is shipped) and no arguments."""
    if not inspect.isfunction(function):
        raise TypeError(f"trainer must be a function, a script path or None, got {type(function).__name__}")
    if function.__name__ == "<lambda>":
        raise ValueError("trainer: a lambda has no name to call; define it with `def`")
    required = [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if required:
        raise ValueError(f"trainer: {function.__name__}() must take no required arguments (it takes {', '.join(required)})")
    try:
        source = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError) as error:
        raise ValueError(f"trainer: the source of {function.__name__}() is not available ({error}); pass a script path instead") from None
    return f"{source}\n\nif __name__ == '__main__':\n    {function.__name__}()\n"


def dist_train(
    trainer: Callable[..., Any] | str | None = None,
    paddle_job: PaddleJob | None = None,
    *,
    wait: bool = False,
    client: Client | None = None,
) -> Job:
    """Run `trainer` as a distributed job described by `paddle_job` (the original design's call).

    `trainer` may be:
    - a function: its source plus a call to it becomes the job's entry script
      (`paddle_entry.py` in the package snapshot), run on every replica — pservers too, since
      Fleet decides the role from the environment the launcher sets; the function must import
      what it uses inside its body and take no required arguments;
    - a path to a script inside `trainer_package` (absolute or relative to it), run as
      `python <path>`;
    - None: `paddle_job.entry_point` is used.
    With `wait=True` it blocks until the job ends."""
    paddle_job = paddle_job or PaddleJob()
    spec = paddle_job.to_spec()
    package = os.path.abspath(os.path.expanduser(spec.get("trainer_package") or os.getcwd()))
    spec["trainer_package"] = package
    script = None
    if callable(trainer):
        script = _function_script(trainer)
        spec.setdefault("entry_point", ENTRY_SCRIPT_COMMAND)
    elif isinstance(trainer, (str, os.PathLike)):
        path = os.path.abspath(os.path.join(package, os.fspath(trainer)))
        if not os.path.isfile(path):
            raise FileNotFoundError(f"trainer: {path} is not a file")
        relative = os.path.relpath(path, package)
        if relative.startswith(".."):
            raise ValueError(f"trainer: {path} is outside trainer_package {package}; move it there or change trainer_package")
        spec["entry_point"] = f"python {relative}"
    elif trainer is not None:
        raise TypeError(f"trainer must be a function, a script path or None, got {type(trainer).__name__}")
    job: Job = submit(script=script, dry_run=False, client=client, **spec)
    if wait:
        job.wait()
    return job
