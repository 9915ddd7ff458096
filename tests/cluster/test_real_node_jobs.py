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

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import NotFoundException
from support.notebook_server import NotebookServer
from support.realnode_notebook import NOTEBOOK_ACCOUNT, apply_shipped_rbac, prepare_notebook

from cluster.k8s_objects import meta, name_of, present

if TYPE_CHECKING:
    from cluster.conftest import RealCluster

# Each test waits for real pods (JOB_WAIT at most per state); the suite-wide 300 s is too short.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

USER = "jovyan"
# Real pods on a shared 2-core machine: image already there, but Paddle's import and a gloo
# rendezvous take tens of seconds under load.
JOB_WAIT = 300.0
ENDED = ("Succeeded", "Failed", "Cancelled")
SMALL = {"pserver_cpu": "250m", "trainer_cpu": "250m", "pserver_mem": "1Gi", "trainer_mem": "1536Mi"}


@dataclass
class Notebook:
    server: NotebookServer
    namespace: str
    home: Path
    admin: client.ApiClient
    cluster: RealCluster
    settings: dict[str, Any]
    log_dir: Path

    def start_server(self) -> None:
        """A new server process for the same user, home and settings (after ``server.stop()``)."""
        site = self.cluster.node
        self.server = NotebookServer(self.home, self.settings, user=USER, uid=site.uid, gid=site.gid, log_dir=self.log_dir).start()

    def write(self, relative: str, text: str) -> None:
        """A file the user writes in their home (owned by them, as from the notebook)."""
        path = self.home / relative
        path.write_text(text)
        os.lchown(path, self.cluster.node.uid, self.cluster.node.gid)

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
            if last.get("phase") in ENDED and last.get("finished") and not check(last):
                break  # it ended otherwise (the end is recorded: nothing will change): no point waiting
            time.sleep(0.5)
        raise AssertionError(
            f"job {name}: {what} not seen; last status: {describe(last)}; pods: {self.pods(name)}; {self.cluster.node.describe()}"
        )

    def ended(self, name: str) -> dict[str, Any]:
        """The job's recorded end: the phase alone shows a moment before the end is written with
        its failure's log line (only the recorded end sets `finished`)."""
        return self.wait(name, lambda s: s.get("phase") in ENDED and bool(s.get("finished")), "a recorded end")

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
        raise AssertionError(
            f"{role} {index} of {name} never logged /{pattern}/; last: {text[-2000:]}; status: {describe(self.status(name))}"
        )

    def pods(self, name: str) -> list[str]:
        core = client.CoreV1Api(self.admin)
        found = core.list_namespaced_pod(self.namespace).items
        return [
            f"{meta(p).name} {present(p.status, 'status').phase} on {present(p.spec, 'spec').node_name}"
            for p in found
            if (meta(p).labels or {}).get("paddle-nbext/job", "").startswith(name)
        ]

    def job_pods(self, name: str) -> list[client.V1Pod]:
        core = client.CoreV1Api(self.admin)
        return [
            p for p in core.list_namespaced_pod(self.namespace).items if (meta(p).labels or {}).get("paddle-nbext/job", "").startswith(name)
        ]

    def objects(self, name: str) -> list[str]:
        """Every object of the job's left in the namespace (its label names the job)."""
        core, batch = client.CoreV1Api(self.admin), client.BatchV1Api(self.admin)
        found = []
        for kind, listing in (
            ("ConfigMap", core.list_namespaced_config_map),
            ("Service", core.list_namespaced_service),
            ("Job", batch.list_namespaced_job),
            ("Pod", core.list_namespaced_pod),
        ):
            found += [
                f"{kind} {meta(o).name}"
                for o in listing(self.namespace).items
                if (meta(o).labels or {}).get("paddle-nbext/job", "").startswith(name)
            ]
        return found

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
def notebook(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notebook]:
    yield from open_notebook(real_cluster, tmp_path_factory.mktemp("notebook-logs"))


