"""The Kubernetes backend's timeline end to end over a synthetic watch cache and a tmp home: the
reconcile pass writes `timeline.jsonl` in the job's logs dir, `timeline()` answers like the local
backend, other users' jobs are refused, a server restart adds no duplicate, and a launcher's
standing health warning is in the job's message."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.k8s_timeline_objects import JOB, KEY, OWNER, event, pod, record

from paddle_nbext_server.backends.kubernetes import KubernetesBackend
from paddle_nbext_server.backends.kubernetes.client.cache import KINDS
from paddle_nbext_server.errors import JobNotFound
from paddle_nbext_server.events import EventHub
from paddle_nbext_server.feeds.health import HealthTicker
from paddle_nbext_server.jobfiles import timeline

LOGS = Path(".paddle-jobs") / JOB / "logs"


class FakeCache:
    """What the reconcile pass reads of a `WatchCache`: its stores, synced and connected."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.stores: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in KINDS}
        for kind, items in objects.items():
            for item in items:
                self.stores[kind][item["metadata"]["name"]] = item
        self.synced = self.connected = True
        self.error: str | None = None
        self.denials: list[Any] = []
        self.namespace = "jobs"

    async def wait_synced(self, timeout: float) -> bool:
        return True

    def stop(self) -> None:
        pass


def objects(with_event: bool = True) -> dict[str, list[dict[str, Any]]]:
    trainer0 = pod("trainer", 0, uid="pod-00001", node="node-a", started="2026-12-05T14:00:09Z")
    trainer1 = pod("trainer", 1, uid="pod-00002", node="node-b", started="2026-12-05T14:00:10Z")
    found: dict[str, list[dict[str, Any]]] = {"configmaps": [record()], "pods": [trainer0, trainer1]}
    if with_event:
        found["pod_events"] = [event("FailedMount", trainer1, "timed out waiting for the condition", first="2026-12-05T14:00:06Z")]
    return found


def backend_over(home: Path, cache: FakeCache) -> KubernetesBackend:
    backend = KubernetesBackend(events=EventHub(), home_path=str(home))
    backend.view.cache = cache  # type: ignore[assignment]
    for kind, store in cache.stores.items():
        for item in store.values():
            backend.reconciler.on_change(kind, "ADDED", item)
    return backend


async def until(check: Any, what: str) -> Any:
    """The first truthy `check()`, waiting on the loop (bounded; says what it waited for)."""
    for _ in range(2000):
        value = check()
        if value:
            return value
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def written(home: Path) -> list[timeline.Entry]:
    return timeline.read(home / LOGS)


def test_the_server_writes_the_timeline_and_answers_it_like_the_local_backend(tmp_path: Path) -> None:
    (tmp_path / LOGS).parent.mkdir(parents=True)

    async def scenario() -> None:
        backend = backend_over(tmp_path, FakeCache(objects()))
        await until(lambda: len(written(tmp_path)) >= 6, "submitted, two scheduled, two started and the FailedMount written")
        answer = await backend.timeline(JOB, OWNER)
        assert set(answer) == {"name", "available", "reason", "entries", "last"}
        assert (answer["name"], answer["available"], answer["reason"]) == (JOB, True, None)
        texts = [entry["text"] for entry in answer["entries"]]
        assert texts[0] == "Submitted."
        assert "trainer 1 scheduled on node node-b." in texts
        assert "trainer 1 cannot mount its volumes: timed out waiting for the condition." in texts
        times = [entry["t"] for entry in answer["entries"]]
        assert times == sorted(times)
        assert answer["last"] == max(entry["seq"] for entry in answer["entries"])
        assert (await backend.timeline(JOB, OWNER, since=answer["last"]))["entries"] == []
        assert all(set(entry) <= {"seq", "t", "kind", "text", "role", "index"} for entry in answer["entries"])
        with pytest.raises(JobNotFound):
            await backend.timeline(JOB, "mallory")
        with pytest.raises(JobNotFound):
            await backend.timeline("someone-elses", OWNER)

    asyncio.run(scenario())


