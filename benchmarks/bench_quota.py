"""Benchmark: what "quota before submit" (issue 17) costs a dry run and a submit, on a real control
plane with Kueue built from source (tests/support/controlplane, `queueing.py`).

1. the reads alone (`quota_reads.check_quota`: list the namespace's ResourceQuotas, get the
   LocalQueue, get its ClusterQueue; each a client call in a thread): p50 of `--calls` checks;
2. the pure verdict (`quota.pod_groups` + `resource_quota_bounds` + `cluster_queue_bounds` +
   `judge` on the same objects): p50 of 2,000 runs;
3. a whole dry run (`backend.submit(..., dry_run=True)`: package, plan and the check) with a
   queue, p50 of `--calls`, against the same dry run of a namespace whose jobs go to no queue.

The backend runs with the admin kubeconfig (RBAC is the cluster suite's business).  Machine load
is written beside the figures: the machine may be shared.  Writes results/quota.json and quota.md.

    .venv/bin/python benchmarks/bench_quota.py [--calls 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from harness import load_average, spread, write_report  # noqa: E402
from support.controlplane import ControlPlane  # noqa: E402
from support.controlplane.queueing import queued_control_plane  # noqa: E402

from paddle_nbext.model.spec import JobSpec  # noqa: E402
from paddle_nbext_server.backends.base import SubmitRequest  # noqa: E402
from paddle_nbext_server.backends.kubernetes import KubernetesBackend  # noqa: E402
from paddle_nbext_server.backends.kubernetes.quota import quota, quota_reads  # noqa: E402
from paddle_nbext_server.events import EventHub  # noqa: E402

KUEUE = ("kueue.x-k8s.io", "v1beta2")
PURE_RUNS = 2000
GPU = "nvidia.com/gpu"


def make_queue(api: client.ApiClient, namespace: str) -> None:
    """A ResourceQuota, and a ClusterQueue `bench` with two flavors behind LocalQueue `bench`."""
    client.CoreV1Api(api).create_namespaced_resource_quota(
        namespace,
        client.V1ResourceQuota.model_validate(
            {"metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "64", "requests.memory": "256Gi"}}}
        ),
    )
    custom = client.CustomObjectsApi(api)
    flavors = []
    for name in ("flavor-a", "flavor-b"):
        custom.create_cluster_custom_object(
            *KUEUE, "resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}}
        )
        flavors.append({"name": name, "resources": [{"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "128Gi"}]})
    custom.create_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "bench"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": flavors}]},
        },
    )
    custom.create_namespaced_custom_object(
        *KUEUE,
        namespace,
        "localqueues",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "bench"}, "spec": {"clusterQueue": "bench"}},
    )


def spec(name: str) -> JobSpec:
    return JobSpec.from_dict(
        {"job_name": name, "entry_point": "python train.py", "trainer_package": "mnist", "pservers": 2, "trainers": 4, "snapshot": False}
    )


async def timed(calls: int, step: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    await step()  # warm: connection, home volume, the API's discovery
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await step()
        times.append(time.perf_counter() - started)
    return spread(times)


def backend_for(plane: ControlPlane, namespace: str, home: Path, **traits: Any) -> KubernetesBackend:
    return KubernetesBackend(
        events=EventHub(),
        kubeconfig=str(plane.admin_kubeconfig),
        namespace=namespace,
        home_volume="pvc",
        home_path=str(home),
        workload_mode="jobset",
        sync_timeout=60.0,
        **traits,
    )


async def run(args: argparse.Namespace, plane: ControlPlane, home: Path) -> dict[str, Any]:
    api = config.new_client_from_config(config_file=str(plane.admin_kubeconfig))
    core = client.CoreV1Api(api)
    for namespace in ("bench-quota", "bench-plain"):
        core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": namespace}}))
    make_queue(api, "bench-quota")
    result: dict[str, Any] = {"cpus": os.cpu_count(), "load_before": load_average()}
    queued = backend_for(plane, "bench-quota", home, default_queue="bench")
    plain = backend_for(plane, "bench-plain", home)
    await queued.start()
    await plain.start()
    try:
        request = SubmitRequest(spec("bench"), "bench", home)
        dry = await queued.submit(request, dry_run=True)
        plan = dry["plan"]["manifests"]
        result["example_words"] = dry["quota"]["words"]
        connection = await queued.api.connect()  # noqa: SLF001 - the backend's own connection and call

        async def reads() -> Any:
            return await quota_reads.check_quota(
                queued.api.call,  # noqa: SLF001
                connection.api,
                "bench-quota",
                plan,
                queue="bench",
                gpu_resource=GPU,
            )

        result["reads"] = await timed(args.calls, reads)
        quotas = client.CustomObjectsApi(api).get_cluster_custom_object(*KUEUE, "clusterqueues", "bench")
        assert isinstance(quotas, dict)  # a custom object comes back as the JSON object the API server sent
        resource_quotas = api.sanitize_for_serialization(core.list_namespaced_resource_quota("bench-quota"))["items"]
        pure = []
        for _ in range(PURE_RUNS):
            started = time.perf_counter()
            groups = quota.pod_groups(plan)
            wanted = list(quota.job_need(groups))
            bounds, notes = quota.resource_quota_bounds(resource_quotas, wanted)
            quota.judge(groups, bounds + quota.cluster_queue_bounds(quotas, wanted), notes, GPU)
            pure.append(time.perf_counter() - started)
        result["pure"] = spread(pure)
        result["dry_run_queued"] = await timed(args.calls, lambda: queued.submit(request, dry_run=True))
        result["dry_run_plain"] = await timed(args.calls, lambda: plain.submit(SubmitRequest(spec("bench"), "bench", home), dry_run=True))
    finally:
        await queued.stop()
        await plain.stop()
        api.close()
    result["load_after"] = load_average()
    return result


def markdown(result: dict[str, Any]) -> str:
    def ms(part: dict[str, float]) -> str:
        return f"p50 {part['p50'] * 1000:.2f} ms (min {part['min'] * 1000:.2f}, max {part['max'] * 1000:.2f}, n={part['n']})"

    return "\n".join(
        [
            "# Quota before submit: what the check costs",
            "",
            f"`{' '.join(['.venv/bin/python', 'benchmarks/bench_quota.py', *sys.argv[1:]])}` on the suite's control plane with "
            f"Kueue from source; `jobset` mode; {result['cpus']} CPUs, load {result['load_before'][0]:.1f} before, "
            f"{result['load_after'][0]:.1f} after.",
            "",
            "| what | figure |",
            "|---|---|",
            f"| the reads (ResourceQuota list, LocalQueue get, ClusterQueue get) | {ms(result['reads'])} |",
            f"| the verdict and sentence from those objects (pure) | {ms(result['pure'])} |",
            f"| a whole dry run, job to a Kueue queue (with the check) | {ms(result['dry_run_queued'])} |",
            f"| a whole dry run, no queue (ResourceQuota list only) | {ms(result['dry_run_plain'])} |",
            "",
            f"The sentence: `{result['example_words']}`",
            "",
            "The check runs on dry runs and submits only; listing jobs makes no quota read.",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-quota-") as work, queued_control_plane(Path(work)) as (plane, queues):
        home = Path(work) / "home"
        (home / "mnist").mkdir(parents=True)
        (home / "mnist" / "train.py").write_text("print('training')\n")
        result = asyncio.run(run(args, plane, home))
    print(write_report("quota", result, markdown(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
