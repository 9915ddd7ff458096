#!/usr/bin/env python3
"""Check, on a machine (or cluster) with GPUs, that a paddle-nbext job trains the way Paddle
runs on GPUs: one process per device, each rank on its own GPU, NCCL between them.

It submits a real collective job of 1 trainer x N GPUs through the server's REST API (the
`paddle_nbext.client.Client` the notebook uses), whose every rank reports what it got, and
prints one pass/fail line per check:

* ranks       - N ranks ran and reported (global ranks 0..N-1, each once);
* selected    - each rank's `FLAGS_selected_gpus` is its local rank, and no rank was moved to
                gloo (`PADDLE_DISTRI_BACKEND` unset);
* device      - `paddle.device.get_device()` is `gpu:<local rank>` and its tensors live there,
                every rank on a different GPU of the ones the trainer sees;
* backend     - `paddle.distributed.get_backend()` is NCCL;
* all_reduce  - an `all_reduce` of each rank's `rank + 1` gives N(N+1)/2 on every rank;
* job         - the job succeeded.

Where it runs:

* by default it starts a Jupyter server of its own on 127.0.0.1 with the `local` backend and
  `c.LocalBackend.gpu_pool` set to the N GPUs (`--gpu-ids`, else 0..N-1), using this Python's
  Paddle (a local Paddle GPU install);
* `--server-config FILE` adds a Jupyter config file to that server, e.g. one that sets
  `c.PaddleNbext.backend = "kubernetes"` (and the cluster's settings); give the site's Paddle GPU
  image with `--image`;
* `--url URL` (with `--token`, or `PADDLE_NBEXT_TOKEN`) uses a running server instead, e.g. the
  notebook's own, with whatever backend it has.

`--cpu` is the dry path for machines without GPUs: N gloo ranks on the CPU (`procs_per_trainer`),
checking the same things the CPU way (no `FLAGS_selected_gpus`, device `cpu`, backend gloo, the
same all_reduce).  Exit status: 0 when every check passed, 1 when one failed, 2 on bad arguments.

    python scripts/gpu_check.py --gpus 8
    python scripts/gpu_check.py --gpus 2 --server-config k8s_config.py --image registry.example/paddle:3.0.0-gpu
    python scripts/gpu_check.py --cpu --ranks 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: What each rank prints in front of its report (one JSON object on the same line).
MARK = "GPU_CHECK "

#: The script each rank runs: what it was given, what Paddle says, and an all_reduce.
PROBE = """\
import json, os, socket
import paddle
import paddle.distributed as dist

env = os.environ
report = {
    "host": socket.gethostname(),
    "global_rank": int(env.get("PADDLE_TRAINER_ID", "-1")),
    "world": int(env.get("PADDLE_TRAINERS_NUM", "0")),
    "local_rank": int(env.get("PADDLE_LOCAL_RANK", env.get("PADDLE_RANK_IN_NODE", "-1"))),
    "selected_gpus": env.get("FLAGS_selected_gpus"),
    "distri_backend": env.get("PADDLE_DISTRI_BACKEND"),
    "cuda_visible": env.get("CUDA_VISIBLE_DEVICES"),
    "nvidia_visible": env.get("NVIDIA_VISIBLE_DEVICES"),
    "compiled_with_cuda": paddle.device.is_compiled_with_cuda(),
}
try:
    dist.init_parallel_env()
    report["device"] = paddle.device.get_device()
    report["backend"] = str(dist.get_backend()).lower()
    value = paddle.to_tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    report["place"] = str(value.place)
    report["all_reduce"] = float(value.numpy()[0])
    report["rank"] = dist.get_rank()
    report["world_size"] = dist.get_world_size()
except Exception as error:  # the check says what failed; the job fails too
    report["error"] = f"{type(error).__name__}: {error}"
print(MARK + json.dumps(report), flush=True)
if "error" in report:
    raise SystemExit(1)
