"""Benchmark: the same 2-pserver + 2-trainer PS job (examples/ps_train.py, GEO, 300 steps) run
three ways, interleaved, on this machine:

* `local`   - through `LocalBackend` (job dir, snapshot, detached master, launcher per replica);
* `launch`  - `python -m paddle.distributed.launch --server_num=2 --trainer_num=2`;
* `bare`    - four plain processes with the minimal environment, the script itself waiting for
              the pserver ports and stopping the pservers when the trainers are done.

Wall time is from "go" to "all trainers done and pservers stopped".  Each `local` and `bare` run
is also broken down into its steps (see `local_steps` and `bare_steps`): the local path from the
timestamps the master and the launchers append to the file `PADDLE_NBEXT_TIMINGS` names (an
opt-in for this benchmark, `supervise.mark`) and from timers the benchmark wraps around the
backend's own functions in this process; the bare path from what the benchmark itself does.
Also measures the memory paddle-nbext adds per job: the master's peak RSS and the launcher's peak
before it starts the entry point.  Writes benchmarks/results/local.json and local.md.

`--warm` adds two prototypes of a warm start, measured side by side and never shipped (see
results/local.md): `warm` (`run_warm`), bare processes whose trainers' interpreters start at "go",
import Paddle while the pservers start and run the script once the pserver ports accept; `fork`
(`run_fork`), one interpreter that imports Paddle once and forks the four replicas.

    .venv/bin/python benchmarks/bench_local.py [--rounds 5] [--warm]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import functools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from harness import goal, machine, write_report

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ps_train.py"
PYTHON = sys.executable
TIMINGS_VAR = "PADDLE_NBEXT_TIMINGS"  # supervise.TIMINGS_VAR, read by the master and the launchers
#: Seconds one run of one variant may take before the benchmark gives up on it.
RUN_TIMEOUT = 900
ROLE_KEYS = ("pserver-0", "pserver-1", "trainer-0", "trainer-1")

#: One run's timeline: event -> epoch seconds (for a replica: "<role>-<index> <event>").
Timeline = dict[str, float]
F = TypeVar("F", bound=Callable[..., Any])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_ports(ports: list[int], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"pserver port {port} never opened") from None
                time.sleep(0.05)


def bare_env(ports: list[int]) -> dict[str, str]:
    """The minimal environment of every process of the job (docs/paddle-facts.md)."""
    return {
        **os.environ,
        "FLAGS_enable_pir_api": "0",
        "PADDLE_PSERVERS_IP_PORT_LIST": ",".join(f"127.0.0.1:{p}" for p in ports),
        "PADDLE_TRAINERS_NUM": "2",
        "POD_IP": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
    }


def trainer_env(common: dict[str, str], index: int) -> dict[str, str]:
    return {**common, "TRAINING_ROLE": "TRAINER", "PADDLE_TRAINER_ID": str(index), "PADDLE_PORT": str(free_port())}


def start_pservers(workdir: Path, ports: list[int], common: dict[str, str], logs: Any) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(
            [PYTHON, str(EXAMPLE)],
            cwd=workdir,
            stdout=logs,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**common, "TRAINING_ROLE": "PSERVER", "PADDLE_PORT": str(port)},
        )
        for port in ports
    ]


def stop_pservers(servers: list[subprocess.Popen[bytes]]) -> None:
    for server in servers:
        os.killpg(server.pid, signal.SIGTERM)
    for server in servers:
        server.wait()


@dataclass
class BareRun:
    """One run of four plain processes (`bare_run`): the pservers' ports, the env every replica
    shares, the log all four write, and the timeline."""

    ports: list[int]
    common: dict[str, str]
    logs: Any
    marks: Timeline
    elapsed: float = 0.0

    def pservers_up(self) -> None:
        wait_ports(self.ports)
        self.marks["pservers up"] = time.time()

    def trainers_done(self, trainers: list[subprocess.Popen[bytes]], what: str) -> None:
        codes = [t.wait(timeout=300) for t in trainers]
        self.marks["trainers done"] = time.time()
        if any(codes):
            raise RuntimeError(f"{what} trainers failed: {codes}")


@contextlib.contextmanager
def bare_run(workdir: Path, what: str) -> Iterator[BareRun]:
    """Start the two pservers, timed from "go"; stop them when the body is done.  The run's
    `elapsed` (go to pservers stopped) and "end" mark are set once the block has ended."""
    ports = [free_port(), free_port()]
    marks: Timeline = {}
    start = time.monotonic()
    marks["go"] = time.time()
    with open(workdir / f"{what}.log", "ab") as logs:
        run = BareRun(ports, bare_env(ports), logs, marks)
        servers = start_pservers(workdir, ports, run.common, logs)
        try:
            yield run
        finally:
            stop_pservers(servers)
    marks["end"] = time.time()
    run.elapsed = time.monotonic() - start


def run_bare(workdir: Path) -> tuple[float, Timeline]:
    """Four processes, minimal env (docs/paddle-facts.md), no paddle-nbext code involved."""
    with bare_run(workdir, "bare") as run:
        run.pservers_up()
        trainers = [
            subprocess.Popen([PYTHON, str(EXAMPLE)], cwd=workdir, stdout=run.logs, stderr=subprocess.STDOUT, env=trainer_env(run.common, i))
            for i in range(2)
        ]
        run.trainers_done(trainers, "bare")
    return run.elapsed, run.marks


WARM_TRAINER = """
import os, runpy, sys
os.environ.setdefault("FLAGS_enable_pir_api", "0")
import paddle, paddle.distributed.fleet  # the import the trainer would do, done while the pservers start
sys.stdin.readline()  # "go": the pserver ports accept
script = sys.argv[1]
sys.argv = [script]
sys.path.insert(0, os.path.dirname(script))
runpy.run_path(script, run_name="__main__")
"""


def run_warm(workdir: Path) -> tuple[float, Timeline]:
    """Prototype (not shipped): `bare`, but the trainers' interpreters start at "go" and import
    Paddle while the pservers start; once the ports accept they are told to run the script
    (`runpy`, in the interpreter that imported Paddle: no fork, so no thread is lost)."""
    with bare_run(workdir, "warm") as run:
        trainers = [
            subprocess.Popen(
                [PYTHON, "-c", WARM_TRAINER, str(EXAMPLE)],
                cwd=workdir,
                stdin=subprocess.PIPE,
                stdout=run.logs,
                stderr=subprocess.STDOUT,
                env=trainer_env(run.common, i),
            )
            for i in range(2)
        ]
        try:
            run.pservers_up()
            for trainer in trainers:
                assert trainer.stdin is not None
                trainer.stdin.write(b"go\n")
                trainer.stdin.close()
            run.trainers_done(trainers, "warm")
        finally:
            for trainer in trainers:
                if trainer.poll() is None:
                    trainer.kill()
                    trainer.wait()
    return run.elapsed, run.marks


FORK_ZYGOTE = """
import json, os, runpy, signal, socket, sys, time
os.environ.setdefault("FLAGS_enable_pir_api", "0")
import paddle, paddle.distributed.fleet  # once, for all four replicas
script, ports, trainer_ports = sys.argv[1], [int(p) for p in sys.argv[2].split(",")], sys.argv[3].split(",")
print(json.dumps({"threads at fork": len(os.listdir("/proc/self/task"))}), file=sys.stderr, flush=True)

