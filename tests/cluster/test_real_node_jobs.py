"""Real Paddle jobs in real pods: the whole path of a notebook user on a cluster with a real node.

A real ``jupyter server`` with ``c.PaddleNbext.backend = "kubernetes"`` runs as the notebook's uid
under the shipped Role (deploy/rbac/notebook-role.yaml) and the job master under its own
(master-role.yaml), in a namespace of their own; the user's home is one directory that the server
sees and every pod mounts through ``claim-{username}`` (a ``local`` volume on the node, standing
in for CephFS).  Every job is driven through the REST API only; the kubelet, containerd and runc
run the replicas' containers from the Paddle image built here, CoreDNS gives them each other's
names, and the master pod reaches the API server through ``kubernetes.default.svc``.

Each test waits for the state it checks (bounded, the last state seen in its failure message),
never for a length of time.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from support.notebook_server import NotebookServer

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
USER = "jovyan"
# Real pods on a shared 2-core machine: image already there, but Paddle's import and a gloo
# rendezvous take tens of seconds under load.
JOB_WAIT = 600.0
ENDED = ("Succeeded", "Failed", "Cancelled")
SMALL = {"pserver_cpu": "250m", "trainer_cpu": "250m", "pserver_mem": "1Gi", "trainer_mem": "1536Mi"}


def shipped(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((REPO / "deploy" / "rbac" / name).read_text()) if d]


def apply_shipped_rbac(api: client.ApiClient, namespace: str) -> None:
    """deploy/rbac/notebook-role.yaml and master-role.yaml as an admin applies them, plus the
    notebook's ServiceAccount (Zero to JupyterHub's singleuser.serviceAccountName)."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "paddle-notebook"}})
    for doc in shipped("notebook-role.yaml") + shipped("master-role.yaml"):
        doc["metadata"]["namespace"] = namespace
        create = {
            "ServiceAccount": core.create_namespaced_service_account,
            "Role": rbac.create_namespaced_role,
            "RoleBinding": rbac.create_namespaced_role_binding,
        }[doc["kind"]]
        create(namespace, doc)