def test_a_server_restart_derives_the_same_entries_again_and_writes_none_twice(tmp_path: Path) -> None:
    (tmp_path / LOGS).parent.mkdir(parents=True)

    async def first_server() -> int:
        backend = backend_over(tmp_path, FakeCache(objects(with_event=False)))
        await until(lambda: len(written(tmp_path)) >= 5, "the first server's entries")
        await until(lambda: not backend.reconciler.timelines._jobs[KEY].running, "the pass to end")
        return len(written(tmp_path))

    before = asyncio.run(first_server())
    # Meanwhile (no server): the kubelet said FailedMount, and trainer 0 finished.
    later = objects()
    later["pods"][0] = pod(
        "trainer",
        0,
        uid="pod-00001",
        phase="Succeeded",
        terminated={"exitCode": 0, "startedAt": "2026-12-05T14:00:09Z", "finishedAt": "2026-12-05T14:30:00Z"},
    )

    async def second_server() -> None:
        backend = backend_over(tmp_path, FakeCache(later))
        await until(lambda: len(written(tmp_path)) >= before + 2, "the second server's new entries")
        for _ in range(3):  # more passes over the same objects add nothing
            backend.reconciler.flush_now(KEY)
            await until(lambda: not backend.reconciler.timelines._jobs[KEY].running, "the pass to end")

    asyncio.run(second_server())
    entries = written(tmp_path)
    keys = [entry.key for entry in entries]
    assert len(keys) == len(set(keys)) == before + 2, keys
    assert [entry.seq for entry in entries] == list(range(1, len(entries) + 1))
    late = [entry for entry in entries if entry.kind == "replica_ended"]
    assert [(entry.text, entry.t) for entry in late] == [("trainer 0 finished.", "2026-12-05T14:30:00.000Z")]


def test_a_standing_health_warning_of_this_attempt_is_in_the_message_stall_first(tmp_path: Path) -> None:
    logs = tmp_path / LOGS
    logs.mkdir(parents=True)
    lines = [
        {
            "t": "2026-12-05T14:05:00Z",
            "kind": "warning",
            "text": "Memory: trainer 0 uses 1.8 GiB of its 2 GiB limit",
            "role": "trainer",
            "index": 0,
            "attempt": 0,
        },
        {
            "t": "2026-12-05T14:20:00Z",
            "kind": "warning",
            "text": "Stalled: no progress for 10 min since step 1234",
            "role": "trainer",
            "index": 1,
            "attempt": 0,
        },
    ]
    (logs / "trainer-0.health.jsonl").write_text(json.dumps(lines[0]) + "\n")
    (logs / "trainer-1.health.jsonl").write_text(json.dumps(lines[1]) + "\n")

    async def scenario() -> None:
        hub = EventHub()
        backend = backend_over(tmp_path, FakeCache(objects(with_event=False)))
        backend.events = hub
        status = await until(
            lambda: (s := backend.view.statuses.get(KEY)) is not None and "stalled" in s.message and s, "the warning in the message"
        )
        assert status.message == (
            "Training is stalled: no progress for 10 min since step 1234. Training is running. "
            "Warning: trainer 0 uses 1.8 GiB of its 2 GiB limit."
        )
        kinds = [(entry.kind, entry.role, entry.index) for entry in written(tmp_path) if entry.kind == "warning"]
        assert sorted(kinds) == [("warning", "trainer", 0), ("warning", "trainer", 1)]

        # The health ticker's `timeline` events work unchanged on this backend's answers.
        async def no_usage(name: str, owner: str) -> dict[str, Any]:
            return {"name": name, "available": False}

        backend.usage = no_usage  # type: ignore[method-assign]
        ticker = HealthTicker(hub, backend)
        await ticker.announce(OWNER, JOB)  # the first look learns where the list is
        assert ticker._seq[(OWNER, JOB)] == max(entry.seq for entry in written(tmp_path))
        recovered = {**lines[1], "t": "2026-12-05T14:25:00Z", "kind": "recovered", "text": "Progress again after 15 min"}
        with open(logs / "trainer-1.health.jsonl", "a") as handle:
            handle.write(json.dumps(recovered) + "\n")
        async with hub.subscribe(OWNER) as queue:
            backend.reconciler.offer_timeline(KEY, backend.view.store("configmaps")[KEY], backend.view.statuses[KEY], home=True)
            await until(lambda: written(tmp_path)[-1].kind == "recovered", "the recovery written")
            await ticker.announce(OWNER, JOB)
            published = [queue.get_nowait() for _ in range(queue.qsize())]
        said = [e.job or {} for e in published if e.kind == "timeline"]
        assert [[entry["text"] for entry in data["entries"]] for data in said] == [["Progress again after 15 min."]]
        await until(lambda: "stalled" not in backend.view.statuses[KEY].message, "the stall gone from the message")

    asyncio.run(scenario())


