"""Every benchmark of paddle-nbext and what it needs from the machine (not a benchmark itself).

`run_all.py` runs what this lists; `benchmarks/README.md` describes the same entries, and
tests/project/test_benchmarks.py keeps the three in step with the `bench_*.py` files.  A need is
checked here without starting anything: a file, a command, an importable module, root, or the
control plane's binaries having been built (`support.controlplane.build`'s finders: they look
at the cache and ask Go its version, nothing more).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHROMIUM = Path("/usr/bin/chromium")  # as tests/browser/lab_server.py drives it


@dataclass(frozen=True)
class Need:
    """One thing a benchmark needs: `lacking()` says, in a few words, what this machine lacks
    and how to get it ('' when nothing), without starting anything."""

    lacking: Callable[[], str]


@dataclass(frozen=True)
class Benchmark:
    """One run of a `bench_<script>.py`: it writes `results/<name>.json` and `<name>.md`."""

    name: str
    script: str
    needs: tuple[Need, ...] = ()
    args: tuple[str, ...] = ()
    #: Starts a Kubernetes control plane (and maybe real nodes): run only when asked (`--cluster`).
    cluster: bool = False

    @property
    def command(self) -> str:
        return " ".join([".venv/bin/python", f"benchmarks/{self.script}", *self.args])

    def lacking(self) -> list[str]:
        """What this machine lacks for it (empty: it can run here)."""
        return [said for need in self.needs if (said := need.lacking())]


def _module(name: str, how: str) -> Need:
    return Need(lambda: "" if importlib.util.find_spec(name) is not None else f"{name} ({how})")


def _file(path: Path, what: str) -> Need:
    return Need(lambda: "" if path.exists() else what)


def _uv() -> str:
    beside = Path(sys.executable).with_name("uv")
    return "" if beside.exists() or shutil.which("uv") else "uv beside this Python or on PATH (`bash scripts/setup.sh`)"


def _root() -> str:
    return "" if os.geteuid() == 0 else "root (real nodes make network namespaces, cgroups and mounts)"


def _built(finder: str, what: str) -> Need:
    """The control plane's binaries of one kind, built for today's pins (`find_binaries` and
    its siblings look at the cache; they build nothing)."""

    def lacking() -> str:
        tests = str(ROOT / "tests")
        if tests not in sys.path:
            sys.path.insert(0, tests)
        found = getattr(importlib.import_module("support.controlplane.build"), finder)()
        return "" if found is not None else f"{what} built (`bash scripts/controlplane.sh build`, needs Go)"

    return Need(lacking)


def _tools(module: str, what: str) -> Need:
    """The Debian tools `support.<module>.missing_tools()` names."""

    def lacking() -> str:
        tests = str(ROOT / "tests")
        if tests not in sys.path:
            sys.path.insert(0, tests)
        missing: list[str] = importlib.import_module(f"support.{module}").missing_tools()
        return f"{what}: {', '.join(missing)} (`bash scripts/setup.sh` as root)" if missing else ""

    return Need(lacking)


PADDLE = _module("paddle", "the `paddle` extra: `bash scripts/setup.sh --demo`")
PLAYWRIGHT = _module("playwright", "the `test` extra: `bash scripts/setup.sh`")
BROWSER = Need(lambda: "" if CHROMIUM.exists() else f"Chromium at {CHROMIUM} (`bash scripts/setup.sh` as root)")
PANEL_BUILT = _file(
    ROOT / "paddle_nbext" / "labextension" / "package.json", "the built panel (`cd labextension && npm ci && npm run build:prod`)"
)
PANEL_TOOLS = _file(ROOT / "labextension" / "node_modules" / ".bin" / "esbuild", "the panel's node_modules (`cd labextension && npm ci`)")
UV = Need(_uv)
ROOT_USER = Need(_root)
CONTROL_PLANE = _built("find_binaries", "the control plane")
QUEUES = _built("find_queue_binaries", "the JobSet and Kueue controllers")
NODES = _built("find_node_binaries", "the real nodes' binaries")
NODE_TOOLS = _tools("controlplane.realnode", "the real node's tools")
CEPH = _tools("ceph.cluster", "Ceph")
REAL_NODE = (ROOT_USER, CONTROL_PLANE, NODES, NODE_TOOLS)

#: Cheap first; the ones that start a cluster last.
BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("kernel", "bench_kernel.py"),
    Benchmark("server", "bench_server.py"),
    Benchmark("hardening", "bench_hardening.py"),
    Benchmark("requirements", "bench_requirements.py", (UV,)),
    Benchmark("checkpoint", "bench_checkpoint.py", (PADDLE,)),
    Benchmark("metrics", "bench_metrics.py", (PLAYWRIGHT, BROWSER, PANEL_TOOLS)),
    Benchmark("progress", "bench_progress.py", (PADDLE,)),
    Benchmark("panel", "bench_panel.py", (PLAYWRIGHT, BROWSER, PANEL_BUILT)),
    Benchmark("health", "bench_health.py"),
    Benchmark("notify", "bench_notify.py", (_module("aiosmtpd", "the test extra: `pip install -e '.[test]'`"),)),
    Benchmark("local", "bench_local.py", (PADDLE,)),
    Benchmark("ranks", "bench_ranks.py", (PADDLE,)),
    Benchmark("k8s", "bench_k8s.py", (CONTROL_PLANE,), cluster=True),
    Benchmark("owner_scope", "bench_owner_scope.py", (CONTROL_PLANE,), cluster=True),
    Benchmark("quota", "bench_quota.py", (CONTROL_PLANE, QUEUES), cluster=True),
    Benchmark("kueue", "bench_kueue.py", (CONTROL_PLANE, QUEUES), cluster=True),
    Benchmark("real_node", "bench_real_node.py", REAL_NODE, cluster=True),
    Benchmark("restart", "bench_restart.py", REAL_NODE, cluster=True),
    Benchmark("restart_resume", "bench_restart.py", REAL_NODE, ("--checkpoints",), cluster=True),
    Benchmark("hub", "bench_hub.py", (*REAL_NODE, PLAYWRIGHT, BROWSER), cluster=True),
    Benchmark("hub_list", "bench_hub_list.py", REAL_NODE, cluster=True),
    Benchmark("cephfs", "bench_cephfs.py", (*REAL_NODE, CEPH), cluster=True),
    Benchmark("node_loss", "bench_node_loss.py", (*REAL_NODE, CEPH), cluster=True),
)
#: Scripts that are not benchmarks: what the benchmarks share.
HELPERS = ("bench_backend.py",)


def by_name(name: str) -> Benchmark:
    """The entry called `name` (its results file's name); KeyError naming the known ones."""
    for benchmark in BENCHMARKS:
        if benchmark.name == name:
            return benchmark
    raise KeyError(f"no benchmark named {name!r}; known: {', '.join(b.name for b in BENCHMARKS)}")