def open_notebook(
    real_cluster: RealCluster,
    log_dir: Path,
    adjust: Callable[[Path, dict[str, Any]], None] | None = None,
    home_for: Callable[[str], Path] | None = None,
) -> Iterator[Notebook]:
    """A notebook server of the user's, in a namespace of its own that enforces Pod Security's
    strictest profile (every job pod and master must pass it), under the shipped RBAC; `adjust`
    may change the home and the server settings before the server starts; `home_for(namespace)`
    provisions the user's home and its claim there (a local volume on the node otherwise).
    Stops it after."""
    site = real_cluster.node
    namespace = real_cluster.new_namespace(labels={"pod-security.kubernetes.io/enforce": "restricted"})
    admin = real_cluster.api_client()
    apply_shipped_rbac(admin, namespace)
    token = present(
        present(
            client.CoreV1Api(admin)
            .create_namespaced_service_account_token(
                NOTEBOOK_ACCOUNT, namespace, client.AuthenticationV1TokenRequest.model_validate({"spec": {"expirationSeconds": 7200}})
            )
            .status,
            "status",
        ).token,
        "token",
    )
    home = home_for(namespace) if home_for is not None else None
    setup = prepare_notebook(site, admin, namespace, Path(real_cluster.kubeconfig_with_token(token, namespace)), USER, home)
    settings = json.loads(json.dumps(setup.settings))
    if adjust is not None:
        adjust(setup.home, settings)
    server = NotebookServer(setup.home, settings, user=USER, uid=site.uid, gid=site.gid, log_dir=log_dir)
    server.start()
    book = Notebook(server, namespace, setup.home, admin, real_cluster, settings, log_dir)
    try:
        yield book
    finally:
        book.server.stop()
        site.release_volumes(admin)


def test_a_geo_parameter_server_job_trains_in_real_pods_and_its_logs_outlive_them(notebook: Notebook) -> None:
    notebook.submit(
        "geo",
        mode="ps",
        pservers=2,
        trainers=2,
        entry_point="python ps_train.py --steps 200 --print-every 20",
    )
    running = notebook.wait(
        "geo", lambda s: all(r["phase"] == "Running" for r in s["replicas"]) and len(s["replicas"]) == 4, "every replica Running"
    )
    assert running["phase"] == "Running", describe(running)
    # While the pods live, the log is what the real kubelet serves (the API's pods/log).
    served = notebook.wait_log("geo", r"step \d+ loss", index=1)
    # trainer 1's pod, whose log was waited for (Running or done: its log stays)
    pod = next(p for p in notebook.job_pods("geo") if "-trainer-1-" in name_of(p))
    kubelet_log = client.CoreV1Api(notebook.admin).read_namespaced_pod_log(name_of(pod), notebook.namespace)
    assert "loss" in kubelet_log and "loss" in served

    final = notebook.ended("geo")
    assert final["phase"] == "Succeeded", describe(final)
    for index in (0, 1):
        trained = losses(notebook.log("geo", "trainer", index))
        assert len(trained) >= 2 and trained[-1] < trained[0], f"trainer {index} losses {trained}"
    metrics = notebook.server.api("GET", "jobs/geo/metrics").json()
    reported = [r for r in metrics["replicas"] if r["role"] == "trainer"]
    assert reported and metrics["progress"]["step"] >= 200, metrics

    # The pods go away (node scale-down, pod GC): the logs come from the home now. The master's
    # pod may go by itself between the listing and its delete (its Job ends once the job has).
    core = client.CoreV1Api(notebook.admin)
    for gone in notebook.job_pods("geo"):
        with contextlib.suppress(NotFoundException):
            core.delete_namespaced_pod(name_of(gone), notebook.namespace, grace_period_seconds=0)
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
    notebook.write(
        "examples/write_out.py",
        "import os\nopen(os.path.expanduser('~/written-by-job.txt'), 'w').write(str(os.getuid()))\nprint('wrote', flush=True)\n",
    )
    notebook.submit("owner", mode="collective", trainers=1, entry_point="python write_out.py")
    final = notebook.ended("owner")
    assert final["phase"] == "Succeeded", describe(final)
    written = notebook.home / "written-by-job.txt"
    assert written.read_text() == "1000"
    assert written.stat().st_uid == 1000
    records = list((notebook.home / ".paddle-jobs").rglob("*"))
    assert records and {p.stat().st_uid for p in records} == {1000}, {str(p): p.stat().st_uid for p in records if p.stat().st_uid != 1000}


