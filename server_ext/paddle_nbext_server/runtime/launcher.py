"""The launcher every replica runs before the user's entry point, on both backends.

It turns the few `PADDLE_NBEXT_*` inputs (docs/architecture.md, "Launcher") into the Paddle
environment contract for the replica's role and mode, makes trainers wait until every pserver
port accepts (Paddle 3.0's own wait is a no-op, so a trainer that starts early dies with
"Connection refused"), and then runs the entry point in the package dir: as a plain command, or
through `/bin/sh -c` when it needs a shell (`supervise.entry_argv`).

Where the runner keeps the output itself (the local backend) the launcher stays the entry
point's parent and supervisor (`supervise.run_supervised`): it passes on the entry point's exit
code, and when the runner dies it kills everything the entry point started.  On
Kubernetes a pod's log goes with the pod (deletion, `ttlSecondsAfterFinished`, a lost node), and
with `restartPolicy: Never` a retry is a new pod, so the API has no "previous" log either.  There
the launcher stays as the entry point's parent: it tees the entry point's stdout and stderr to its
own stdout (`kubectl logs` still works) and to one file per attempt in the job's directory on the
home volume, `<home>/.paddle-jobs/<job>/logs/<role>-<index>.attempt-<n>.log`, forwards signals,
and exits with the entry point's exit code (128 + N for signal N, as a shell reports it).  The
file is a copy, never a condition: if it cannot be written the training goes on, and the launcher
says so once on stderr.  There the launcher also watches its replica's health (`run_watched`,
`replica_health.py`: its container's memory, its trainer's stall), since nothing outside the pod
can without asking the API.

Its parts, each a module of its own: `launch_env` (the inputs -> the Paddle environment),
`endpoint_wait` (pservers and peers reachable), `replica_log` (the attempt files and the tee) and
`replica_files` (where a replica's files go, shared with the server); this module runs the steps.

Standard library only: this file is copied into job containers and run as a plain script, with
the shared contract (`paddle_nbext.model.contract`: roles and modes) beside it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext.model import contract
else:  # a plain script: in a job's bundle, the contract shipped beside it (even where the image
    # has some other paddle-nbext installed); run from a source tree, the installed one
    try:
        import contract  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import contract

if __package__:
    from . import endpoint_wait, launch_env, log_progress, paddle_nbext_fence, preflight, replica_files, replica_log, store_relay, supervise
else:  # a plain script: the bundle's files beside this one
    import endpoint_wait  # type: ignore[import-not-found,no-redef]
    import launch_env  # type: ignore[import-not-found,no-redef]
    import log_progress  # type: ignore[import-not-found,no-redef]
    import paddle_nbext_fence  # type: ignore[import-not-found,no-redef]
    import preflight  # type: ignore[import-not-found,no-redef]
    import replica_files  # type: ignore[import-not-found,no-redef]
    import replica_log  # type: ignore[import-not-found,no-redef]
    import store_relay  # type: ignore[import-not-found,no-redef]
    import supervise  # type: ignore[import-not-found,no-redef]
# `environments` (a job with requirements) and `gang` (a trainer of several ranks) are imported
# where they are used, only by the replicas that need them: together they were half of every
# launcher's start-up, which four replicas on two cores pay while their pservers start.
# `replica_health` likewise, by Kubernetes replicas only (`run_watched`).
if TYPE_CHECKING:
    from . import environments

Mode, Role = contract.Mode, contract.Role
WAIT_EXIT_CODE = 3

# The names the server, the local backend and the tests use through this module (its parts' own).
LaunchError = launch_env.LaunchError
QUIET_GLOG_LEVEL, CONTRACT_VARS = launch_env.QUIET_GLOG_LEVEL, launch_env.CONTRACT_VARS
DEFAULT_WAIT_TIMEOUT = launch_env.DEFAULT_WAIT_TIMEOUT
replica_index, ranks_per_trainer = launch_env.replica_index, launch_env.ranks_per_trainer
runs_launch, process_count, build_env = launch_env.runs_launch, launch_env.process_count, launch_env.build_env
endpoints_to_wait_for, wait_timeout = launch_env.endpoints_to_wait_for, launch_env.wait_timeout
peer_hosts = launch_env.peer_hosts
MAX_WAIT_DELAY, MAX_WAIT_DELAY_ADDRESS = endpoint_wait.MAX_WAIT_DELAY, endpoint_wait.MAX_WAIT_DELAY_ADDRESS
CONNECT_TIMEOUT = endpoint_wait.CONNECT_TIMEOUT
is_address, wait_for, wait_resolvable = endpoint_wait.is_address, endpoint_wait.wait_for, endpoint_wait.wait_resolvable
LOG_DIR_VAR, JOBS_DIR, LOGS_DIR = replica_files.LOG_DIR_VAR, replica_files.JOBS_DIR, replica_files.LOGS_DIR
attempt_name, attempt_number, attempts = replica_files.attempt_name, replica_files.attempt_number, replica_files.attempts
log_dir = replica_files.log_dir
METRICS_FILE_VAR, METRICS_DIR_VAR = replica_files.METRICS_FILE_VAR, replica_files.METRICS_DIR_VAR
METRICS_SUFFIX, PYLIB, RANK_VAR = replica_files.METRICS_SUFFIX, replica_files.PYLIB, replica_files.RANK_VAR
metrics_name, metrics_dir, metrics_file = replica_files.metrics_name, replica_files.metrics_dir, replica_files.metrics_file
pylib_dir = replica_files.pylib_dir
DRAIN_SECONDS, FORWARDED_SIGNALS = replica_log.DRAIN_SECONDS, replica_log.FORWARDED_SIGNALS
MAX_PENDING_BYTES = replica_log.MAX_PENDING_BYTES
ReplicaLog = replica_log.ReplicaLog
open_attempt_log, open_replica_log = replica_log.open_attempt_log, replica_log.open_replica_log
run_teed = replica_log.run_teed
_say = replica_log.say


#: `environments.REQUIREMENTS_VAR`, read here without importing `environments` (a job without
#: requirements never does).
REQUIREMENTS_VAR = "PADDLE_NBEXT_REQUIREMENTS"


def prepare_environment(base: Mapping[str, str], workdir: str, log: ReplicaLog | None) -> environments.Prepared | int | None:
    """The job's environment from its requirements file (`environments.ensure`): None when the
    job has none, the exit code to end with when it cannot be built (the installer's words said)."""
    requirements = base.get(REQUIREMENTS_VAR, "").strip()
    if not requirements:
        return None
    if __package__:
        from . import environments
    else:  # a plain script: the bundle's environments.py beside this file
        import environments  # type: ignore[import-not-found,no-redef]
    home = base.get("HOME", "").strip()
    envs_dir = base.get(environments.ENVS_DIR_VAR, "").strip() or (os.path.join(home, JOBS_DIR, "envs") if home else "")
    if not envs_dir:
        _say(f"paddle-nbext launcher: {environments.ENVS_DIR_VAR} and HOME are both unset; the job's environment has nowhere to live", log)
        return contract.ENVIRONMENT_EXIT_CODE
    job = environments.Job(base.get("PADDLE_NBEXT_JOB", ""), metrics_dir(base), base.get("PADDLE_NBEXT_IMAGE", ""))
    try:
        os.makedirs(envs_dir, exist_ok=True)
        return environments.ensure(os.path.join(workdir, requirements), workdir, envs_dir, job, base, lambda words: _say(words, log))
    except (environments.RequirementsError, environments.BuildFailed) as failure:
        _say(f"paddle-nbext launcher: {ENVIRONMENT_FAILED} {failure}", log)
    except OSError as error:
        _say(f"paddle-nbext launcher: {ENVIRONMENT_FAILED} {envs_dir}: {error.strerror or error}", log)
    return contract.ENVIRONMENT_EXIT_CODE


#: How the launcher's line about a failed environment starts (the policy words the job's end from it).
ENVIRONMENT_FAILED = "the job's environment could not be built:"


def _stopped_before_the_code_ran(signum: int, _frame: object) -> None:
    """SIGTERM (a cancel, a restart, an eviction) while the launcher itself still works, e.g.
    waits for the pservers: end now, as the entry point would have.  In a container the
    launcher is PID 1, which the kernel sends no default-fatal signal to: without a handler the
    pod would sit out its whole grace period and be killed."""
    os.write(2, f"paddle-nbext launcher: stopped by signal {signum} before the entry point ran\n".encode())
    os._exit(128 + signum)


def _mark(event: str) -> None:
    """A step of this replica for the benchmark's breakdown (`supervise.mark`; off unless asked)."""
    supervise.mark(event, f"{os.environ.get('PADDLE_NBEXT_ROLE', '')}-{os.environ.get('PADDLE_NBEXT_INDEX', '')}")


def main() -> int:
    for stopping in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # first: a stop may come at once
        signal.signal(stopping, _stopped_before_the_code_ran)
    _mark("launcher.main")
    base = dict(os.environ)
    if job_deleted(base):
        print(
            f"paddle-nbext launcher: the job's folder {os.path.dirname(base['PADDLE_NBEXT_WORKDIR'])} is gone (the job was deleted); nothing to run"
        )
        return 0
    log = open_replica_log(base)
    try:
        return _launch(base, log)
    finally:
        if log is not None:
            log.close()  # what the file still lags behind, for at most DRAIN_SECONDS


def job_deleted(base: Mapping[str, str]) -> bool:
    """Whether the job was deleted before this replica started: its snapshot folder
    (`<home>/.paddle-jobs/<job>/package`, the working directory) is gone while the jobs folder is
    there (a home not mounted at all lacks both, and fails as it did).  Such a replica must write
    nothing: a log or fence folder it made again would hold the name against the next job."""
    workdir = base.get("PADDLE_NBEXT_WORKDIR", "").strip().rstrip("/")
    job_folder = os.path.dirname(workdir)
    if os.path.basename(workdir) != "package" or os.path.basename(os.path.dirname(job_folder)) != JOBS_DIR:
        return False
    return os.path.isdir(os.path.dirname(job_folder)) and not os.path.isdir(job_folder)


def run_watched(base: Mapping[str, str], log: ReplicaLog | None, run: Callable[[], int]) -> int:
    """Run the entry point (`run`, its exit code) under the replica's own health watch
    (`replica_health`: memory, and a trainer's stall) where it has a log dir in the home
    (Kubernetes: `log` is its attempt file; elsewhere the runner watches).  A trainer the watch
    stopped for a stall (`on_stall` restart or fail) ends with `contract.STALL_EXIT_CODE`, its
    words the container's termination message and the launcher's last line (`policy.stall_words`
    reads either)."""
    if log is None:
        return run()
    if __package__:
        from . import replica_health
    else:  # a plain script: the bundle's replica_health.py beside this file
        import replica_health  # type: ignore[import-not-found,no-redef]
    watch = replica_health.ReplicaWatch(
        {**base, METRICS_DIR_VAR: metrics_dir(base) or ""},
        os.path.dirname(log.path),
        base.get("PADDLE_NBEXT_ROLE", "").strip(),
        replica_index(base),  # build_env read it already
        last_output=lambda: log.last_output,
        on_stop=lambda: stop_entry_point(replica_health.STOP_GRACE_SECONDS),
        say=lambda words: _say(words, log),
    )
    watch.start()
    try:
        code = run()
    finally:
        watch.stop()
    oom = watch.oom_words()
    if oom is not None:
        _say(oom, log)  # the last line: the job's failure message quotes it
    if watch.stopped_for is None:
        return code
    replica_health.write_termination_message(watch.stopped_for, base)
    _say(f"paddle-nbext launcher: {replica_health.STALLED} {watch.stopped_for}", log)
    return contract.STALL_EXIT_CODE


def stop_entry_point(grace: float) -> None:
    """Stop what the launcher runs as a stop from Kubernetes would (SIGTERM to the launcher, whose
    handlers pass it on to the entry point or every rank), and SIGKILL whatever is left below the
    launcher after `grace` seconds (a trainer stuck in native code may never end by SIGTERM)."""
    launcher = os.getpid()

    def kill_the_rest() -> None:
        for pid in supervise.descendants(launcher):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    timer = threading.Timer(grace, kill_the_rest)
    timer.daemon = True
    timer.start()
    os.kill(launcher, signal.SIGTERM)


def fence_attempt(base: Mapping[str, str], log: ReplicaLog | None) -> None:
    """Mark this attempt as begun in the job's directory, and stop this replica (as a stop from
    Kubernetes would) once a newer attempt of the job has begun: a replica left running on a node
    the cluster gave up on must not train on beside the job's new attempt."""
    paddle_nbext_fence.raise_fence(base)

    def superseded(newer: str) -> None:
        _say(
            f"paddle-nbext launcher: the job restarted whole as attempt {newer} without this replica "
            f"(attempt {paddle_nbext_fence.attempt_name(base)}, whose node was lost or cut off); stopping it",
            log,
        )
        os.kill(os.getpid(), signal.SIGTERM)

    paddle_nbext_fence.watch(superseded, base)


def _launch(base: dict[str, str], log: ReplicaLog | None) -> int:
    """Wait for what the replica needs, then run the entry point; its exit code."""
    try:
        envs = [build_env(base, pylib_dir(), rank) for rank in range(process_count(base))]
        env = envs[0]
        waits = endpoints_to_wait_for(base)
        timeout = wait_timeout(base)
    except LaunchError as error:
        _say(f"paddle-nbext launcher: {error}", log)
        return 2
    fence_attempt(base, log)
    problem = None if base.get("PADDLE_NBEXT_PREFLIGHT", "1") == "0" else preflight.problem(base["PADDLE_NBEXT_MODE"])
    if problem is not None:
        _say(f"paddle-nbext launcher: {problem}", log)
        return 2  # like any input the launcher cannot start with; the sentence says why
    _mark("launcher.preflight")
    workdir = env["TRAINER_PACKAGE"]
    if not os.path.isdir(workdir):
        _say(f"paddle-nbext launcher: the package dir {workdir} does not exist", log)
        return 2
    prepared = prepare_environment(base, workdir, log)
    if isinstance(prepared, int):
        return prepared
    own_host = env.get("POD_IP", "")
    if own_host and not wait_resolvable(own_host, timeout):
        _say(
            f"paddle-nbext launcher: this replica's own address {own_host} did not resolve within {timeout:g}s "
            "(PADDLE_NBEXT_WAIT_TIMEOUT); is the job's headless Service there, and cluster DNS running?",
            log,
        )
        return WAIT_EXIT_CODE
    for peer in peer_hosts(base, own_host):
        if not wait_resolvable(peer, timeout):
            _say(
                f"paddle-nbext launcher: the trainer at {peer} did not resolve within {timeout:g}s (PADDLE_NBEXT_WAIT_TIMEOUT): "
                "its pod never got an address (its reason says why, e.g. a volume that cannot be mounted)",
                log,
            )
            return WAIT_EXIT_CODE
    _mark("launcher.ready")
    if waits:
        missing = wait_for(waits, timeout)
        if missing is not None:
            host, port, why = missing
            position = waits.index((host, port))
            _say(
                f"paddle-nbext launcher: pserver {position} at {host}:{port} did not accept connections within "
                f"{timeout:g}s (PADDLE_NBEXT_WAIT_TIMEOUT): {why}",
                log,
            )
            return WAIT_EXIT_CODE
        _mark("launcher.waited")
    os.chdir(workdir)
    path = supervise.with_python_on_path(env.get("PATH", ""))
    for each in envs:
        each["PATH"] = path
        if prepared is not None:
            prepared.apply(each)
    if base.get("PADDLE_NBEXT_MODE") == Mode.COLLECTIVE:
        store_relay.attach(envs, timeout)  # no 3 s lost when rank 0's store is not up yet
    argv = supervise.entry_argv(env["ENTRY"], env["PATH"])
    if len(envs) > 1:
        if __package__:
            from . import gang
        else:  # a plain script: the bundle's gang.py beside this file
            import gang  # type: ignore[import-not-found,no-redef]
        label = f"trainer {replica_index(base)}"
        copy = log.output if log is not None else None
        return run_watched(
            base,
            log,
            lambda: gang.run_ranks(argv, envs, label=label, say=lambda message: _say(message, log), copy=copy, supervised=log is None),
        )
    _mark("launcher.entry")
    # A trainer's printed progress lines, read as they are teed (`log_progress`): on Kubernetes
    # the tee is there anyway; locally the output then passes through the launcher too.
    progress = log_progress.from_env(env, len(envs), lambda words: _say(words, log))
    feed = progress.feed if progress is not None else None
    try:
        if log is not None:
            code = run_watched(base, log, lambda: run_teed(argv, env, log, feed))
        else:
            code = supervise.run_supervised(argv, env, feed)
    finally:
        if progress is not None:
            progress.close()
    _mark("launcher.exited")
    return code


if __name__ == "__main__":
    sys.exit(main())