@dataclass
class Notebook:
    server: NotebookServer
    namespace: str
    home: Path
    admin: client.ApiClient
    cluster: Any

    def submit(self, name: str, **fields: Any) -> dict[str, Any]:
        body = {"job_name": name, "trainer_package": "examples", **SMALL, **fields}
        answer = self.server.api("POST", "jobs", body=body)
        assert answer.status_code == 201, f"submit {name}: {answer.status_code} {answer.text}"
        return dict(answer.json())

    def status(self, name: str) -> dict[str, Any]:
        answer = self.server.api("GET", f"jobs/{name}")
        assert answer.status_code == 200, f"GET jobs/{name}: {answer.status_code} {answer.text}"
        return dict(answer.json())

    def wait(self, name: str, check: Callable[[dict[str, Any]], bool], what: str, timeout: float = JOB_WAIT) -> dict[str, Any]:
        """The job's status once ``check`` holds; the last status seen (and where the node's
        logs are) in the failure message otherwise."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            last = self.status(name)
            if check(last):
                return last
            if last.get("phase") in ENDED and not check(last):
                break  # it ended otherwise: no point waiting
            time.sleep(0.5)
        raise AssertionError(
            f"job {name}: {what} not seen; last status: {describe(last)}; pods: {self.pods(name)}; {self.cluster.node.describe()}"
        )

    def ended(self, name: str) -> dict[str, Any]:
        return self.wait(name, lambda s: s.get("phase") in ENDED, "an end")

    def log(self, name: str, role: str = "trainer", index: int = 0) -> str:
        answer = self.server.api("GET", f"jobs/{name}/logs", params={"role": role, "index": index})
        assert answer.status_code == 200, f"log of {name} {role} {index}: {answer.status_code} {answer.text}"
        return answer.text

    def wait_log(self, name: str, pattern: str, role: str = "trainer", index: int = 0, timeout: float = JOB_WAIT) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            answer = self.server.api("GET", f"jobs/{name}/logs", params={"role": role, "index": index})
            text = answer.text if answer.status_code == 200 else f"({answer.status_code} {answer.text})"
            if re.search(pattern, text):
                return text
            time.sleep(0.5)
        raise AssertionError(f"{role} {index} of {name} never logged /{pattern}/; last: {text[-2000:]}; status: {describe(self.status(name))}")

    def pods(self, name: str) -> list[str]:
        core = client.CoreV1Api(self.admin)
        found = core.list_namespaced_pod(self.namespace).items
        return [
            f"{p.metadata.name} {p.status.phase} on {p.spec.node_name}"
            for p in found
            if (p.metadata.labels or {}).get("paddle-nbext/job", "").startswith(name)
        ]

    def job_pods(self, name: str) -> list[Any]:
        core = client.CoreV1Api(self.admin)
        return [p for p in core.list_namespaced_pod(self.namespace).items if (p.metadata.labels or {}).get("paddle-nbext/job", "").startswith(name)]

    def delete(self, name: str) -> None:
        answer = self.server.api("DELETE", f"jobs/{name}")
        assert answer.status_code in (204, 404), f"DELETE jobs/{name}: {answer.status_code} {answer.text}"


def describe(status: dict[str, Any]) -> str:
    replicas = ", ".join(
        f"{r['role']} {r['index']} {r['phase']}" + (f" ({r['reason']})" if r.get("reason") else "") for r in status.get("replicas", [])
    )
    return f"{status.get('phase')} {status.get('message')!r} [{replicas}]"


def losses(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"loss[ =:]+([0-9.eE+-]+)", text)]


@pytest.fixture(scope="module")
def notebook(real_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook]:
    site = real_cluster.node
    namespace = real_cluster.new_namespace()
    admin = real_cluster.api_client()
    apply_shipped_rbac(admin, namespace)
    token = client.CoreV1Api(admin).create_namespaced_service_account_token(
        "paddle-notebook", namespace, {"spec": {"expirationSeconds": 7200}}
    ).status.token
    kubeconfig = Path(real_cluster.kubeconfig_with_token(token, namespace))
    home = site.new_home(USER)
    shutil.copytree(EXAMPLES, home / "examples")
    site.home_claim(admin, namespace, f"claim-{USER}", home)
    # The notebook's token lives beside the home, readable by the notebook's uid only.
    private = kubeconfig.with_name(f"{home.name}.kubeconfig")
    private = site.homes / private.name
    shutil.copyfile(kubeconfig, private)
    settings = {
        "PaddleNbext": {"backend": "kubernetes"},
        "KubernetesBackend": {
            "kubeconfig": str(private),
            "namespace": namespace,
            "home_volume": "pvc",
            "home_pvc_template": "claim-{username}",
            "home_path": str(home),
            "default_image": site.image,
            "image_pull_policy": site.pull_policy,
            "pod_security_context": site.security_context(),
            **site.placement(),
        },
    }
    for path in [home, *home.rglob("*"), private]:
        import os

        os.lchown(path, site.uid, site.gid)
    private.chmod(0o600)
    server = NotebookServer(home, settings, user=USER, uid=site.uid, gid=site.gid, log_dir=tmp_path_factory.mktemp("notebook-logs"))
    server.start()
    try:
        yield Notebook(server, namespace, home, admin, real_cluster)
    finally:
        server.stop()
        site.release_volumes(admin)


def test_a_geo_parameter_server_job_trains_in_real_pods_and_its_logs_outlive_them(notebook: Notebook) -> None:
    notebook.submit(
        "geo",
        mode="ps",
        pservers=2,
        trainers=2,
        entry_point="python ps_train.py --steps 200 --print-every 20",
    )
    running = notebook.wait("geo", lambda s: all(r["phase"] == "Running" for r in s["replicas"]) and len(s["replicas"]) == 4, "every replica Running")
    assert running["phase"] == "Running", describe(running)
    # While the pods live, the log is what the real kubelet serves (the API's pods/log).
    served = notebook.wait_log("geo", r"step \d+ loss", index=1)
    pod = next(p for p in notebook.job_pods("geo") if "trainer" in p.metadata.name and p.status.phase == "Running")
    kubelet_log = client.CoreV1Api(notebook.admin).read_namespaced_pod_log(pod.metadata.name, notebook.namespace)
    assert "loss" in kubelet_log and "loss" in served

    final = notebook.ended("geo")
    assert final["phase"] == "Succeeded", describe(final)
    for index in (0, 1):
        trained = losses(notebook.log("geo", "trainer", index))
        assert len(trained) >= 2 and trained[-1] < trained[0], f"trainer {index} losses {trained}"
    metrics = notebook.server.api("GET", "jobs/geo/metrics").json()
    reported = [r for r in metrics["replicas"] if r["role"] == "trainer"]
    assert reported and metrics["progress"]["step"] >= 200, metrics

    # The pods go away (node scale-down, pod GC): the logs come from the home now.
    core = client.CoreV1Api(notebook.admin)
    for gone in notebook.job_pods("geo"):
        core.delete_namespaced_pod(gone.metadata.name, notebook.namespace, grace_period_seconds=0)
    deadline = time.monotonic() + 60
    while notebook.job_pods("geo") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not notebook.job_pods("geo"), notebook.pods("geo")
    after = notebook.log("geo", "trainer", 1)
    assert len(losses(after)) >= 2 and losses(after)[-1] < losses(after)[0], after[-2000:]
    assert (notebook.home / ".paddle-jobs").is_dir()


def test_a_collective_job_trains_over_gloo_between_real_pods(notebook: Notebook) -> None:
    notebook.submit("ring", mode="collective", trainers=2, entry_point="python collective_train.py --steps 60 --print-every 10")
    final = notebook.ended("ring")
    assert final["phase"] == "Succeeded", describe(final)
    for index in (0, 1):
        trained = losses(notebook.log("ring", "trainer", index))
        assert len(trained) >= 2 and trained[-1] < trained[0], f"rank {index} losses {trained}"


def test_files_a_job_writes_into_the_home_belong_to_the_notebook_user(notebook: Notebook) -> None:
    (notebook.home / "examples" / "write_out.py").write_text(
        "import os\nopen(os.path.expanduser('~/written-by-job.txt'), 'w').write(str(os.getuid()))\nprint('wrote', flush=True)\n"
    )
    import os

    os.lchown(notebook.home / "examples" / "write_out.py", 1000, 100)
    notebook.submit("owner", mode="collective", trainers=1, entry_point="python write_out.py")
    final = notebook.ended("owner")
    assert final["phase"] == "Succeeded", describe(final)
    written = notebook.home / "written-by-job.txt"
    assert written.read_text() == "1000"
    assert written.stat().st_uid == 1000
    records = list((notebook.home / ".paddle-jobs").rglob("*"))
    assert records and {p.stat().st_uid for p in records} == {1000}, {str(p): p.stat().st_uid for p in records if p.stat().st_uid != 1000}
