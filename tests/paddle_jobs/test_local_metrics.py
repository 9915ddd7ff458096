"""Real Paddle jobs that call `report()` (the examples do), through the local backend: every
replica's series arrives in order, survives a server restart (the backend recreated mid-run), is
downsampled keeping first/last/extremes; a replica that fills its budget or writes garbage into
its file breaks neither the job nor the reading."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from paddle_jobs.local_jobs import OWNER, backend_for, losses, make_home, request, wait_terminal, wait_until
from paddle_nbext_server.backends.local import LocalBackend

pytestmark = pytest.mark.paddle


async def read(backend: LocalBackend, name: str, **options: Any) -> dict[str, Any]:
    files = await backend.metrics_files(name, OWNER)
    return await asyncio.to_thread(backend.metrics.read, name, files, options.get("since"), options.get("points"))


def by_replica(body: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r["role"], r["index"]): r for r in body["replicas"]}


@pytest.fixture(scope="module")
def ps_metrics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A 1+2 PS job: points read while it runs by one backend, the rest by a recreated one."""
    home = make_home(tmp_path_factory.mktemp("ps-metrics"))
    spec: dict[str, Any] = {"pservers": 1, "trainers": 2, "pserver_cpu": "500m", "trainer_cpu": "500m"}

    async def scenario() -> dict[str, Any]:
        first = backend_for(home)
        await first.start()
        entry = "python ps_train.py --steps 120 --step-delay 0.02"
        await first.submit(request(home, job_name="ps-curve", entry_point=entry, **spec))

        async def some_points() -> dict[str, Any]:
            while True:
                body = await read(first, "ps-curve")
                if by_replica(body)[("trainer", 0)]["count"] > 0:
                    return body
                status = await first.get_job("ps-curve", OWNER)
                assert status.phase not in ("Failed", "Cancelled"), status.message
                await asyncio.sleep(0.2)

        early = await asyncio.wait_for(some_points(), timeout=240)
        await first.stop()
        second = backend_for(home)  # as after a Jupyter restart: nothing parsed in memory
        await second.start()
        try:
            status = await wait_terminal(second, "ps-curve")
            return {
                "status": status,
                "early": early,
                "full": await read(second, "ps-curve"),
                "small": await read(second, "ps-curve", points=20),
                "after_early": await read(second, "ps-curve", since=early["cursor"]),
                "logs": [await second.read_logs("ps-curve", OWNER, "trainer", i) for i in (0, 1)],
            }
        finally:
            await second.stop()

    return asyncio.run(scenario())


def test_ps_series_per_trainer_arrive_in_order_across_a_restart(ps_metrics: dict[str, Any]) -> None:
    assert ps_metrics["status"].phase == "Succeeded", ps_metrics["status"].message
    replicas = by_replica(ps_metrics["full"])
    assert set(replicas) == {("pserver", 0), ("trainer", 0), ("trainer", 1)}
    assert replicas[("pserver", 0)]["series"] == {}  # pservers report nothing
    for index in (0, 1):
        trainer = replicas[("trainer", index)]
        assert trainer["series"]["loss"]["step"] == list(range(1, 121))
        assert (trainer["step"], trainer["total"], trainer["invalid"]) == (120, 120, 0)
        # The reported loss is the one the log prints (every 20 steps, 6 decimals).
        printed = losses(ps_metrics["logs"][index])
        reported = trainer["series"]["loss"]["value"]
        assert [round(reported[step], 6) for step in range(0, 120, 20)] == pytest.approx(printed[:6], abs=1e-6)
        times = trainer["series"]["loss"]["time"]
        assert times == sorted(times)
    assert ps_metrics["full"]["progress"]["fraction"] == 1.0


def test_a_cursor_from_before_the_restart_gets_exactly_the_rest(ps_metrics: dict[str, Any]) -> None:
    early, rest = by_replica(ps_metrics["early"]), by_replica(ps_metrics["after_early"])
    for index in (0, 1):
        seen = early[("trainer", index)]["series"].get("loss", {"step": []})["step"]
        after = rest[("trainer", index)]["series"]["loss"]["step"]
        assert seen + after == list(range(1, 121))


def test_ps_downsampling_keeps_first_last_and_extremes(ps_metrics: dict[str, Any]) -> None:
    full, small = by_replica(ps_metrics["full"]), by_replica(ps_metrics["small"])
    for index in (0, 1):
        whole, kept = full[("trainer", index)]["series"]["loss"], small[("trainer", index)]["series"]["loss"]
        assert len(kept["step"]) <= 20
        assert (kept["step"][0], kept["step"][-1]) == (1, 120)
        assert min(kept["value"]) == min(whole["value"]) and max(kept["value"]) == max(whole["value"])


@pytest.fixture(scope="module")
def collective_metrics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """2 collective trainers; trainer 1 runs with a tiny budget, and both append garbage after training."""
    home = make_home(tmp_path_factory.mktemp("collective-metrics"))
    entry = (
        'if [ "$PADDLE_TRAINER_ID" = 1 ]; then export PADDLE_NBEXT_METRICS_BUDGET=2000; fi; '
        'python collective_train.py --steps 60 && printf \'garbage\\n\\000\\377\\n{"t": 1, "step": \' >> "$PADDLE_NBEXT_METRICS_FILE"'
    )

    async def scenario() -> dict[str, Any]:
        backend = backend_for(home)
        await backend.start()
        try:
            await backend.submit(request(home, job_name="coll-curve", entry_point=entry, mode="collective", trainers=2, trainer_cpu="500m"))
            await wait_until(backend, "coll-curve", lambda s: s.phase != "Pending")
            status = await wait_terminal(backend, "coll-curve")
            return {
                "status": status,
                "full": await read(backend, "coll-curve", points=500),
                "logs": [await backend.read_logs("coll-curve", OWNER, "trainer", i) for i in (0, 1)],
            }
        finally:
            await backend.stop()

    return asyncio.run(scenario())


def test_collective_series_garbage_and_a_full_budget(collective_metrics: dict[str, Any]) -> None:
    status = collective_metrics["status"]
    assert status.phase == "Succeeded", status.message
    replicas = by_replica(collective_metrics["full"])
    whole = replicas[("trainer", 0)]
    assert whole["series"]["loss"]["step"] == list(range(1, 61))
    assert whole["invalid"] == 2  # "garbage" and the binary line; the unfinished last line waits
    capped = replicas[("trainer", 1)]
    steps = capped["series"]["loss"]["step"]
    assert 0 < len(steps) < 60 and steps == list(range(1, len(steps) + 1))
    log = collective_metrics["logs"][1]
    assert log.count("reached its budget of 2000 bytes") == 1
    assert f"0 values refused, {60 - len(steps)} points not written" in log
    assert "trainer 1 done" in log  # training went on to the end
    assert collective_metrics["full"]["progress"]["step"] == len(steps)  # the slowest trainer it knows of