""".replace("MARK", repr(MARK))

TERMINAL = frozenset({"Succeeded", "Failed", "Cancelled"})


class UsageError(ValueError):
    """The arguments cannot make a check; the message says why."""


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name:<11} {self.detail}"


# ---- arguments -------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="gpu_check.py",
        description="Run a real 1-node x N-GPU collective paddle-nbext job and check each rank used its own GPU.",
    )
    parse.add_argument("--gpus", type=int, help="GPUs (ranks) of the trainer; default: the GPUs nvidia-smi lists")
    parse.add_argument("--cpu", action="store_true", help="the dry path: gloo ranks on the CPU, no GPU needed")
    parse.add_argument("--ranks", type=int, default=2, help="ranks of the --cpu path [2]")
    parse.add_argument("--gpu-ids", help="GPU ids for the local backend's gpu_pool, e.g. 4,5,6,7 [0..N-1]")
    parse.add_argument("--image", help="the job's image (a Kubernetes backend: the site's Paddle GPU image)")
    parse.add_argument("--server-config", type=Path, help="a Jupyter config file for the server this script starts")
    parse.add_argument("--url", help="a running server's API (http://host:port/paddle/api/v1) instead of starting one")
    parse.add_argument("--token", help="its token [PADDLE_NBEXT_TOKEN]")
    parse.add_argument("--python", help="the interpreter the entry point runs [this one for the local server, else python]")
    parse.add_argument("--package-dir", type=Path, help="where the probe is written (inside your home) [~/paddle-nbext-gpu-check]")
    parse.add_argument("--trainer-mem", default="8Gi", help="the trainer's memory, shared by its ranks [8Gi]")
    parse.add_argument("--trainer-cpu", default="1", help="the trainer's CPU [1]")
    parse.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the job [900]")
    parse.add_argument("--keep", action="store_true", help="keep the job (and its logs) afterwards")
    return parse


@dataclass(frozen=True)
class Options:
    ranks: int
    cpu: bool
    gpu_ids: list[int]
    image: str | None
    server_config: Path | None
    url: str | None
    token: str | None
    python: str | None
    package_dir: Path
    trainer_mem: str
    trainer_cpu: str
    timeout: float
    keep: bool


def options(argv: Sequence[str], env: Mapping[str, str], gpus_found: Callable[[], int | None]) -> Options:
    """The checked arguments; UsageError when they cannot make a check.  `gpus_found` counts the
    machine's GPUs (only asked when neither --gpus nor --cpu says)."""
    args = parser().parse_args(list(argv))
    if args.url and args.server_config:
        raise UsageError("--server-config is for the server this script starts; with --url the server is already running")
    if args.cpu and (args.gpus is not None or args.gpu_ids):
        raise UsageError("--cpu runs gloo ranks without GPUs: leave out --gpus and --gpu-ids (the rank count is --ranks)")
    gpu_ids: list[int] = []
    if args.gpu_ids:
        try:
            gpu_ids = [int(part) for part in args.gpu_ids.split(",")]
        except ValueError:
            raise UsageError(f"--gpu-ids must be GPU numbers separated by commas, got {args.gpu_ids!r}") from None
        if len(set(gpu_ids)) != len(gpu_ids) or min(gpu_ids) < 0:
            raise UsageError(f"--gpu-ids must be distinct GPU numbers, got {args.gpu_ids!r}")
    if args.cpu:
        ranks = args.ranks
        if ranks < 2:
            raise UsageError(f"--ranks must be at least 2 (an all_reduce needs two ranks), got {ranks}")
    else:
        ranks = args.gpus if args.gpus is not None else (len(gpu_ids) or gpus_found())
        if ranks is None:
            raise UsageError("no GPU found (nvidia-smi lists none): give --gpus N, or --cpu for the dry path")
        if ranks < 1:
            raise UsageError(f"--gpus must be at least 1, got {ranks}")
        if gpu_ids and len(gpu_ids) != ranks:
            raise UsageError(f"--gpu-ids lists {len(gpu_ids)} GPUs but the job has {ranks}")
        gpu_ids = gpu_ids or list(range(ranks))
    token = args.token or env.get("PADDLE_NBEXT_TOKEN")
    if args.url and not token:
        raise UsageError("--url needs the server's token: --token, or PADDLE_NBEXT_TOKEN")
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    home = Path(env.get("HOME") or Path.home())
    return Options(
        ranks=ranks,
        cpu=args.cpu,
        gpu_ids=gpu_ids,
        image=args.image,
        server_config=args.server_config,
        url=args.url,
        token=token,
        python=args.python,
        package_dir=args.package_dir or home / "paddle-nbext-gpu-check",
        trainer_mem=args.trainer_mem,
        trainer_cpu=args.trainer_cpu,
        timeout=args.timeout,
        keep=args.keep,
    )