def test_a_trainer_that_raises_fails_the_job_with_the_exception_line(notebook: Notebook) -> None:
    notebook.submit(
        "raises", mode="collective", trainers=2, entry_point="python collective_train.py --steps 60 --raise-rank 1 --raise-step 5"
    )
    final = notebook.ended("raises")
    assert final["phase"] == "Failed", describe(final)
    assert "ValueError: bad batch at step 5: x has NaN values" in final["message"], (
        final["message"] + "\n--- trainer 1's log ---\n" + notebook.log("raises", "trainer", 1)[-4000:]
    )
    assert final["message"].startswith("trainer 1 failed with Exit code 1"), describe(final)
    raised = next(r for r in final["replicas"] if r["index"] == 1)
    assert raised["phase"] == "Failed" and raised["exit_code"] == 1, describe(final)
    assert "Traceback" in notebook.log("raises", "trainer", 1)


SIGTERM_SCRIPT = """
import os, signal, sys, time

rank = os.environ["PADDLE_TRAINER_ID"]


def stop(signum, frame):
    print(f"rank {rank} caught SIGTERM, saving", flush=True)
    with open(os.path.expanduser(f"~/sigterm-{rank}.txt"), "w") as out:
        out.write("saved")
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
print(f"rank {rank} ready", flush=True)
while True:
    time.sleep(0.2)
"""


def test_cancel_sends_sigterm_to_the_replicas_code_and_delete_removes_everything(notebook: Notebook) -> None:
    notebook.write("examples/until_sigterm.py", SIGTERM_SCRIPT)
    notebook.submit("stopme", mode="collective", trainers=2, entry_point="python until_sigterm.py")
    for index in (0, 1):
        notebook.wait_log("stopme", rf"rank {index} ready", index=index)
    answer = notebook.server.api("POST", "jobs/stopme/cancel")
    assert answer.status_code in (200, 202), answer.text
    final = notebook.ended("stopme")
    assert final["phase"] == "Cancelled", describe(final)
    deadline = time.monotonic() + 120  # the kubelet stops the containers: SIGTERM, grace period, SIGKILL
    while (
        any(present(p.status, "status").phase in ("Pending", "Running") for p in notebook.job_pods("stopme"))
        and time.monotonic() < deadline
    ):
        time.sleep(0.5)
    for index in (0, 1):  # the handlers ran: SIGTERM came before any SIGKILL
        assert (notebook.home / f"sigterm-{index}.txt").read_text() == "saved"
        assert f"rank {index} caught SIGTERM" in notebook.log("stopme", "trainer", index)

    notebook.delete("stopme")
    assert notebook.server.api("GET", "jobs/stopme").status_code == 404
    deadline = time.monotonic() + 120
    while notebook.objects("stopme") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert notebook.objects("stopme") == [], notebook.objects("stopme")
    assert not (notebook.home / ".paddle-jobs" / "stopme").exists()


MEMORY_HOG = """
blocks = []
print("allocating", flush=True)
while True:
    blocks.append(b"\\x01" * (32 << 20))
"""


def test_a_replica_over_its_memory_limit_ends_oomkilled_by_its_cgroup(notebook: Notebook) -> None:
    notebook.write("examples/hog.py", MEMORY_HOG)
    notebook.submit("hog", mode="collective", trainers=1, trainer_mem="300Mi", entry_point="python hog.py")
    final = notebook.ended("hog")
    assert final["phase"] == "Failed", describe(final)
    assert "OOMKilled" in final["message"], describe(final)
    # the launcher survives the kill of the larger trainer code and says at which limit, last
    assert "trainer 0 failed with OOMKilled: the kernel killed it at its 300 MiB memory limit (OOMKilled)" in final["message"], describe(
        final
    )
    assert final["replicas"][0]["reason"] and "OOMKilled" in final["replicas"][0]["reason"], describe(final)


