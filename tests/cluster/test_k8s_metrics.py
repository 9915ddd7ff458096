"""What replicas `report()` on Kubernetes: the launcher names a file on the home volume beside
the job's logs, and the backend reads it directly; the reporting module reaches every pod
through the job record ConfigMap (the real API server must accept its key and mount path).

No container runs here (KWOK pods), so each test writes a trainer's metrics the way its replica
would: the launcher's own `build_env` from the pod's environment (its container env from the
API plus `JOB_COMPLETION_INDEX`) names the file, and the shipped `paddle_nbext_job.Reporter`
writes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kubernetes import client

from cluster.k8s_objects import meta, present
from cluster.test_k8s_backend import pod_of, run, running, spec, workspace
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.errors import JobNotFound
from paddle_nbext_server.jobfiles.runtime_files import config_key
from paddle_nbext_server.runtime import launcher, paddle_nbext_job

if TYPE_CHECKING:
    from cluster.conftest import Cluster

pytestmark = pytest.mark.cluster

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
MODULE = "pylib/paddle_nbext_job.py"


def report_as(admin: client.ApiClient, namespace: str, pod: str, losses: list[float]) -> str:
    """What `report()` in `pod` writes; returns the file it wrote."""
    body = client.CoreV1Api(admin).read_namespaced_pod(pod, namespace)
    env = {item.name: item.value for item in present(present(body.spec, "spec").containers[0].env, "env") if item.value is not None}
    env["JOB_COMPLETION_INDEX"] = present(meta(body).annotations, "annotations")[INDEX_KEY]
    replica_env = launcher.build_env(env, "/paddle-nbext/pylib")
    reporter = paddle_nbext_job.reporter_from(replica_env)
    assert reporter is not None, f"the launcher of {pod} names no metrics file"
    for step, loss in enumerate(losses, start=1):
        reporter.add(step, len(losses), {"loss": loss})
    reporter.close()
    return reporter.path


def test_metrics_are_read_from_the_home_volume_files(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("curve", pservers=1, trainers=2), "alice", home))
            cluster.await_job_pods(namespace)

            # The reporting module is in the release's runtime ConfigMap, mounted at pylib/ in every pod.
            trainer = client.CoreV1Api(admin).read_namespaced_pod(pod_of(admin, namespace, "curve", "trainer", 0), namespace)
            runtime = next(volume.config_map for volume in present(present(trainer.spec, "spec").volumes, "volumes") if volume.config_map)
            items = {item.path: item.key for item in present(runtime.items, "items")}
            assert items[MODULE] == "pylib.paddle_nbext_job.py"
            bundle = client.CoreV1Api(admin).read_namespaced_config_map(present(runtime.name, "name"), namespace)
            assert present(bundle.data, "data")[config_key(MODULE)].startswith('"""`report()`')

            paths = [
                report_as(admin, namespace, pod_of(admin, namespace, "curve", "trainer", i), [1.0 / (i + s) for s in range(1, 6)])
                for i in (0, 1)
            ]
            assert paths == [str(home / ".paddle-jobs" / "curve" / "logs" / f"trainer-{i}.metrics.jsonl") for i in (0, 1)]

            files = await backend.metrics_files("curve", "alice")
            assert [(f.role, f.index) for f in files] == [("pserver", 0), ("trainer", 0), ("trainer", 1)]
            body = backend.metrics.read("curve", files, None, 500)
            replicas = {(r["role"], r["index"]): r for r in body["replicas"]}
            assert replicas[("pserver", 0)]["series"] == {}
            for i in (0, 1):
                loss = replicas[("trainer", i)]["series"]["loss"]
                assert loss["step"] == [1, 2, 3, 4, 5] and loss["value"] == [1.0 / (i + s) for s in range(1, 6)]
            assert body["progress"]["fraction"] == 1.0
            with pytest.raises(JobNotFound):
                await backend.metrics_files("curve", "bob")

            await backend.delete("curve", "alice")
            assert not (home / ".paddle-jobs" / "curve").exists()  # the metrics go with the job

    run(scenario())