def count_gpus() -> int | None:
    """GPUs `nvidia-smi -L` lists, None without nvidia-smi or GPUs."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    try:
        listed = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    count = sum(1 for line in listed.splitlines() if line.startswith("GPU "))
    return count or None


def job_spec(opts: Options, package: Path, python: str) -> dict[str, Any]:
    """The job: one collective trainer of N ranks (N GPUs, or N gloo ranks with --cpu)."""
    spec: dict[str, Any] = {
        "job_name": "gpu-check",
        "mode": "collective",
        "trainers": 1,
        "trainer_cpu": opts.trainer_cpu,
        "trainer_mem": opts.trainer_mem,
        "trainer_package": str(package),
        "entry_point": f"{shlex.quote(python)} gpu_probe.py",
    }
    if opts.cpu:
        spec.update(trainer_gpu=0, procs_per_trainer=opts.ranks)
    else:
        spec.update(trainer_gpu=opts.ranks, procs_per_trainer=1)
    if opts.image:
        spec["image"] = opts.image
    return spec


# ---- what the ranks said ---------------------------------------------------------------------

_PREFIX = re.compile(r"^\[rank \d+\] ")


def parse_reports(log: str) -> list[dict[str, Any]]:
    """Every rank's report in the trainer's log (each line maybe prefixed `[rank r] `); lines
    that are not a whole report are skipped."""
    reports = []
    for line in log.splitlines():
        text = _PREFIX.sub("", line.strip())
        if not text.startswith(MARK):
            continue
        try:
            report = json.loads(text[len(MARK) :])
        except ValueError:
            continue
        if isinstance(report, dict):
            reports.append(report)
    return reports


def _by_rank(reports: Iterable[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    return {int(r["global_rank"]): r for r in reports if isinstance(r.get("global_rank"), int)}


def evaluate(reports: list[dict[str, Any]], ranks: int, *, cpu: bool, phase: str, message: str = "") -> list[Check]:
    """One Check per property (module docstring), from the ranks' reports and the job's end."""
    checks = []
    got = _by_rank(reports)
    errors = [f"rank {r.get('global_rank')}: {r['error']}" for r in reports if r.get("error")]
    missing = [rank for rank in range(ranks) if rank not in got]
    twice = len(reports) != len(got)
    checks.append(
        Check(
            "ranks",
            not missing and not twice and len(got) == ranks and not errors,
            f"{len(got)} of {ranks} ranks reported"
            + (f"; missing {missing}" if missing else "")
            + ("; a rank reported twice" if twice else "")
            + (f"; {'; '.join(errors)}" if errors else ""),
        )
    )
    reported = [got[rank] for rank in sorted(got)]
    if cpu:
        wrong = [r["global_rank"] for r in reported if r.get("selected_gpus") or r.get("distri_backend") != "gloo"]
        checks.append(
            Check(
                "selected",
                bool(reported) and not wrong,
                "no FLAGS_selected_gpus, PADDLE_DISTRI_BACKEND=gloo on every rank"
                if not wrong
                else f"ranks {wrong} got a GPU or no gloo backend: "
                + "; ".join(f"{r['global_rank']}: {r.get('selected_gpus')!r}/{r.get('distri_backend')!r}" for r in reported),
            )
        )
        off = [r["global_rank"] for r in reported if r.get("device") != "cpu"]
        checks.append(Check("device", bool(reported) and not off, "cpu on every rank" if not off else f"ranks {off} are not on the CPU"))
    else:
        wrong = [r["global_rank"] for r in reported if r.get("selected_gpus") != str(r.get("local_rank")) or r.get("distri_backend")]
        checks.append(
            Check(
                "selected",
                bool(reported) and not wrong,
                "; ".join(f"rank {r['global_rank']}: FLAGS_selected_gpus={r.get('selected_gpus')}" for r in reported)
                + (f" (ranks {wrong}: not their local rank, or moved to gloo)" if wrong else ""),
            )
        )
        devices = [(r.get("host"), r.get("device")) for r in reported]
        bad = [
            r["global_rank"]
            for r in reported
            if r.get("device") != f"gpu:{r.get('local_rank')}" or f"gpu:{r.get('local_rank')}" not in str(r.get("place", ""))
        ]
        shared = len(set(devices)) != len(devices)
        visible = reported[0].get("cuda_visible") or reported[0].get("nvidia_visible") if reported else None
        checks.append(
            Check(
                "device",
                bool(reported) and not bad and not shared,
                ", ".join(f"rank {r['global_rank']} on {r.get('device')}" for r in reported)
                + (f" of visible {visible}" if visible else "")
                + (f"; ranks {bad} not on their own GPU" if bad else "")
                + ("; two ranks share a GPU" if shared else "")
                + ("; this Paddle is not built with CUDA" if any(r.get("compiled_with_cuda") is False for r in reported) else ""),
            )
        )
    want = "gloo" if cpu else "nccl"
    backends = sorted({str(r.get("backend")) for r in reported})
    checks.append(Check("backend", backends == [want], f"{', '.join(backends) or 'none'} (want {want})"))
    total = ranks * (ranks + 1) / 2
    sums = [r.get("all_reduce") for r in reported]
    checks.append(
        Check(
            "all_reduce",
            len(sums) == ranks and all(value == total for value in sums),
            f"sum of rank+1 over {ranks} ranks = {sums} (want {total:g} on each)",
        )
    )
    checks.append(Check("job", phase == "Succeeded", phase + (f": {message}" if message and phase != "Succeeded" else "")))
    return checks


# ---- running it ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def server_config_text(opts: Options) -> str:
    """The config of the server this script starts: the extension on, the GPUs in the local
    backend's pool, then the user's file (which may choose another backend)."""
    lines = [
        "c = get_config()  # noqa",
        'c.ServerApp.jpserver_extensions = {"paddle_nbext_server": True}',
        f"c.LocalBackend.gpu_pool = {opts.gpu_ids!r}",
        f"c.PaddleNbext.max_gpu_per_replica = {max(8, opts.ranks)}",
        f"c.PaddleNbext.max_procs_per_trainer = {max(64, opts.ranks)}",
    ]
    text = "\n".join(lines) + "\n"
    if opts.server_config is not None:
        text += f"\n# {opts.server_config}\n" + opts.server_config.read_text()
    return text


class Server:
    """A Jupyter server of this script's own, on 127.0.0.1, stopped on exit."""

    def __init__(self, opts: Options, workdir: Path) -> None:
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/paddle/api/v1"
        config = workdir / "gpu_check_config.py"
        config.write_text(server_config_text(opts))
        self.log = workdir / "server.log"
        command = [
            sys.executable,
            "-m",
            "jupyter",
            "server",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            f"--config={config}",
            f"--ServerApp.root_dir={Path.home()}",
        ]
        if os.geteuid() == 0:
            command.append("--allow-root")
        env = {**os.environ, "JUPYTER_TOKEN": self.token}  # never on the command line
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _until(ready: Callable[[], Any], timeout: float, what: str, last: Callable[[], str]) -> Any:
    """Ask `ready` until it answers something true (bounded by `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = ready()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:g} s; last seen: {last()}")
        time.sleep(0.5)


def run(opts: Options, say: Callable[[str], None] = print) -> int:
    from paddle_nbext.client import Client, PaddleNbextError

    opts.package_dir.mkdir(parents=True, exist_ok=True)
    (opts.package_dir / "gpu_probe.py").write_text(PROBE)
    with tempfile.TemporaryDirectory(prefix="paddle-nbext-gpu-check-") as scratch:
        server = None if opts.url else Server(opts, Path(scratch))
        try:
            url, token = (opts.url, opts.token) if server is None else (server.url, server.token)
            client = Client(url, token)
            seen = ["nothing yet"]

            def answers() -> bool:
                try:
                    client.version()
                    return True
                except PaddleNbextError as error:
                    seen[0] = str(error)
                    if server is not None and server.process.poll() is not None:
                        raise RuntimeError(f"the server ended with {server.process.returncode}; its log: {server.log}") from None
                    return False

            _until(answers, 120, "the server did not answer", lambda: seen[0])
            backend = client.config().get("backend", {})
            python = opts.python or (sys.executable if server is not None and backend.get("name") == "local" else "python")
            spec = job_spec(opts, opts.package_dir, python)
            kind = f"{opts.ranks} gloo ranks on the CPU" if opts.cpu else f"{opts.ranks} GPUs ({', '.join(map(str, opts.gpu_ids))})"
            say(
                f"== paddle-nbext GPU check: 1 trainer x {kind}, {backend.get('name')} backend"
                + (f", image {opts.image}" if opts.image else "")
            )
            job = client.submit(spec)
            say(f"== job {job.name} submitted; waiting for it to end (at most {opts.timeout:g} s)")
            try:
                last = [job]

                def ended() -> bool:
                    last[0] = client.get_job(job.name)
                    return last[0].phase in TERMINAL

                _until(ended, opts.timeout, "the job did not end", lambda: f"{last[0].phase}: {last[0].message}")
                status = last[0]
                log = client.logs(job.name, role="trainer", index=0)
                checks = evaluate(parse_reports(log), opts.ranks, cpu=opts.cpu, phase=str(status.phase), message=status.message)
                for check in checks:
                    say(check.line())
                passed = all(check.passed for check in checks)
                if not passed:
                    say("== trainer 0's log (last 40 lines):\n" + "\n".join(log.splitlines()[-40:]))
                say(f"== {'all checks passed' if passed else 'a check failed'}")
                return 0 if passed else 1
            finally:
                if opts.keep:
                    say(f"== kept job {job.name} (delete it with: paddle-nbext delete {job.name})")
                else:
                    client.delete(job.name)
        finally:
            if server is not None:
                server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        opts = options(sys.argv[1:] if argv is None else argv, os.environ, count_gpus)
    except UsageError as error:
        print(f"gpu_check.py: {error}", file=sys.stderr)
        return 2
    from paddle_nbext.client import PaddleNbextError

    try:
        return run(opts)
    except (TimeoutError, RuntimeError, OSError, PaddleNbextError) as error:
        print(f"FAIL  {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