def test_an_image_the_node_does_not_have_is_named_in_the_reason(notebook: Notebook) -> None:
    if notebook.cluster.node.pull_policy != "Never":
        pytest.skip("another cluster may pull images: only a node that never pulls has a fixed answer")
    notebook.submit("noimage", mode="collective", trainers=1, image="registry.local/paddle:0.0-missing", entry_point="python x.py")
    try:
        waiting = notebook.wait(
            "noimage", lambda s: any("ErrImageNeverPull" in (r.get("reason") or "") for r in s["replicas"]), "the kubelet's image error"
        )
        reason = next(r["reason"] for r in waiting["replicas"] if "ErrImageNeverPull" in (r.get("reason") or ""))
        assert "registry.local/paddle:0.0-missing" in reason, reason
    finally:
        notebook.server.api("POST", "jobs/noimage/cancel")
        notebook.ended("noimage")
        notebook.delete("noimage")


def test_the_in_cluster_master_ends_a_job_while_no_notebook_server_runs(notebook: Notebook) -> None:
    notebook.submit("alone", mode="collective", trainers=1, entry_point="python collective_train.py --steps 40 --step-delay 0.2")
    notebook.wait("alone", lambda s: s["phase"] == "Running", "Running")
    notebook.server.stop()
    core = client.CoreV1Api(notebook.admin)
    try:
        record_name = next(name_of(c) for c in core.list_namespaced_config_map(notebook.namespace).items if name_of(c).startswith("alone"))
        deadline = time.monotonic() + JOB_WAIT
        final = None
        while final is None and time.monotonic() < deadline:
            annotations = meta(core.read_namespaced_config_map(record_name, notebook.namespace)).annotations or {}
            if "paddle-nbext/status" in annotations:
                final = json.loads(annotations["paddle-nbext/status"])
            time.sleep(0.5)
        assert final is not None, f"the master recorded no end; pods: {notebook.pods('alone')}"
        assert final["phase"] == "Succeeded", final
        master = next(p for p in notebook.job_pods("alone") if "master" in name_of(p))
        assert present(master.spec, "spec").service_account_name == "paddle-nbext-master"
        if notebook.cluster.node.node_names:
            assert present(master.spec, "spec").node_name in notebook.cluster.node.node_names
    finally:
        notebook.start_server()
    assert notebook.status("alone")["phase"] == "Succeeded"


def _attempts_seen(notebook: Notebook, name: str, seen: list[dict[str, set[str]]]) -> Callable[[dict[str, Any]], None]:
    """Records, at every status poll, which attempts' replica pods exist (any phase, terminating
    too) and which of them run, so a test can say two attempts never ran at once."""

    def record(_: dict[str, Any]) -> None:
        pods = [p for p in notebook.job_pods(name) if (meta(p).labels or {}).get("paddle-nbext/role") in ("pserver", "trainer")]
        seen.append(
            {
                "exist": {(meta(p).labels or {}).get("paddle-nbext/attempt", "0") for p in pods},
                "running": {
                    (meta(p).labels or {}).get("paddle-nbext/attempt", "0") for p in pods if present(p.status, "status").phase == "Running"
                },
            }
        )

    return record


def _never_two_attempts(seen: list[dict[str, set[str]]]) -> None:
    """While a pod of the new attempt runs, no pod of the old one exists (not even terminating)."""
    mixed = [s for s in seen if s["running"] - {"0"} and "0" in s["exist"]]
    assert not mixed, f"a new attempt ran beside pods of the old one: {mixed[:3]}"


