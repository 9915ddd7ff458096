"""Checkpoints on the real node (issue 26): a collective job that saves every 20 steps into its
checkpoint directory on the home volume is evicted after a checkpoint, restarts whole, every
replica resumes at the checkpoint's step + 1 (the replicas find it themselves: the pod's attempt
label tells them which checkpoints an earlier attempt published), and the job ends Succeeded with
one continuous curve per trainer; Resume of the cancelled job then starts a new job from its
latest checkpoint.

Written with the local backend's test (tests/paddle_jobs/test_local_checkpoints.py) as its model; it
needs the real node (root, the suite's control plane), like the other test_real_node_* modules.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from kubernetes import client

from cluster.k8s_objects import name_of
from cluster.test_real_node_jobs import Notebook, describe, notebook  # noqa: F401 - the module's fixture

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1200)]

STEPS = 300
NAME = "ckpt-evict"


def latest_step(book: Notebook, name: str) -> int | None:
    answer = book.server.api("GET", f"jobs/{name}/checkpoints")
    assert answer.status_code == 200, f"GET jobs/{name}/checkpoints: {answer.status_code} {answer.text}"
    latest = answer.json()["latest"]
    return None if latest is None else int(latest["step"])


def test_an_evicted_collective_job_resumes_from_its_checkpoint_with_one_curve(notebook: Notebook) -> None:  # noqa: F811
    entry = f"python collective_train.py --steps {STEPS} --step-delay 0.1 --checkpoint-every 20 --print-every 10"
    notebook.submit(NAME, mode="collective", trainers=2, entry_point=entry, keep_checkpoints=2)
    try:
        seen: dict[str, int] = {}

        def saved_forty(status: dict[str, Any]) -> bool:
            step = latest_step(notebook, NAME)
            seen["step"] = step or 0
            return step is not None and step >= 40

        notebook.wait(NAME, saved_forty, "the checkpoint of step 40")
        pod = next(p for p in notebook.job_pods(NAME) if "trainer" in name_of(p) and name_of(p).split("-")[-2] == "1")
        client.CoreV1Api(notebook.admin).create_namespaced_pod_eviction(
            name_of(pod),
            notebook.namespace,
            client.V1Eviction.model_validate(
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name_of(pod), "namespace": notebook.namespace}}
            ),
        )
        notebook.wait(NAME, lambda s: s.get("message", "").startswith("restart 1: trainer 1 was evicted"), "the whole restart", timeout=120)
        # Every rank of the new attempt loaded the same checkpoint: the latest one when it started.
        first = notebook.wait_log(NAME, r"trainer 0 resumed from step \d+", index=0)
        resumed = re.search(r"trainer 0 resumed from step (\d+)", first)
        assert resumed is not None, first[-2000:]  # wait_log returned once the line was there
        step = int(resumed.group(1))
        assert step >= seen["step"] and step % 20 == 0, (step, seen)
        notebook.wait_log(NAME, rf"trainer 1 resumed from step {step}\b", index=1)
        # The job says where it resumed from, as on the local backend: the server reads the
        # checkpoints in the home (the in-cluster master cannot), and an eviction uses up no
        # max_restarts, so the restart is not counted "of N".
        note = rf"\(restart 1 \(trainer 1 was evicted[^()]*\); resumed from step {step}\)\."
        said = notebook.wait(NAME, lambda s: re.search(note, s.get("message", "")) is not None, "the job saying where it resumed from")
        assert re.fullmatch(rf"(Training is running|1/2 trainers finished|All 2 trainers finished successfully) {note}", said["message"]), (
            describe(said)
        )
        ended = notebook.ended(NAME)
        assert ended["phase"] == "Succeeded", describe(ended)
        assert re.fullmatch(rf"All 2 trainers finished successfully {note}", ended["message"]), describe(ended)
        metrics = notebook.server.api("GET", f"jobs/{NAME}/metrics").json()
        for replica in metrics["replicas"]:
            steps = replica["series"]["loss"]["step"]
            if replica["index"] == 0:  # the saving rank flushes its points with every checkpoint
                assert steps == list(range(1, STEPS + 1)), steps
            assert steps == sorted(set(steps)) and steps[-(STEPS - step) :] == list(range(step + 1, STEPS + 1)), steps
            assert [mark["step"] for mark in replica["restarts"]] == [step + 1], replica["restarts"]
        # Retention kept the newest 2, in the home, owned by the user.
        directory = notebook.home / ".paddle-jobs" / NAME / "checkpoints"
        kept = sorted(p.name for p in directory.iterdir() if p.name.startswith("step-"))
        assert kept == [f"step-{STEPS - 20:012d}", f"step-{STEPS:012d}"], kept
        assert all(p.stat().st_uid == notebook.cluster.node.uid for p in directory.iterdir())
    finally:
        notebook.server.api("POST", f"jobs/{NAME}/cancel")
        notebook.ended(NAME)


def test_a_cancelled_job_resumes_as_a_new_job_in_real_pods(notebook: Notebook) -> None:  # noqa: F811
    entry = "python collective_train.py --steps 100000 --step-delay 0.05 --checkpoint-every 20 --print-every 20"
    notebook.submit("ckpt-cancel", mode="collective", trainers=1, entry_point=entry)
    try:
        notebook.wait("ckpt-cancel", lambda s: (latest_step(notebook, "ckpt-cancel") or 0) >= 20, "a checkpoint")
        notebook.server.api("POST", "jobs/ckpt-cancel/cancel")
        notebook.ended("ckpt-cancel")
        step = latest_step(notebook, "ckpt-cancel")
        answer = notebook.server.api(
            "POST",
            "jobs/ckpt-cancel/resume",
            body={"job_name": "ckpt-cancel-2", "entry_point": entry.replace("100000", str((step or 0) + 40))},
        )
        assert answer.status_code == 201, answer.text
        assert answer.json()["resumed_from"] == {"job": "ckpt-cancel", "step": step}
        notebook.wait_log("ckpt-cancel-2", rf"trainer 0 resumed from step {step}\b")
        ended = notebook.ended("ckpt-cancel-2")
        assert ended["phase"] == "Succeeded", describe(ended)
        # It links to the job it resumed (the record's annotation), and says so as the local one does.
        assert ended["resumed_from"] == {"job": "ckpt-cancel", "step": step}, describe(ended)
        assert ended["message"] == f"All 1 trainer finished successfully (resumed from step {step} of job ckpt-cancel).", describe(ended)
        steps = notebook.server.api("GET", "jobs/ckpt-cancel-2/metrics").json()["replicas"][0]["series"]["loss"]["step"]
        assert steps == list(range((step or 0) + 1, (step or 0) + 41)), steps
    finally:
        for name in ("ckpt-cancel-2", "ckpt-cancel"):
            notebook.server.api("POST", f"jobs/{name}/cancel")
            notebook.delete(name)
