"""The job lifecycle policy, shared by the local master, the in-cluster master and the server's
own reconciliation, so every backend ends jobs by the same rules (docs/architecture.md "Lifecycle policy", docs/paddle-facts.md).

Standard library only: this file is shipped into job containers, with the shared contract
(`paddle_nbext.model.contract`, phases and roles) beside it.

Rules, in order:
1. cancelled                         -> Cancelled, stop everything
2. past the timeout                  -> Failed (DeadlineExceeded), stop everything
   (the job's environment could not be built -> Failed in the installer's words)
   a trainer's launcher stopped it for a stall (on_stall restart/fail, Kubernetes) -> a whole
   restart counted like a failure's while restarts are left and on_stall is restart, else Failed
   in the stall's words (`stall_decision`)
3. a trainer failed, no retries left -> Failed naming that replica, exit code and log tail
4. a pserver ended before the trainers finished -> Failed (trainers would carry on silently)
5. every trainer succeeded           -> Succeeded, stop the pservers (their SIGTERM end is normal)
6. a trainer failed with retries left -> restart the whole job, job keeps its phase
7. otherwise Running if any replica runs, else Pending (with the pending reason)
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext.model import contract, paddle_noise
else:  # a plain script: in a job's bundle, the contract shipped beside it (even where the image
    # has some other paddle-nbext installed); run from a source tree, the installed one
    try:
        import contract  # type: ignore[import-not-found,no-redef]
        import paddle_noise  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import contract, paddle_noise

Phase, ReplicaPhase, Role = contract.Phase, contract.ReplicaPhase, contract.Role
ENVIRONMENT_EXIT_CODE = contract.ENVIRONMENT_EXIT_CODE
STALL_EXIT_CODE = contract.STALL_EXIT_CODE


@dataclass
class Observed:
    """What the runner knows about one replica right now."""

    role: str
    index: int
    phase: str  # a `ReplicaPhase`
    exit_code: int | None = None
    restarts: int = 0
    reason: str | None = None
    log_tail: str = ""
    finished: str | None = None  # ISO 8601 UTC, when it ended (seconds resolution)


@dataclass
class Decision:
    phase: str  # a `Phase`
    message: str
    stop: list[tuple[str, int]] = field(default_factory=list)  # replicas to terminate
    #: Non-empty: restart the whole job (every replica stopped and started again together; a
    #: Paddle replica restarted alone never rejoins its gang).  Lists the replicas that caused it.
    restart: list[tuple[str, int]] = field(default_factory=list)
    #: The restart is for an eviction, drain or preemption, which does not use up max_restarts.
    disruption: bool = False

    @property
    def terminal(self) -> bool:
        return contract.is_terminal(self.phase)


#: What to do when a pserver's code never serves (docs/paddle-facts.md: a pserver only ends when stopped).
NEVER_SERVED_HINT = (
    "its code never served. In parameter-server mode the code must call fleet.init_server() and "
    "fleet.run_server() when fleet.is_server() (see the user guide's parameter-server section), "
    "or submit the script with mode=collective to run it on trainers only."
)

#: Signals a replica ends by, with what usually sent them: the likely cause is what the user needs.
SIGNALS = {
    1: ("SIGHUP", "its terminal or parent went away"),
    2: ("SIGINT", "interrupted"),
    6: ("SIGABRT", "aborted, e.g. a failed check in Paddle's C++ code or another rank's failure"),
    7: ("SIGBUS", "a bad memory access, e.g. shared memory (/dev/shm) too small"),
    9: ("SIGKILL", "out of memory?"),
    11: ("SIGSEGV", "a crash in native code"),
    15: ("SIGTERM", "stopped from outside"),
}


#: Signals a replica usually dies of *because another one failed*: a collective rank aborts
#: (SIGABRT) when its peer dies, and a runner or the kubelet stops the rest (SIGTERM).
CONSEQUENTIAL_SIGNALS = frozenset({6, 15})


#: Seconds a job whose failed trainers were all aborted or stopped (a consequence) waits for the
#: other trainers to end: the rank whose code failed often ends after the ranks it took down
#: (its traceback and Paddle's shutdown lines take longer than a peer's abort), and the job's
#: message must name it, not the first rank that happened to die.
SETTLE_SECONDS = 15.0


def epoch(stamp: str | None) -> float | None:
    """Seconds since the epoch of an ISO 8601 UTC time (``2026-12-01T21:30:00Z``), None if unreadable."""
    if not stamp:
        return None
    try:
        moment = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def _settling(failed: list[Observed], trainers: list[Observed], now: float | None) -> bool:
    """Whether to wait before naming a failure: every finally failed trainer died of a
    consequential signal, another trainer still runs, and the first of them ended less than
    `SETTLE_SECONDS` ago (`now` None: never wait)."""
    if now is None or not failed or any(signal_of(t.exit_code) not in CONSEQUENTIAL_SIGNALS for t in failed):
        return False
    if not any(t.phase == ReplicaPhase.RUNNING for t in trainers):
        return False
    ends = [e for e in (epoch(t.finished) for t in failed) if e is not None]
    return bool(ends) and now - min(ends) < SETTLE_SECONDS


def signal_of(exit_code: int | None) -> int | None:
    """The signal a process died of, from its exit code (negative, or 128 + N), else None."""
    if exit_code is None:
        return None
    if exit_code < 0:
        return -exit_code
    return exit_code - 128 if exit_code > 128 else None


def blame_order(replica: Observed) -> tuple[bool, bool, bool, int]:
    """Which failed replica the job's message names: one whose own code failed (an exception's
    exit code, a crash, an out-of-memory kill) before one that was aborted or stopped because of
    it, and before one whose end nobody saw (its pod is gone; only its Job says it failed: on
    Kubernetes the Job controller deletes a failed Job's other pods); among those alike, one
    whose log shows a Python exception (the replica that raised may itself be stopped, SIGTERM,
    before its launcher exits with the rank's code, while its peer aborts); then the lowest index."""
    return (signal_of(replica.exit_code) in CONSEQUENTIAL_SIGNALS, replica.exit_code is None, not raised(replica.log_tail), replica.index)


def raised(log_tail: str) -> bool:
    """Whether a log tail shows a Python exception (a traceback of any rank's)."""
    return any(paddle_noise.RANK_PREFIX.sub("", line, count=1).strip() == _TRACEBACK for line in log_tail.splitlines())


def describe_signal(number: int) -> str:
    """`SIGKILL — out of memory?` for people; the bare number when it is not a usual one."""
    if number not in SIGNALS:
        return f"signal {number}"
    name, cause = SIGNALS[number]
    return f"{name} — {cause}"


def describe_exit(exit_code: int | None) -> str:
    """How people read process ends, with the likely cause of a signal:
    'exit code 3', 'killed by signal 9 (SIGKILL — out of memory?)', 'exit code 139 (SIGSEGV — ...)'.
    A shell or container runtime reports a signal as 128 + its number."""
    if exit_code is None:
        return "an unknown exit status"
    if exit_code < 0:
        return f"killed by signal {-exit_code}" + (f" ({describe_signal(-exit_code)})" if -exit_code in SIGNALS else "")
    if exit_code > 128 and exit_code - 128 in SIGNALS:
        return f"exit code {exit_code} ({describe_signal(exit_code - 128)})"
    return f"exit code {exit_code}"


# Paddle's noise (its glog lines, a fatal signal's report, its setup chatter, its own warnings):
# the rules live in `paddle_nbext.model.paddle_noise`, shipped beside this file in a job's bundle
# and read by the notebook's widgets too; `failure_line` skips those lines to name a failure.
NOISE_GLOG, NOISE_LINES, NOISE_WARNING = paddle_noise.NOISE_GLOG, paddle_noise.NOISE_LINES, paddle_noise.NOISE_WARNING
is_noise_line, noise_mask = paddle_noise.is_noise_line, paddle_noise.noise_mask
_TRACEBACK = "Traceback (most recent call last):"
#: A reason that says no more than the exit code (Kubernetes' `Error` as `replicas.py` words it):
#: a rank's own words say more.
_EXIT_ONLY = re.compile(r"Exit code \d+|Error")


def failure_line(text: str) -> str:
    """The line of a failed replica's log that says why it failed: the exception line of the
    last Python traceback (`ValueError: bad batch`), else the last line that is not Paddle's
    noise (`noise_mask`).  One function for both backends and the in-cluster master."""
    raw = text.splitlines()
    noise = noise_mask(raw)
    lines = [line.rstrip() for line in raw]
    start = max((i for i, line in enumerate(lines) if line.strip() == _TRACEBACK), default=None)
    if start is not None:
        for line, hidden in zip(lines[start + 1 :], noise[start + 1 :], strict=True):
            if line.strip() and not line.startswith((" ", "\t")) and not hidden:
                return line.strip()[:300]
    # A rank's blank line (`[rank 1] `) says nothing either.
    meaningful = [
        line.strip()
        for line, hidden in zip(raw, noise, strict=True)
        if not hidden and paddle_noise.RANK_PREFIX.sub("", line, count=1).strip()
    ]
    return meaningful[-1][:300] if meaningful else ""


#: The last line a trainer's launcher writes when one of its ranks failed (runtime/gang.py).
_RANK_FAILURE = re.compile(r"^trainer (\d+) rank (\d+) failed: (.*)$")


def failure_words(replica: Observed) -> tuple[str, str]:
    """Who failed and why, from a failed replica's log tail: (`trainer 1`, `ValueError: ...`).
    When a trainer's launcher named the rank that failed it (`trainer 1 rank 2 failed: <why>`),
    that rank is who (`trainer 1 rank 2`) and its words are why, so a message never says the
    trainer twice; a why that only repeats the exit code is dropped."""
    who, why = f"{replica.role} {replica.index}", failure_line(replica.log_tail)
    found = _RANK_FAILURE.match(why)
    if found and int(found[1]) == replica.index:
        who, why = f"{who} rank {found[2]}", found[3]
        if why == describe_exit(replica.exit_code):
            why = ""
    elif (raising := _rank_exception(replica.log_tail)) is not None:
        # The launcher had no time to say which rank failed (it was killed): the rank whose
        # traceback is in the log is who, its exception line why.
        who, why = f"{who} rank {raising[0]}", raising[1]
    return who, why


def _rank_exception(text: str) -> tuple[str, str] | None:
    """(rank, exception line) of the last rank's Python traceback in a trainer's log of several
    ranks (`[rank 1] Traceback ...` ... `[rank 1] ValueError: ...`), else None."""
    lines = text.splitlines()
    starts = [
        i
        for i, line in enumerate(lines)
        if paddle_noise.RANK_PREFIX.match(line) and paddle_noise.RANK_PREFIX.sub("", line, count=1).strip() == _TRACEBACK
    ]
    if not starts:
        return None
    start = paddle_noise.RANK_PREFIX.match(lines[starts[-1]])
    assert start is not None  # `starts` holds only lines that match
    prefix = start[0]
    for line in lines[starts[-1] + 1 :]:
        if line.startswith(prefix):
            body = line[len(prefix) :]
            if body.strip() and not body.startswith((" ", "\t")):
                return prefix[len("[rank ") : -2], body.strip()[:300]
    return None


#: How the launcher words a job's environment that could not be built (launcher.ENVIRONMENT_FAILED).
_ENVIRONMENT_FAILED = re.compile(r"^paddle-nbext launcher: the job's environment could not be built: (.*)$")


def environment_failure(replica: Observed) -> str:
    """The job's message when its environment could not be built: the installer's words, which
    the launcher said last; never restarted, since every attempt would meet the same installer."""
    for line in reversed(replica.log_tail.splitlines()):
        found = _ENVIRONMENT_FAILED.match(line.strip())
        if found:
            return f"The job's environment could not be built: {found[1]}"
    return f"The job's environment could not be built ({replica.role} {replica.index} ended with exit code {ENVIRONMENT_EXIT_CODE}); see its log."


#: A replica's reason when its container's termination message holds the stall's words
#: (`replicas.pod_view`); the launcher's last line says the same (`_STALLED`).
STALL_REASON = "Stalled: "
#: How the launcher words the stall it stopped its trainer for (replica_health.STALLED).
_STALLED = re.compile(r"^paddle-nbext launcher: the training stalled: (.*)$")


def stall_words(replica: Observed) -> str | None:
    """The stall's words ("no progress for 10 min since step 1234; trainer 1 last wrote at
    14:02:05") when the replica's launcher stopped it for a stall: exit `STALL_EXIT_CODE` with its
    termination message (the reason) or its last words in the log saying so; else None."""
    if replica.phase != ReplicaPhase.FAILED or replica.exit_code != STALL_EXIT_CODE:
        return None
    reason = replica.reason or ""
    if reason.startswith(STALL_REASON) and reason[len(STALL_REASON) :].strip():
        return reason[len(STALL_REASON) :].strip()
    for line in reversed(replica.log_tail.splitlines()):
        found = _STALLED.match(line.strip())
        if found:
            return found[1].strip()
    return None


def stall_decision(replicas: list[Observed], *, max_restarts: int, on_stall: str, runner_restarts: bool = True) -> Decision | None:
    """What follows a trainer stopped for a stall (the lowest index, when several were), as the
    local master decides it (`master.lifecycle.Master.check_health`): `on_stall` restart with restarts left
    restarts the whole job, counted like a failure's; else the job fails in the stall's words.
    None when no trainer was stopped for a stall."""
    trainers = sorted((r for r in replicas if r.role == Role.TRAINER), key=lambda r: r.index)
    stalled = next(((t, words) for t in trainers if (words := stall_words(t)) is not None), None)
    if stalled is None:
        return None
    trainer, words = stalled
    running = [(r.role, r.index) for r in replicas if r.phase in (ReplicaPhase.RUNNING, ReplicaPhase.PENDING)]
    if on_stall != "restart":
        return Decision(Phase.FAILED, f"The job stalled: {words}; on_stall is '{on_stall}'.", stop=running)
    used = max(t.restarts for t in trainers)
    if used >= max_restarts:
        return Decision(Phase.FAILED, f"The job stalled: {words}; no restarts left (max_restarts {max_restarts}).", stop=running)
    message = f"restart {used + 1} of {max_restarts}: the job stalled ({words}); all replicas restarting"
    any_running = any(r.phase == ReplicaPhase.RUNNING for r in replicas)
    restart = [(trainer.role, trainer.index)] if runner_restarts else []
    return Decision(Phase.RUNNING if any_running else Phase.PENDING, message, restart=restart)


def decide(
    replicas: list[Observed],
    *,
    max_restarts: int,
    cancelled: bool = False,
    timed_out_after: int | None = None,
    runner_restarts: bool = True,
    now: float | None = None,
    on_stall: str = "warn",
) -> Decision:
    """Decide the job phase and actions from the replicas' states.

    `runner_restarts=False` leaves restarting to someone else: the decision only says whether
    the job has ended.
    `now` (seconds since the epoch) lets a failure that looks like a consequence (SIGABRT,
    SIGTERM) wait up to `SETTLE_SECONDS` for the trainer that caused it to end too.
    `on_stall` is the job's: what a trainer stopped for a stall by its launcher leads to.
    """
    running = [(r.role, r.index) for r in replicas if r.phase in (ReplicaPhase.RUNNING, ReplicaPhase.PENDING)]
    trainers = [r for r in replicas if r.role == Role.TRAINER]
    pservers = [r for r in replicas if r.role == Role.PSERVER]

    if cancelled:
        return Decision(Phase.CANCELLED, "Cancelled by the user; logs are kept until the job is deleted.", stop=running)
    if timed_out_after is not None:
        return Decision(Phase.FAILED, f"DeadlineExceeded: the job ran longer than its timeout of {timed_out_after}s.", stop=running)
    unbuildable = next(
        (r for r in sorted(replicas, key=blame_order) if r.phase == ReplicaPhase.FAILED and r.exit_code == ENVIRONMENT_EXIT_CODE), None
    )
    if unbuildable is not None:
        return Decision(Phase.FAILED, environment_failure(unbuildable), stop=running)
    stalled = stall_decision(replicas, max_restarts=max_restarts, on_stall=on_stall, runner_restarts=runner_restarts)
    if stalled is not None:
        return stalled
    failed = [t for t in trainers if t.phase == ReplicaPhase.FAILED and t.restarts >= max_restarts]
    if _settling(failed, trainers, now):
        first = min(failed, key=blame_order)
        return Decision(
            Phase.RUNNING,
            f"trainer {first.index} ended with {first.reason or describe_exit(first.exit_code)}; "
            "waiting for the other trainers to end to name the failure that caused it.",
        )
    for trainer in sorted(trainers, key=blame_order):
        if trainer.phase == ReplicaPhase.FAILED and trainer.restarts >= max_restarts:
            how = trainer.reason or describe_exit(trainer.exit_code)
            after = f" after {trainer.restarts} restart{'s' if trainer.restarts != 1 else ''}" if max_restarts else ""
            who, tail = failure_words(trainer)
            if who != f"trainer {trainer.index}" and tail and (not trainer.reason or _EXIT_ONLY.fullmatch(trainer.reason)):
                # The rank's own words say it; its exit code is the trainer's (gang.py).
                message = f"{who} failed{after}: {tail}"
            else:
                message = f"{who} failed with {how}{after}" + (f": {tail}" if tail else ".")
            return Decision(Phase.FAILED, message, stop=running)
    all_trainers_done = bool(trainers) and all(t.phase == ReplicaPhase.SUCCEEDED for t in trainers)
    if not all_trainers_done:
        for pserver in pservers:
            if pserver.phase in (ReplicaPhase.SUCCEEDED, ReplicaPhase.FAILED):
                how = pserver.reason or describe_exit(pserver.exit_code)
                if pserver.exit_code == 0 and not pserver.reason:
                    # Paddle's pservers block in run_server() until stopped: one that simply ended
                    # ran code that never serves (a plain script submitted in ps mode).
                    message = f"pserver {pserver.index} ended with exit code 0 before the trainers finished: {NEVER_SERVED_HINT}"
                    return Decision(Phase.FAILED, message, stop=running)
                tail = failure_line(pserver.log_tail)
                message = f"pserver {pserver.index} ended with {how} before the trainers finished" + (f": {tail}" if tail else ".")
                return Decision(Phase.FAILED, message, stop=running)
    if all_trainers_done:
        count = len(trainers)
        return Decision(
            Phase.SUCCEEDED,
            f"All {count} trainer{'s' if count != 1 else ''} finished successfully.",
            stop=[(p.role, p.index) for p in pservers if p.phase in (ReplicaPhase.RUNNING, ReplicaPhase.PENDING)],
        )
    restarting = sorted((t for t in trainers if t.phase == ReplicaPhase.FAILED), key=blame_order) if runner_restarts else []
    restart = [(t.role, t.index) for t in restarting]
    any_running = any(r.phase == ReplicaPhase.RUNNING for r in replicas)
    if restarting:
        first = restarting[0]
        who, tail = failure_words(first)
        message = (
            f"restart {first.restarts + 1} of {max_restarts}: {who} failed with "
            f"{first.reason or describe_exit(first.exit_code)}" + (f" ({tail})" if tail else "") + "; all replicas restarting"
        )
        return Decision(Phase.RUNNING if any_running else Phase.PENDING, message, restart=restart)
    waiting = [r for r in replicas if r.phase == ReplicaPhase.PENDING and r.reason]
    unstartable = next((r for r in waiting if (r.reason or "").startswith(NEVER_STARTS)), None)
    if unstartable is not None:
        # The kubelet will not try again (an image it may not pull and does not have, a name that
        # is no image reference): waiting would keep the rest of the gang running for ever.
        return Decision(Phase.FAILED, f"{unstartable.role} {unstartable.index} cannot start: {unstartable.reason}", stop=running)
    if any_running:
        done = sum(1 for t in trainers if t.phase == ReplicaPhase.SUCCEEDED)
        if waiting and not done:
            # A gang trains only whole: the replicas that run wait for this one, and the job is
            # Pending, as one none of whose replicas started (the message must not read
            # "Training is running", nor the phase Running, while nothing can train).
            return Decision(Phase.PENDING, f"{_waiting_message(waiting[0]).rstrip('.')}; the other replicas wait for it.")
        message = f"{done}/{len(trainers)} trainers finished." if done else "Training is running."
        return Decision(Phase.RUNNING, message)
    message = _waiting_message(waiting[0]) if waiting else "Waiting for replicas to start."
    return Decision(Phase.PENDING, message)


#: Why a replica's container is waiting when the kubelet never retries: the image is not on the
#: node and its pull policy forbids pulling it, or the image name is not a reference at all.
NEVER_STARTS = ("ErrImageNeverPull", "InvalidImageName")

#: The reason prefix of a pod whose volumes the kubelet could not mount (its FailedMount event).
FAILED_MOUNT = "FailedMount: "


def _waiting_message(replica: Observed) -> str:
    """Why the job waits, in words: a replica the kubelet cannot start because a volume (the
    home, on a storage that is down or refuses the key) cannot be mounted says so and quotes the
    kubelet, instead of reading like a slow start."""
    reason = replica.reason or ""
    if reason.startswith(FAILED_MOUNT):
        return f"{replica.role} {replica.index} cannot start: the kubelet could not mount its volumes: {reason[len(FAILED_MOUNT) :]}"
    return f"{replica.role} {replica.index}: {reason}"