def test_an_evicted_trainer_restarts_the_whole_job_and_says_so(notebook: Notebook) -> None:
    """An evicted replica never joins the running gang alone: every replica is stopped and made
    again (the old pods gone first), the job says why, the eviction does not use up max_restarts
    (0 here), and training goes on in the new attempt."""
    notebook.submit(
        "evicted", mode="ps", pservers=1, trainers=2, entry_point="python ps_train.py --steps 100000 --print-every 20 --step-delay 0.05"
    )
    try:
        notebook.wait_log("evicted", r"step \d+ loss", index=1)
        before = {name_of(p) for p in notebook.job_pods("evicted") if "master" not in name_of(p)}
        pod = next(p for p in notebook.job_pods("evicted") if "trainer" in name_of(p) and name_of(p).split("-")[-2] == "1")
        client.CoreV1Api(notebook.admin).create_namespaced_pod_eviction(
            name_of(pod),
            notebook.namespace,
            client.V1Eviction.model_validate(
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name_of(pod), "namespace": notebook.namespace}}
            ),
        )
        seen: list[dict[str, set[str]]] = []
        watch = _attempts_seen(notebook, "evicted", seen)

        def restarted_whole(status: dict[str, Any]) -> bool:
            watch(status)
            return (
                status.get("message", "").startswith("restart 1: trainer 1 was evicted") and "all replicas restarting" in status["message"]
            )

        notebook.wait("evicted", restarted_whole, "a whole-job restart naming the eviction", timeout=120)

        def all_running_again(status: dict[str, Any]) -> bool:
            watch(status)
            replicas = status.get("replicas", [])
            return len(replicas) == 3 and all(r["phase"] == "Running" and r["restarts"] == 1 for r in replicas)

        again = notebook.wait("evicted", all_running_again, "every replica Running again, each counting the restart")
        assert again["phase"] == "Running", describe(again)
        _never_two_attempts(seen)
        after = {name_of(p) for p in notebook.job_pods("evicted") if "master" not in name_of(p)}
        assert not before & after, f"pods of the first attempt still stand for replicas: {before & after}"
        # Training goes on in the new attempt (max_restarts is 0: the eviction did not use it up).
        notebook.wait_log("evicted", r"step \d+ loss", index=1)
        assert notebook.status("evicted")["phase"] == "Running"
    finally:
        notebook.server.api("POST", "jobs/evicted/cancel")
        notebook.ended("evicted")
        notebook.delete("evicted")


# Trainer 1 fails once (exit 3 at step 10, leaving a mark in its snapshot); after the whole
# restart the mark is there and every trainer trains to the end.
FAILS_ONCE = (
    "sh -c 'if [ -e .failed-once ]; then exec python ps_train.py --steps 60 --print-every 10; fi; "
    "python ps_train.py --steps 60 --print-every 10 --step-delay 0.1 --crash-trainer 1 --crash-step 10 --crash-code 3; "
    "code=$?; if [ $code -ne 0 ]; then touch .failed-once; fi; exit $code'"
)


def test_a_trainer_failure_with_restarts_left_restarts_every_replica_and_the_job_then_succeeds(notebook: Notebook) -> None:
    notebook.submit("retried", mode="ps", pservers=1, trainers=2, max_restarts=1, entry_point=FAILS_ONCE)
    try:
        seen: list[dict[str, set[str]]] = []
        watch = _attempts_seen(notebook, "retried", seen)

        def restarting(status: dict[str, Any]) -> bool:
            watch(status)
            message: str = status.get("message", "")
            return message.startswith("restart 1 of 1: trainer 1 failed with")

        restart = notebook.wait("retried", restarting, "the whole restart after trainer 1 failed")
        assert "exit code 3" in restart["message"].lower() and "all replicas restarting" in restart["message"], describe(restart)

        def ended(status: dict[str, Any]) -> bool:
            watch(status)
            return status.get("phase") in ENDED and bool(status.get("finished"))

        final = notebook.wait("retried", ended, "an end")
        assert final["phase"] == "Succeeded", describe(final)
        assert [r["restarts"] for r in final["replicas"]] == [1, 1, 1], describe(final)
        _never_two_attempts(seen)
        # A job that went well leaves no Job Failed behind (the pservers' Job is deleted, not
        # ended through its deadline).
        batch = client.BatchV1Api(notebook.admin)
        failed = [
            name_of(j)
            for j in batch.list_namespaced_job(notebook.namespace).items
            if name_of(j).startswith("retried")
            and any(c.type == "Failed" and c.status == "True" for c in present(j.status, "status").conditions or [])
        ]
        assert failed == [], f"Jobs of a successful job read Failed: {failed}"
    finally:
        notebook.delete("retried")