def spawn(env):
    pid = os.fork()  # the prototype's point, and what is unsafe: Paddle's threads stay behind
    if pid == 0:
        os.environ.update(env)
        sys.argv = [script]
        sys.path.insert(0, os.path.dirname(script))
        code = 0
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as stop:
            code = stop.code or 0
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        os._exit(code)
    return pid

servers = [spawn({"TRAINING_ROLE": "PSERVER", "PADDLE_PORT": str(p)}) for p in ports]
for port in ports:
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
print(json.dumps({"pservers up": time.time()}), file=sys.stderr, flush=True)
trainers = [spawn({"TRAINING_ROLE": "TRAINER", "PADDLE_TRAINER_ID": str(i), "PADDLE_PORT": trainer_ports[i]}) for i in range(2)]
codes = [os.waitstatus_to_exitcode(os.waitpid(t, 0)[1]) for t in trainers]
print(json.dumps({"trainers done": time.time()}), file=sys.stderr, flush=True)
for server in servers:
    os.kill(server, signal.SIGTERM)
for server in servers:
    os.waitpid(server, 0)
sys.exit(1 if any(codes) else 0)
"""


def run_fork(workdir: Path) -> tuple[float, Timeline]:
    """Prototype (not shipped, not safe): one interpreter imports Paddle, then forks the four
    replicas, pservers first, trainers once the pserver ports accept.  Paddle has started native
    threads by then (`threads at fork`), which the children lack."""
    ports = [free_port(), free_port()]
    marks: Timeline = {}
    start = time.monotonic()
    marks["go"] = time.time()
    with open(workdir / "fork.log", "ab") as logs:
        done = subprocess.run(
            [PYTHON, "-c", FORK_ZYGOTE, str(EXAMPLE), ",".join(map(str, ports)), f"{free_port()},{free_port()}"],
            cwd=workdir,
            stdout=logs,
            stderr=subprocess.PIPE,
            env=bare_env(ports),
            timeout=300,
            check=False,
        )
    elapsed = time.monotonic() - start
    marks["end"] = time.time()
    for line in done.stderr.decode(errors="replace").splitlines():
        if line.startswith("{"):
            marks.update({key: float(value) for key, value in json.loads(line).items()})
    if done.returncode != 0:
        raise RuntimeError(f"fork prototype failed ({done.returncode}): {done.stderr.decode(errors='replace')[-500:]}")
    return elapsed, marks


def run_launch(workdir: Path) -> float:
    """paddle.distributed.launch never returns for a PS job (its pservers block forever), so its
    time is taken when both trainers have logged "done"; then its processes are stopped."""
    log_dir = workdir / f"launch-log-{time.monotonic_ns()}"
    start = time.monotonic()
    launch = subprocess.Popen(
        [PYTHON, "-m", "paddle.distributed.launch", "--server_num=2", "--trainer_num=2", "--log_dir", str(log_dir), str(EXAMPLE)],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "FLAGS_enable_pir_api": "0"},
        start_new_session=True,
    )
    try:
        while True:
            done = 0
            for i in range(2):
                try:
                    done += f"trainer {i} done" in (log_dir / f"workerlog.{i}").read_text(errors="replace")
                except OSError:
                    pass
            if done == 2:
                return time.monotonic() - start
            if launch.poll() is not None:
                raise RuntimeError(f"paddle.distributed.launch exited {launch.returncode} before the trainers finished")
            if time.monotonic() - start > 600:
                raise RuntimeError("paddle.distributed.launch trainers did not finish within 600s")
            time.sleep(0.05)
    finally:
        from paddle_nbext_server.runtime.supervise import children_by_parent

        for child in children_by_parent().get(launch.pid, []):
            try:
                os.killpg(os.getpgid(child), signal.SIGKILL)
            except OSError:
                pass
        os.killpg(launch.pid, signal.SIGKILL)
        launch.wait()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def master_sampler(job_dir: Path, peak: list[int], cpu: list[float]) -> None:
    """The master's peak RSS (bytes) and the CPU seconds it has used so far, while it lives."""
    try:
        pid = int((job_dir / "master.pid").read_text())
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    peak[0] = max(peak[0], int(line.split()[1]) * 1024)
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
        cpu[0] = max(cpu[0], (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)  # utime + stime
    except (OSError, ValueError, IndexError):
        pass


def timed(marks: Timeline, name: str, function: F) -> F:
    """`function`, noting when its first call began and ended (`<name>` and `<name> done`)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        marks.setdefault(name, time.time())
        try:
            return function(*args, **kwargs)
        finally:
            marks.setdefault(f"{name} done", time.time())

    return wrapper  # type: ignore[return-value]


def read_marks(path: Path, marks: Timeline) -> None:
    """The master's and the launchers' lines (`supervise.mark`): the first of each event."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return
    for line in lines:
        entry = json.loads(line)
        key = f"{entry['who']} {entry['event']}".strip()
        marks.setdefault(key, float(entry["t"]))


def run_local(home: Path, name: str) -> tuple[float, int, float, Timeline]:
    from paddle_nbext.model.contract import is_terminal
    from paddle_nbext.model.spec import JobSpec
    from paddle_nbext_server.backends.base import SubmitRequest
    from paddle_nbext_server.backends.local import LocalBackend
    from paddle_nbext_server.backends.local import backend as backend_module
    from paddle_nbext_server.events import EventHub

    marks: Timeline = {}
    timings = home / f"{name}.timings.jsonl"
    os.environ[TIMINGS_VAR] = str(timings)

    async def scenario() -> tuple[float, int, float]:
        backend = LocalBackend(events=EventHub(), jobs_dir=str(home / ".paddle-jobs"))
        await backend.start()  # as the server starts it: its watcher runs, its Paddle probe is done
        # Timers around the backend's own steps (this process only; nothing else changes).
        probe = backend._paddle
        probe._probe = timed(marks, "probe", probe._probe)  # type: ignore[method-assign]
        jobs = backend._jobs
        jobs.launch_master = timed(marks, "master spawn", jobs.launch_master)  # type: ignore[method-assign]
        backend._write_job = timed(marks, "write job", backend._write_job)  # type: ignore[method-assign]
        names = vars(backend_module)  # the backend's own global, which `_write_job` calls
        snapshot = names["snapshot_package"]
        names["snapshot_package"] = timed(marks, "snapshot", snapshot)
        spec = JobSpec.from_dict(
            {
                "job_name": name,
                "entry_point": "python ps_train.py",
                "trainer_package": "code",
                "pservers": 2,
                "trainers": 2,
                "pserver_cpu": "500m",
                "trainer_cpu": "500m",
            }
        )
        peak, cpu = [0], [0.0]
        job_dir = home / ".paddle-jobs" / name

        async def sample() -> None:
            # VmHWM is a peak and CPU time a total: a look every 0.25 s misses little of either
            # and adds next to nothing to the job's own CPU.
            while True:
                await asyncio.to_thread(master_sampler, job_dir, peak, cpu)
                await asyncio.sleep(0.25)

        sampler: asyncio.Task[None] | None = None
        try:
            # The end as a client learns it: the job's event on the server's stream.
            async with backend.events.subscribe("bench") as events:
                start = time.monotonic()
                marks["go"] = time.time()
                await backend.submit(SubmitRequest(spec=spec, owner="bench", home=home))
                marks["submitted"] = time.time()
                sampler = asyncio.create_task(sample())
                while True:
                    event = await asyncio.wait_for(events.get(), 600)
                    phase = (event.job or {}).get("phase")
                    if event.name == name and isinstance(phase, str) and is_terminal(phase):
                        break
                elapsed = time.monotonic() - start
                marks["end"] = time.time()
        finally:
            if sampler is not None:
                sampler.cancel()
            names["snapshot_package"] = snapshot
            await backend.stop()
        if phase != "Succeeded":
            raise RuntimeError(f"local job ended {phase}: {(event.job or {}).get('message')}")
        return elapsed, peak[0], cpu[0]

    try:
        elapsed, peak, cpu = asyncio.run(scenario())
    finally:
        del os.environ[TIMINGS_VAR]
    read_marks(timings, marks)
    return elapsed, peak, cpu, marks


def _span(marks: Timeline, start: str, end: str) -> float | None:
    if start in marks and end in marks:
        return marks[end] - marks[start]
    return None


def _latest(marks: Timeline, keys: list[str]) -> float | None:
    found = [marks[key] for key in keys if key in marks]
    return max(found) if len(found) == len(keys) else None


def _between(start: float | None, end: float | None) -> float | None:
    return end - start if start is not None and end is not None else None


def _replica_median(marks: Timeline, keys: tuple[str, ...], start: str, end: str) -> float | None:
    spans = [span for key in keys if (span := _span(marks, f"{key} {start}", f"{key} {end}")) is not None]
    return statistics.median(spans) if spans else None


LOCAL_STEPS = (
    "submit: preflight probe",
    "submit: snapshot",
    "submit: rest (records, bundle)",
    "submit: master spawn",
    "master start (interpreter, imports)",
    "master: admit, spawn replicas",
    "launcher start (fork, or interpreter and imports), each",
    "launcher preflight, each",
    "launcher env, each",
    "pservers serving, from their launcher's entry",
    "go → pservers serving",
    "trainer wait for pservers (from ready)",
    "trainers: entry → done",
    "trainers done → master decides",
    "stop pservers",
    "record end → seen",
)


def local_steps(marks: Timeline) -> dict[str, float | None]:
    """The local path's steps (seconds) from one run's timeline.  The replica steps are the
    median of the replicas; "pservers serving" is when the last trainer's launcher found every
    pserver port open."""
    trainers = [key for key in ROLE_KEYS if key.startswith("trainer")]
    pservers = [key for key in ROLE_KEYS if key.startswith("pserver")]
    serving = _latest(marks, [f"{key} launcher.waited" for key in trainers])
    pserver_entry = _latest(marks, [f"{key} launcher.entry" for key in pservers])
    trainers_done = _latest(marks, [f"{key} launcher.exited" for key in trainers])
    write = _span(marks, "write job", "write job done")
    snapshot = _span(marks, "snapshot", "snapshot done")
    return {
        "submit: preflight probe": _span(marks, "probe", "probe done") or 0.0,
        "submit: snapshot": snapshot,
        "submit: rest (records, bundle)": write - snapshot if write is not None and snapshot is not None else None,
        "submit: master spawn": _span(marks, "master spawn", "master spawn done"),
        "master start (interpreter, imports)": _span(marks, "master spawn", "master.main"),
        "master: admit, spawn replicas": _between(marks.get("master.main"), _latest(marks, [f"{k} master.spawn" for k in ROLE_KEYS])),
        "launcher start (fork, or interpreter and imports), each": _replica_median(marks, ROLE_KEYS, "master.spawn", "launcher.main"),
        "launcher preflight, each": _replica_median(marks, ROLE_KEYS, "launcher.main", "launcher.preflight"),
        "launcher env, each": _replica_median(marks, ROLE_KEYS, "launcher.preflight", "launcher.ready"),
        "pservers serving, from their launcher's entry": _between(pserver_entry, serving),
        "go → pservers serving": _between(marks.get("go"), serving),
        "trainer wait for pservers (from ready)": _replica_median(marks, tuple(trainers), "launcher.ready", "launcher.waited"),
        "trainers: entry → done": _between(_latest(marks, [f"{key} launcher.entry" for key in trainers]), trainers_done),
        "trainers done → master decides": _between(trainers_done, marks.get("master.decided")),
        "stop pservers": _span(marks, "master.decided", "master.stopped"),
        "record end → seen": _span(marks, "master.stopped", "end"),
    }


BARE_STEPS = ("go → pservers serving", "trainers: start → done", "stop pservers")


def bare_steps(marks: Timeline) -> dict[str, float | None]:
    return {
        "go → pservers serving": _span(marks, "go", "pservers up"),
        "trainers: start → done": _span(marks, "pservers up", "trainers done"),
        "stop pservers": _span(marks, "trainers done", "end"),
    }


def launcher_peak_rss(workdir: Path) -> int:
    """Peak RSS of the launcher process before it starts the entry point (`true`, whose own
    peak is far smaller, so the children's maximum is the launcher's)."""
    env = {
        **os.environ,
        "PADDLE_NBEXT_JOB": "bench",
        "PADDLE_NBEXT_MODE": "collective",
        "PADDLE_NBEXT_ROLE": "trainer",
        "PADDLE_NBEXT_INDEX": "0",
        "PADDLE_NBEXT_TRAINER_ENDPOINTS": "127.0.0.1:1",
        "PADDLE_NBEXT_ENTRY": "true",
        "PADDLE_NBEXT_WORKDIR": str(workdir),
    }
    code = (
        "import resource, subprocess, sys; subprocess.run([sys.executable, sys.argv[1]], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    launcher = ROOT / "server_ext" / "paddle_nbext_server" / "runtime" / "launcher.py"
    out = subprocess.run([PYTHON, "-c", code, str(launcher)], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) * 1024


def median_steps(runs: list[dict[str, float | None]], names: tuple[str, ...]) -> dict[str, float | None]:
    result: dict[str, float | None] = {}
    for name in names:
        values = [value for run in runs if (value := run.get(name)) is not None]
        result[name] = statistics.median(values) if values else None
    return result


def warm_section(result: dict[str, Any], breakdown: dict[str, dict[str, float | None]]) -> list[str]:
    """Why neither warm start is shipped, with this run's figures when it measured them (`--warm`)."""

    def figure(name: str) -> str:
        key = f"ratio_{name}_vs_bare"
        return f"**{result[key]:.2f} × bare**" if key in result else "(run with `--warm` to measure)"

    def serving(name: str) -> str:
        value = breakdown.get(name, {}).get("go → pservers serving")
        return f"{value:.2f} s" if value is not None else "—"

    threads = result.get("threads_at_fork")
    return [
        "## Warm starts (measured side by side, not shipped)",
        "",
        f"- `fork`: one interpreter imports Paddle once and forks the four replicas: {figure('fork')}. Not safe: "
        f"Paddle has started native threads by the time its import returns ({int(threads) if threads else 'several'} "
        "threads in the process at the fork), and a forked child has only the forking thread, so a lock another "
        "thread held stays locked in every replica, and a GPU build would fork an initialised CUDA runtime, which "
        "CUDA does not support. Paddle also reads its `FLAGS_*` and device settings at import, so every replica "
        "would run with the zygote's, not its own; and only a `python script.py` entry point can be run this way "
        "(`runpy` in the zygote's interpreter). That every round here succeeded does not make it safe.",
        f'- `warm`: each trainer\'s interpreter starts at "go" and imports Paddle while the pservers start, then '
        f"runs the script in that interpreter (no fork): {figure('warm')}. Not shipped: the script runs after "
        "`import paddle`, so whatever it sets before its own import (`FLAGS_*`, as examples/ps_train.py sets "
        "`FLAGS_enable_pir_api`) is silently ignored, which changes user code's behaviour; and on 2 cores the "
        f"trainers' imports take the pservers' cores (pservers serving at {serving('warm')} after go, bare "
        f"{serving('bare')}), so what it gains depends on spare cores.",
        "- Shipped instead: the launcher forked from the job master (no Paddle in it, and no threads: checked before "
        "every fork), which takes the launchers' interpreter start-up off the job's start (docs/architecture.md, "
        "local backend).",
    ]


def paired(times: list[float], baseline: list[float]) -> float:
    """The median over rounds of `times[i] / baseline[i]`."""
    return statistics.median(a / b for a, b in zip(times, baseline, strict=True))


def prototype_table(name: str, steps: dict[str, float | None]) -> list[str]:
    return ["", f"| {name} prototype step | s |", "|---|---|", *(f"| {step} | {_seconds(value)} |" for step, value in steps.items())]


def _load(load: tuple[float, float, float]) -> str:
    return ", ".join(f"{value:.1f}" for value in load)


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warm", action="store_true", help="also run the warm-trainer prototype (never shipped)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-local-"))
    home = work / "home"
    (home / "code").mkdir(parents=True)
    shutil.copy(EXAMPLE, home / "code" / "ps_train.py")
    prototypes = ["warm", "fork"] if args.warm else []
    order = ["local", "launch", "bare", *prototypes]
    times: dict[str, list[float]] = {variant: [] for variant in order}
    steps: dict[str, list[dict[str, float | None]]] = {"local": [], "bare": [], "warm": [], "fork": []}
    threads_at_fork: list[float] = []
    master_peaks: list[int] = []
    master_cpu: list[float] = []
    load_before = os.getloadavg()
    try:
        for round_number in range(args.rounds):
            shift = round_number % len(order)
            for variant in order[shift:] + order[:shift]:  # rotate so no variant always goes first
                # A run that hangs prints every thread's stack and ends the benchmark.
                faulthandler.dump_traceback_later(RUN_TIMEOUT, exit=True)
                if variant == "local":
                    elapsed, peak, cpu, marks = run_local(home, f"bench-{round_number}")
                    master_peaks.append(peak)
                    master_cpu.append(cpu)
                    steps["local"].append(local_steps(marks))
                elif variant == "launch":
                    elapsed = run_launch(work)
                elif variant == "warm":
                    elapsed, marks = run_warm(work)
                    steps["warm"].append(bare_steps(marks))
                elif variant == "fork":
                    elapsed, marks = run_fork(work)
                    steps["fork"].append(bare_steps(marks))
                    threads_at_fork.append(marks.get("threads at fork", 0.0))
                else:
                    elapsed, marks = run_bare(work)
                    steps["bare"].append(bare_steps(marks))
                faulthandler.cancel_dump_traceback_later()
                times[variant].append(elapsed)
                print(f"round {round_number} {variant}: {elapsed:.2f}s", flush=True)
        launcher_peak = launcher_peak_rss(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    medians = {k: statistics.median(v) for k, v in times.items()}
    breakdown = {
        "local": median_steps(steps["local"], LOCAL_STEPS),
        "bare": median_steps(steps["bare"], BARE_STEPS),
        **{name: median_steps(steps[name], BARE_STEPS) for name in prototypes},
    }
    mib = 2**20
    result: dict[str, Any] = {
        "job": "2 pservers + 2 trainers, examples/ps_train.py, GEO, 300 steps",
        "machine": machine(),
        "rounds": args.rounds,
        "load_average_1_5_15": {"before": load_before, "after": load_after},
        "wall_seconds": times,
        "median_seconds": medians,
        "ratio_local_vs_launch": medians["local"] / medians["launch"],
        "ratio_local_vs_bare": medians["local"] / medians["bare"],
        # Each round's own ratio, then their median: on a shared machine the load moves between
        # rounds more than between the variants of one round.
        "paired_ratio_local_vs_bare": paired(times["local"], times["bare"]),
        "paired_ratio_local_vs_launch": paired(times["local"], times["launch"]),
        **{f"ratio_{name}_vs_bare": medians[name] / medians["bare"] for name in prototypes},
        **({"threads_at_fork": max(threads_at_fork)} if args.warm else {}),
        "steps_median_seconds": breakdown,
        "steps_per_run": steps,
        "master_peak_rss_mib": max(master_peaks) / mib,
        "master_cpu_seconds_median": statistics.median(master_cpu),
        "launcher_peak_rss_mib": launcher_peak / mib,
        "note_launch": "paddle.distributed.launch never exits for this PS job (pservers block forever); its time is measured "
        "until both trainers logged 'done', after which the benchmark kills it. local and bare include stopping the pservers.",
        "note": "The launcher stays the entry point's parent, so its memory stays for the replica's lifetime; "
        "the master stays for the job's lifetime.",
        "goals": {"ratio_local_vs_launch": "<= 0.9", "ratio_local_vs_bare": "<= 1.05", "extra_rss_mib": "<= 30"},
    }
    md = [
        "# Local backend vs paddle.distributed.launch vs bare processes",
        "",
        f"{result['job']}; {args.rounds} interleaved rounds on {result['machine']['cpus']} CPUs (Python {result['machine']['python']}); "
        f"load average (1, 5, 15 min) {_load(load_before)} before, {_load(load_after)} after (other work shares the machine).",
        "",
        "| launch | median wall (s) | runs (s) |",
        "|---|---|---|",
        *(f"| {k} | {medians[k]:.2f} | {', '.join(f'{t:.2f}' for t in v)} |" for k, v in times.items()),
        "",
        "paddle.distributed.launch never exits for this PS job (its pservers block forever): its time is taken when both "
        "trainers logged `done` (then the benchmark kills it); `local` and `bare` include stopping the pservers.",
        "",
        f"- local / paddle.distributed.launch: **{result['ratio_local_vs_launch']:.2f}** "
        f"({goal('<= 0.9', result['ratio_local_vs_launch'] <= 0.9)})",
        f"- local / bare processes: **{result['ratio_local_vs_bare']:.2f}** ({goal('<= 1.05', result['ratio_local_vs_bare'] <= 1.05)})",
        f"- the same two as the median of each round's own ratio (the load moves between rounds more than within one): "
        f"local / launch {result['paired_ratio_local_vs_launch']:.2f}, local / bare {result['paired_ratio_local_vs_bare']:.2f}",
        *(f"- {name} prototype / bare processes: **{result[f'ratio_{name}_vs_bare']:.2f}** (not shipped)" for name in prototypes),
        f"- job master peak RSS: **{result['master_peak_rss_mib']:.1f} MiB**; a launcher started as its own interpreter "
        f"peaks at {result['launcher_peak_rss_mib']:.1f} MiB before the entry point (a forked one shares the master's pages) "
        f"(goal: <= 30 MiB extra per job); CPU the master used per job (median; sampled until it ended): "
        f"{result['master_cpu_seconds_median']:.2f} s",
        "",
        '`local` is measured as a client sees it: the backend is started before "go" (as the server starts it: its '
        "watcher runs and its Paddle probe is done) and the job's end is its terminal event on the server's event stream.",
        "",
        "## Where the time goes (medians of the rounds, seconds)",
        "",
        "Local path, from the master's and the launchers' `PADDLE_NBEXT_TIMINGS` lines and timers around the backend's "
        "functions in the benchmark's process. Steps marked *each* run in every replica at once (median of the replicas); "
        "the waits overlap them, so the rows do not add up to the wall time.",
        "",
        "| local step | s |",
        "|---|---|",
        *(f"| {name} | {_seconds(value)} |" for name, value in breakdown["local"].items()),
        "",
        "| bare step | s |",
        "|---|---|",
        *(f"| {name} | {_seconds(value)} |" for name, value in breakdown["bare"].items()),
        *(line for name in prototypes for line in prototype_table(name, breakdown[name])),
        "",
        *warm_section(result, breakdown),
        "",
        "Produced by `.venv/bin/python benchmarks/bench_local.py`.",
        "",
    ]
    print(write_report("local", result, "\n".join(md)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