def test_a_warning_of_an_earlier_attempt_or_one_recovered_is_not_in_the_message(tmp_path: Path) -> None:
    logs = tmp_path / LOGS
    logs.mkdir(parents=True)
    old = {
        "t": "2026-12-05T14:05:00Z",
        "kind": "warning",
        "text": "Stalled: no progress for 10 min",
        "role": "trainer",
        "index": 1,
        "attempt": 7,
    }
    over = [
        {"t": "2026-12-05T14:05:00Z", "kind": "warning", "text": "Memory: high", "role": "trainer", "index": 0, "attempt": 0},
        {"t": "2026-12-05T14:06:00Z", "kind": "recovered", "text": "Memory: back under", "role": "trainer", "index": 0, "attempt": 0},
    ]
    (logs / "trainer-1.health.jsonl").write_text(json.dumps(old) + "\n")
    (logs / "trainer-0.health.jsonl").write_text("".join(json.dumps(line) + "\n" for line in over))

    async def scenario() -> None:
        backend = backend_over(tmp_path, FakeCache(objects(with_event=False)))
        await until(lambda: len([e for e in written(tmp_path) if e.kind in ("warning", "recovered")]) == 3, "the health entries")
        backend.reconciler.flush_now(KEY)
        assert backend.view.statuses[KEY].message == "Training is running."

    asyncio.run(scenario())


def test_without_the_jobs_folder_the_answer_says_why_and_nothing_is_created(tmp_path: Path) -> None:
    async def scenario() -> None:
        backend = backend_over(tmp_path, FakeCache(objects()))
        await until(
            lambda: KEY in backend.reconciler.timelines._jobs and not backend.reconciler.timelines._jobs[KEY].running, "the first pass"
        )
        answer = await backend.timeline(JOB, OWNER)
        assert answer["available"] is False
        assert "not in the home yet" in answer["reason"]
        assert not (tmp_path / ".paddle-jobs").exists()

    asyncio.run(scenario())


def test_a_deleted_jobs_timeline_is_never_written_again(tmp_path: Path) -> None:
    """Delete removes the job's folder after `close`: a pass of the job that comes later (an
    offer made before the record went, a pass in flight) writes nothing, not even `logs/`."""
    (tmp_path / LOGS).parent.mkdir(parents=True)

    async def scenario() -> None:
        backend = backend_over(tmp_path, FakeCache(objects()))
        keeper = backend.reconciler.timelines
        await until(lambda: written(tmp_path), "the first entries")
        state = keeper._jobs[KEY]
        await until(lambda: not state.running, "the pass to end")
        backend.view.store("configmaps").clear()
        backend.reconciler.flush_now(KEY)  # the record is gone: forgotten
        await asyncio.to_thread(keeper.close, KEY)
        shutil.rmtree(tmp_path / ".paddle-jobs" / JOB)
        (tmp_path / ".paddle-jobs" / JOB).mkdir()  # even with the folder back (a resubmit's snapshot)
        keeper._pass(state, list(state.objects), True)
        assert not (tmp_path / LOGS).exists()

    asyncio.run(scenario())