def test_two_trainer_pods_of_three_ranks_each_train_over_gloo_and_a_raising_rank_is_named(notebook: Notebook) -> None:
    """procs_per_trainer on real pods: each trainer pod runs 3 ranks (6 gloo ranks across two pods,
    rendezvous through the pods' DNS names and consecutive ports), every rank's lines prefixed in
    its trainer's log; then a rank that raises fails the job naming its trainer and rank."""
    ranks = {"mode": "collective", "trainers": 2, "procs_per_trainer": 3, "trainer_cpu": "500m", "trainer_mem": "3Gi"}
    notebook.submit("ranks", entry_point="python collective_train.py --steps 40 --print-every 10", **ranks)
    final = notebook.ended("ranks")
    assert final["phase"] == "Succeeded", describe(final)
    for index in (0, 1):
        log = notebook.log("ranks", "trainer", index)
        for rank in range(3):
            lines = "\n".join(line for line in log.splitlines() if line.startswith(f"[rank {rank}] "))
            assert f"trainer {3 * index + rank} of 6 training" in lines, log[-3000:]
            values = losses(lines)
            assert len(values) >= 2 and values[-1] < values[0], (index, rank, values)

    entry = "python collective_train.py --steps 400 --step-delay 0.02 --raise-rank 4 --raise-step 10"
    notebook.submit("rank-raises", entry_point=entry, **ranks)
    failed = notebook.ended("rank-raises")
    assert failed["phase"] == "Failed", describe(failed)
    assert "trainer 1 rank 1 failed: ValueError" in failed["message"], describe(failed)


SHOW_RANK = """import os
print("rank", os.environ["PADDLE_LOCAL_RANK"], "gpus", os.environ.get("FLAGS_selected_gpus", "-"),
      "backend", os.environ.get("PADDLE_DISTRI_BACKEND", "-"), "world", os.environ["PADDLE_GLOBAL_SIZE"], flush=True)
"""


def test_a_gpu_trainer_pod_runs_one_rank_per_device_each_on_its_own_gpu(notebook: Notebook) -> None:
    """A trainer pod with 2 GPUs as the device plugin gives them (NVIDIA_VISIBLE_DEVICES with the
    devices' UUIDs; here the node advertises 2 `nvidia.com/gpu` by hand and the job sets the
    variable, as no GPU is here): 2 ranks, rank r on the r-th visible device, none on gloo."""
    core = client.CoreV1Api(notebook.admin)
    node = present(notebook.cluster.node.node_name, "the real node's name")
    gpus = {"nvidia.com/gpu": "2"}
    core.patch_node_status(node, {"status": {"capacity": gpus, "allocatable": gpus}})
    try:
        notebook.write("examples/show_rank.py", SHOW_RANK)
        notebook.submit(
            "gpus",
            mode="collective",
            trainers=1,
            trainer_gpu=2,
            env={"NVIDIA_VISIBLE_DEVICES": "GPU-6f3a0c1e,GPU-9b2d4e7f"},
            entry_point="python show_rank.py",
        )
        final = notebook.ended("gpus")
        assert final["phase"] == "Succeeded", describe(final)
        log = notebook.log("gpus", "trainer", 0)
        assert "[rank 0] rank 0 gpus 0 backend - world 2" in log, log[-2000:]
        assert "[rank 1] rank 1 gpus 1 backend - world 2" in log, log[-2000:]
    finally:
        # A list body is sent as a JSON patch: remove what was advertised, for the other tests.
        core.patch_node_status(
            node, [{"op": "remove", "path": f"/status/{field}/nvidia.com~1gpu"} for field in ("capacity", "allocatable")]
        )


def test_a_job_deleted_while_its_pods_start_leaves_no_folder_and_its_name_is_free(notebook: Notebook) -> None:
    """Deleted the moment its pods are bound to the node, before their containers start: the
    container runtime would make the missing working directory (the job's package/) as root, a
    folder the user cannot remove that blocks the name.  The delete waits for those pods."""
    name = "early-delete"
    notebook.submit(name, mode="collective", trainers=2, entry_point="python collective_train.py --steps 20")
    deadline = time.monotonic() + JOB_WAIT
    while time.monotonic() < deadline and not any(present(p.spec, "spec").node_name for p in notebook.job_pods(name)):
        time.sleep(0.05)
    notebook.delete(name)
    while time.monotonic() < deadline and notebook.job_pods(name):
        time.sleep(0.2)
    assert not notebook.job_pods(name), notebook.pods(name)
    folder = notebook.home / ".paddle-jobs" / name
    assert not folder.exists(), sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    notebook.submit(name, mode="collective", trainers=2, entry_point="python collective_train.py --steps 20")
    assert notebook.ended(name)["phase"] == "Succeeded"
    notebook.delete(name)
