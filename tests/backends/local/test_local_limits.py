"""Which kernel memory limit a local replica gets (`backends/local/master/limits.py`), and how the
cgroup v2 one is made, joined, read and removed.  The cgroup is a plain directory here (this
machine has no delegated cgroup v2 memory controller): the files are what the kernel reads."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

from paddle_nbext_server.backends.local.master import limits
from paddle_nbext_server.backends.local.records import Capacity, Plan, ReplicaPlan, ResourceRequest

MiB = 1 << 20


def plan(**fields: Any) -> Plan:
    base = Plan(
        job="j",
        mode="collective",
        entry_point="true",
        workdir="/w",
        job_dir="/jobs/j",
        python=sys.executable,
        launcher="/jobs/j/runtime/launcher.py",
        capacity=Capacity(cpu=4.0, memory=1 << 34),
        request=ResourceRequest(cpu=1.0, memory=100 * MiB),
        memory_headroom=64 * MiB,
    )
    return dataclasses.replace(base, **fields)


REPLICA = ReplicaPlan("trainer", 0, "127.0.0.1:4000", 1.0, 100 * MiB, "100Mi")


def test_rlimit_as_is_the_memory_plus_headroom_and_never_for_gpus_or_without_a_limit() -> None:
    assert limits.planned(REPLICA, plan(), 0) == limits.KernelLimit(limits.RLIMIT, 164 * MiB)
    assert limits.planned(dataclasses.replace(REPLICA, gpus=1), plan(), 0) is None
    assert limits.planned(dataclasses.replace(REPLICA, memory=0), plan(), 0) is None
    assert limits.planned(REPLICA, plan(memory_headroom=0), 0) is None


def test_a_plan_of_the_release_before_has_no_kernel_limit() -> None:
    data = json.loads(plan().to_json())
    del data["memory_headroom"], data["cgroup_root"]
    assert limits.planned(REPLICA, Plan.from_json(json.dumps(data)), 0) is None


def test_the_rlimit_is_set_in_the_child_and_inherited(tmp_path: Path) -> None:
    limit = limits.KernelLimit(limits.RLIMIT, 164 * MiB)
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0])"
    out = subprocess.run([sys.executable, "-c", code], preexec_fn=lambda: limits.enter(limit), capture_output=True, text=True, check=True)
    assert int(out.stdout) == 164 * MiB
    assert resource.getrlimit(resource.RLIMIT_AS)[0] != 164 * MiB  # the master itself is not limited


def test_the_refused_allocation_is_recognised_only_under_an_rlimit() -> None:
    limit = limits.KernelLimit(limits.RLIMIT, 164 * MiB)
    assert limits.stopped_by_kernel(limit, 1, "Traceback (most recent call last):\nMemoryError\n")
    assert not limits.stopped_by_kernel(limit, 0, "MemoryError")
    assert not limits.stopped_by_kernel(limit, 1, "ValueError: bad batch")
    assert not limits.stopped_by_kernel(None, 1, "MemoryError")
    assert limits.reason(limit, REPLICA, "100Mi") == (
        "MemoryLimitExceeded: the kernel refused memory beyond 164Mi of address space (100Mi + 64Mi headroom, RLIMIT_AS)"
    )


def test_a_cgroup_is_made_per_start_with_the_limit_joined_read_and_removed(tmp_path: Path) -> None:
    limit = limits.planned(REPLICA, plan(cgroup_root=str(tmp_path)), 2)
    assert limit is not None and limit.mechanism == limits.CGROUP and limit.limit == 100 * MiB
    assert Path(limit.cgroup).parent == tmp_path and Path(limit.cgroup).name.endswith("-trainer-0-" + f"{os.getpid()}-2")
    limits.prepare(limit)
    assert (Path(limit.cgroup) / "memory.max").read_text() == str(100 * MiB)
    subprocess.run(["true"], preexec_fn=lambda: limits.enter(limit), check=True)
    assert (Path(limit.cgroup) / "cgroup.procs").read_text() == "0"
    events = Path(limit.cgroup) / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n")
    assert not limits.stopped_by_kernel(limit, 137, "")
    events.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert limits.stopped_by_kernel(limit, 137, "")
    assert (
        limits.reason(limit, REPLICA, "100Mi") == "MemoryLimitExceeded: killed by the kernel at its limit of 100Mi (cgroup v2 memory.max)"
    )
    for name in os.listdir(limit.cgroup):  # the kernel's files vanish with the cgroup; these do not
        os.unlink(os.path.join(limit.cgroup, name))
    limits.release(limit)
    assert not Path(limit.cgroup).exists()


def test_a_cgroup_that_cannot_be_made_raises_and_leaves_nothing(tmp_path: Path) -> None:
    limit = limits.planned(REPLICA, plan(cgroup_root=str(tmp_path / "missing")), 0)
    assert limit is not None
    try:
        limits.prepare(limit)
    except OSError:
        pass
    else:
        raise AssertionError("prepare() made a cgroup under a dir that does not exist")
    assert not (tmp_path / "missing").exists()
