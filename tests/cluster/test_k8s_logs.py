"""Logs outlive pods: the launcher's attempt files on the home volume, read by the backend.

No container runs here, so each test writes a replica's attempt file the way its launcher would:
with the launcher's own `open_replica_log`, given the environment Kubernetes gives that pod (its
container's env from the API plus `JOB_COMPLETION_INDEX`).  The pod's log is what KWOK serves
through the real API server (`cluster.set_pod_status(..., log=...)`).  The two say different
things on purpose, so every assertion shows which of them the backend read.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kubernetes import client
from support.controlplane.kubelet import cri_log

from cluster.k8s_objects import meta, present
from cluster.test_k8s_backend import (
    WAIT,
    _async,
    _where,
    backend_for,
    eventually,
    master_running,
    obj,
    pod_of,
    replica,
    run,
    running,
    spec,
    workspace,
)
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.backends.kubernetes.logs import replica_logs
from paddle_nbext_server.errors import InvalidState
from paddle_nbext_server.runtime import launcher

if TYPE_CHECKING:
    from cluster.conftest import Cluster

pytestmark = pytest.mark.cluster

INDEX_KEY = "batch.kubernetes.io/job-completion-index"


def start_attempt(admin: client.ApiClient, namespace: str, pod: str, output: str) -> launcher.ReplicaLog:
    """What the launcher in `pod` does: open its attempt file from the pod's environment, then
    write the entry point's output to it."""
    body = client.CoreV1Api(admin).read_namespaced_pod(pod, namespace)
    env = {item.name: item.value for item in present(present(body.spec, "spec").containers[0].env, "env") if item.value is not None}
    env["JOB_COMPLETION_INDEX"] = present(meta(body).annotations, "annotations")[INDEX_KEY]  # Kubernetes sets it in Indexed Job pods
    log = launcher.open_replica_log(env)
    assert log is not None, f"the launcher of {pod} would write no file"
    log.write(output.encode())
    return log


def append_pod_log(cluster: Cluster, namespace: str, pod: str, text: str) -> None:
    """The container writes more: append to the file KWOK serves `pods/log` of `pod` from."""
    with open(cluster.plane.kwok_logs_dir() / namespace / f"{pod}-0.log", "a", encoding="utf-8") as handle:
        handle.write(cri_log(text))


def pod_gone(admin: client.ApiClient, namespace: str, pod: str) -> bool:
    try:
        client.CoreV1Api(admin).read_namespaced_pod(pod, namespace)
    except client.exceptions.ApiException as error:
        return bool(error.status == 404)
    return False


def threads_of(pool: replica_logs.StreamPool) -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith(f"{pool.name}_"))


def test_logs_come_from_the_api_while_the_pod_lives_and_from_the_file_once_it_is_gone(cluster: Cluster, tmp_path: Path) -> None:
    cluster.plane  # noqa: B018 - container logs are served by the suite's own KWOK
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("keep", pservers=1, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            pods = {role: pod_of(admin, namespace, "keep", role, 0) for role in ("pserver", "trainer")}
            for role, pod in pods.items():
                start_attempt(admin, namespace, pod, f"{role} 0 step 1 (file)\n{role} 0 step 2 (file)\n").close()
                cluster.set_pod_status(namespace, pod, "Running", log=f"{role} 0 step 1 (api)\n{role} 0 step 2 (api)\n")
            await eventually(lambda: _where(backend, "keep", lambda s: s.phase == "Running"), "Running")
            # the files are where the pods' HOME says, in the job's dir that delete removes
            assert sorted(p.name for p in (home / ".paddle-jobs" / "keep" / "logs").iterdir() if p.suffix == ".log") == [
                "pserver-0.attempt-0.log",
                "trainer-0.attempt-0.log",
            ]

            # (1) while the pod lives: the API's log
            assert await backend.read_logs("keep", "alice", "trainer", 0) == "trainer 0 step 1 (api)\ntrainer 0 step 2 (api)\n"
            assert await backend.read_logs("keep", "alice", "pserver", 0, tail=1) == "pserver 0 step 2 (api)\n"
            # A real kubelet whose container was just removed (the pod is being deleted) answers 200
            # with this sentence instead of the log: the file has what the replica said.
            cluster.set_pod_status(
                namespace, pods["pserver"], "Running", log="unable to retrieve container logs for containerd://0123abcd\n"
            )
            assert await backend.read_logs("keep", "alice", "pserver", 0) == "pserver 0 step 1 (file)\npserver 0 step 2 (file)\n"

            # The job succeeds; the pservers are stopped and their pods removed: the file remains.
            cluster.set_pod_status(namespace, pods["trainer"], "Succeeded", log="trainer 0 step 1 (api)\ntrainer 0 step 2 (api)\n")
            await eventually(lambda: _where(backend, "keep", lambda s: s.phase == "Succeeded"), "Succeeded")
            await eventually(
                lambda: _async(lambda: pod_gone(admin, namespace, pods["pserver"])),
                "the stopped pserver's pod to be removed",
            )

            async def pserver_log_from_file() -> bool:
                return await backend.read_logs("keep", "alice", "pserver", 0) == "pserver 0 step 1 (file)\npserver 0 step 2 (file)\n"

            await eventually(pserver_log_from_file, "the pserver's log from its file")

            # (2) an admin deletes the trainer's pod (KWOK ends and removes it): the file answers
            client.CoreV1Api(admin).delete_namespaced_pod(pods["trainer"], namespace)
            await eventually(lambda: _async(lambda: pod_gone(admin, namespace, pods["trainer"])), "the trainer pod to be removed")

            async def trainer_log_from_file() -> bool:
                return await backend.read_logs("keep", "alice", "trainer", 0) == "trainer 0 step 1 (file)\ntrainer 0 step 2 (file)\n"

            await eventually(trainer_log_from_file, "the trainer's log from its file")
            assert await backend.read_logs("keep", "alice", "trainer", 0, tail=1) == "trainer 0 step 2 (file)\n"
            # the failure tail the server quotes reads a pod by name: a removed pod's comes from its file
            assert await backend.read_pod_log(pods["trainer"], tail=1, previous=False) == "trainer 0 step 2 (file)\n"
            # following a replica whose pods are gone: the file, then the end (the job is over)
            async with contextlib.aclosing(backend.follow_logs("keep", "alice", "trainer", 0)) as stream:
                assert "".join([chunk async for chunk in stream]) == "trainer 0 step 1 (file)\ntrainer 0 step 2 (file)\n"
            with pytest.raises(InvalidState, match="no previous log for trainer 0"):
                await backend.read_logs("keep", "alice", "trainer", 0, previous=True)

            await backend.delete("keep", "alice")
            assert not (home / ".paddle-jobs" / "keep").exists()  # the logs go with the job, not before

    run(scenario())


def test_previous_is_the_earlier_attempts_file_after_a_retry(cluster: Cluster, tmp_path: Path) -> None:
    cluster.plane  # noqa: B018 - container logs are served by the suite's own KWOK
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            # max_restarts=1: the master restarts the whole job once, with a NEW pod
            await backend.submit(SubmitRequest(spec("retry", mode="collective", pservers=0, trainers=1, max_restarts=1), "alice", home))
            stack.enter_context(master_running(cluster, namespace, tmp_path, "retry"))
            cluster.await_job_pods(namespace)
            first = pod_of(admin, namespace, "retry", "trainer", 0)
            start_attempt(admin, namespace, first, "attempt 0 step 1\nValueError: attempt 0 broke\n").close()
            cluster.set_pod_status(namespace, first, "Failed", exit_code=3, log="attempt 0 (api)\n")
            await eventually(lambda: _async(lambda: pod_of(admin, namespace, "retry", "trainer", 0) != first), "a replacement pod")
            second = pod_of(admin, namespace, "retry", "trainer", 0)
            await eventually(lambda: _where(backend, "retry", lambda s: replica(s, "trainer", 0).restarts == 1), "restart count")
            # The restart count is in the record before the new pod is in the server's cache.
            await eventually(lambda: _async(lambda: second in backend.view.pods_by_job.get(obj("retry"), {})), "the new pod in the cache")

            # The replacement has not started: the attempt before it is attempt 0.
            assert await backend.read_logs("retry", "alice", "trainer", 0, previous=True) == (
                "attempt 0 step 1\nValueError: attempt 0 broke\n"
            )
            assert await backend.read_logs("retry", "alice", "trainer", 0, previous=True, tail=1) == ("ValueError: attempt 0 broke\n")

            start_attempt(admin, namespace, second, "attempt 1 step 1 (file)\n").close()
            cluster.set_pod_status(namespace, second, "Running", log="attempt 1 step 1 (api)\n")
            await eventually(lambda: _where(backend, "retry", lambda s: replica(s, "trainer", 0).phase == "Running"), "Running again")
            assert sorted(p.name for p in (home / ".paddle-jobs" / "retry" / "logs").iterdir() if p.suffix == ".log") == [
                "trainer-0.attempt-0.log",
                "trainer-0.attempt-1.log",
            ]
            # (3) previous: attempt 0's file, not the API's 400 (its `previous` is of the same pod)
            assert await backend.read_logs("retry", "alice", "trainer", 0, previous=True) == (
                "attempt 0 step 1\nValueError: attempt 0 broke\n"
            )
            assert await backend.read_logs("retry", "alice", "trainer", 0) == "attempt 1 step 1 (api)\n"
            # a pod by name: each attempt's own file when the API cannot answer for it
            assert await backend.read_pod_log(second, tail=None, previous=True) == "attempt 0 step 1\nValueError: attempt 0 broke\n"

    with contextlib.ExitStack() as stack:
        run(scenario())


def test_follow_outlasts_a_quiet_replica_with_a_bounded_number_of_threads(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.plane  # noqa: B018 - container logs are served by the suite's own KWOK
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)
    pool = replica_logs.StreamPool(1, name="paddle-nbext-log-follow-test")  # one API stream at a time: the limit shows
    monkeypatch.setattr(replica_logs, "API_STREAMS", pool)
    # The request's read timeout covers the response's head only: at one second, a stream that
    # kept it would end during the silence below.
    monkeypatch.setattr(replica_logs, "FOLLOW_TIMEOUT", (30.0, 1.0))

    async def scenario() -> None:
        backend = backend_for(kubeconfig, namespace, home)
        await backend.start()
        try:
            await backend.submit(SubmitRequest(spec("quiet", pservers=1, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            pods = {role: pod_of(admin, namespace, "quiet", role, 0) for role in ("pserver", "trainer")}
            files: dict[str, launcher.ReplicaLog] = {}
            for role, pod in pods.items():
                files[role] = start_attempt(admin, namespace, pod, f"{role} up (file)\n")
                cluster.set_pod_status(namespace, pod, "Running", log=f"{role} up (api)\n")
            await eventually(lambda: _where(backend, "quiet", lambda s: s.phase == "Running"), "Running")

            # (4) a pserver that says nothing for a while: the stream neither ends nor fails
            pserver = backend.follow_logs("quiet", "alice", "pserver", 0)
            assert await anext(pserver) == "pserver up (api)\n"
            waiting = asyncio.ensure_future(anext(pserver))
            await asyncio.sleep(3)  # silence on the kubelet's stream
            assert not waiting.done(), waiting  # neither ended (StopAsyncIteration) nor failed
            append_pod_log(cluster, namespace, pods["pserver"], "pserver still here (api)\n")
            assert await asyncio.wait_for(waiting, WAIT) == "pserver still here (api)\n"

            # The one API stream is taken: a second follow reads the trainer's file instead.
            trainer = backend.follow_logs("quiet", "alice", "trainer", 0)
            assert await anext(trainer) == "trainer up (file)\n"
            files["trainer"].write(b"trainer step 2 (file)\n")
            assert await asyncio.wait_for(anext(trainer), WAIT) == "trainer step 2 (file)\n"
            assert threads_of(pool) <= pool.size
            await trainer.aclose()

            # A follower that goes away while its stream is quiet (a read is waiting) frees its
            # thread: the next follow gets the API stream again.
            waiting = asyncio.ensure_future(anext(pserver))
            await asyncio.sleep(0.5)
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
            await pserver.aclose()
            await eventually(lambda: _async(lambda: pool.open == 0), "the stream's thread to be free")
            async with contextlib.aclosing(backend.follow_logs("quiet", "alice", "trainer", 0)) as again:
                assert await asyncio.wait_for(anext(again), WAIT) == "trainer up (api)\n"
            assert threads_of(pool) <= pool.size
        finally:
            for log in files.values():
                log.close()
            await backend.stop()

    run(scenario())


@contextlib.contextmanager
def kubelets_down(cluster: Cluster) -> Iterator[None]:
    """Every node's kubelet (KWOK) stopped inside the block and started again after: the pod's node
    is lost for a moment, so a log stream through it breaks while the pod goes on.  The suite has
    no public fault for this; unlike `api_down` it leaves the controllers' watches alone."""
    plane = cluster.plane
    plane.processes.pop("kwok").stop()
    try:
        yield
    finally:
        plane._start_kwok()
        plane._await_cluster()
        plane._save_state()


def test_a_follow_whose_api_stream_breaks_goes_on_in_the_pods_file(cluster: Cluster, tmp_path: Path) -> None:
    cluster.plane  # noqa: B018 - the suite's own KWOK is stopped
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("steady", mode="collective", pservers=0, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            pod = pod_of(admin, namespace, "steady", "trainer", 0)
            log = start_attempt(admin, namespace, pod, "step 1\n")  # as in life, the file has what the pod's log has
            cluster.set_pod_status(namespace, pod, "Running", log="step 1\n")
            await eventually(lambda: _where(backend, "steady", lambda s: s.phase == "Running"), "Running")
            async with contextlib.aclosing(backend.follow_logs("steady", "alice", "trainer", 0)) as stream:
                assert await anext(stream) == "step 1\n"
                waiting = asyncio.ensure_future(anext(stream))
                with kubelets_down(cluster):  # the stream breaks; the replica runs on
                    log.write(b"step 2\n")
                    # from where the stream stopped: nothing twice, nothing lost
                    assert await asyncio.wait_for(waiting, WAIT) == "step 2\n"
            log.close()

    run(scenario())


def test_a_replica_whose_pods_are_gone_and_left_no_file_says_so(cluster: Cluster, tmp_path: Path) -> None:
    namespace, kubeconfig, admin, home = workspace(cluster, tmp_path)

    async def scenario() -> None:
        async with running(kubeconfig, namespace, home) as backend:
            await backend.submit(SubmitRequest(spec("nofile", mode="collective", pservers=0, trainers=1), "alice", home))
            cluster.await_job_pods(namespace)
            pod = pod_of(admin, namespace, "nofile", "trainer", 0)
            cluster.set_pod_status(namespace, pod, "Succeeded")
            await eventually(lambda: _where(backend, "nofile", lambda s: s.phase == "Succeeded"), "Succeeded")
            client.CoreV1Api(admin).delete_namespaced_pod(pod, namespace)
            await eventually(lambda: _async(lambda: pod_gone(admin, namespace, pod)), "the pod to be removed")

            async def says_why() -> bool:
                try:
                    await backend.read_logs("nofile", "alice", "trainer", 0)
                except InvalidState as error:
                    assert f"no log file in {home / '.paddle-jobs' / 'nofile' / 'logs'}" in error.message, error.message
                    return True
                return False

            await eventually(says_why, "the reason there is no log")

    run(scenario())
