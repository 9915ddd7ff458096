"""Housekeeping of jobs' Python environments through the REST API (issue 25, item 5): a real
Jupyter server with the local backend, environments made on disk the way the launcher leaves
them (`env.json`, `last-used` whose mtime is the last use, the installed files), and a real
running job whose `logs/environment.json` names the environment it uses."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from support.fake_envs import DAY, make_env, use_env

from paddle_nbext_server.backends.local.store import JobStore

from .conftest import Api
from .test_api import assert_error, wait_for

RECENT, OLD, OTHER = "0123456789abcdef", "fedcba9876543210", "00000000000000aa"


@contextmanager
def held_lock(envs: Path, key: str) -> Iterator[None]:
    """Hold the environment's build lock as a building launcher does."""
    (envs / ".locks").mkdir(exist_ok=True)
    fd = os.open(envs / ".locks" / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def seconds_ago(text: str) -> float:
    return time.time() - datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp()


@pytest.fixture
def envs(jp_home_dir: Path) -> Path:
    path = jp_home_dir / ".paddle-jobs" / "envs"
    path.mkdir(parents=True)
    return path


@asynccontextmanager
async def running_job(api: Api, home: Path) -> AsyncIterator[Callable[[str], None]]:
    """A real running job of alice's; `use(key)` makes its logs say it uses that environment."""
    body = {"job_name": "env-user", "entry_point": "python sleep.py 120", "trainer_package": "work"}
    status, job = await api("POST", "jobs", body=body)
    assert status == 201, job
    try:
        await wait_for(api, "env-user", {"Running"})
        logs = JobStore(home / ".paddle-jobs").job_dir("env-user", "alice") / "logs"

        yield lambda key: use_env(logs, "env-user", key)
    finally:
        await api("DELETE", "jobs/env-user")


async def test_the_list_shows_each_environment_its_size_last_use_and_the_running_job_using_it(
    api: Api, envs: Path, package: Path, jp_home_dir: Path
) -> None:
    recent = make_env(envs, RECENT, days_ago=2, payload=5000, built_by="env-user")
    old = make_env(envs, OLD, days_ago=40, payload=300)
    (envs / ".cache" / "uv").mkdir(parents=True)
    (envs / ".cache" / "uv" / "wheel.whl").write_bytes(b"w" * 7000)
    (envs / ".locks").mkdir()
    (envs / ".locks" / f"{RECENT}.lock").touch()
    (envs / f".{OTHER}.building-x1y2").mkdir()  # a build in progress is not an environment
    async with running_job(api, jp_home_dir) as use:
        use(RECENT)
        status, body = await api("GET", "environments")
        bobs = (await api("GET", "environments", user="bob"))[1]["environments"]
    assert status == 200, body
    assert [env["key"] for env in body["environments"]] == [RECENT, OLD]  # most recently used first
    first, second = body["environments"]
    assert first["size"] == recent and second["size"] == old
    assert first["in_use_by"] == ["env-user"] and second["in_use_by"] == []
    assert first["packages"] == ["tinypkg==1.0"] and first["requirements"] == ["tinypkg==1.0"]
    assert first["installer"] == "uv" and first["python"] == "3.11.9"
    assert first["built_by"] == "env-user" and second["built_by"] is None  # "builder" is no job of alice's
    assert 2 * DAY - 5 < seconds_ago(first["last_used"]) < 2 * DAY + 5, first
    assert 40 * DAY - 5 < seconds_ago(second["last_used"]) < 40 * DAY + 5, second
    assert first["built"].endswith("Z") and seconds_ago(first["built"]) > 2 * DAY
    assert (body["count"], body["bytes"], body["cache_bytes"]) == (2, recent + old, 7000)
    assert body["path"] == str(envs)

    # Bob's jobs use none of them, and alice's job names are not shown to him.
    assert [(env["in_use_by"], env["built_by"]) for env in bobs] == [([], None), ([], None)]


async def test_no_environments_is_an_empty_list(api: Api) -> None:
    status, body = await api("GET", "environments")
    assert status == 200, body
    assert (body["environments"], body["count"], body["bytes"], body["cache_bytes"]) == ([], 0, 0, 0)


async def test_prune_removes_what_is_unused_keeps_what_a_running_job_uses_and_says_what_it_freed(
    api: Api, envs: Path, package: Path, jp_home_dir: Path
) -> None:
    make_env(envs, RECENT, days_ago=1, payload=100)
    old = make_env(envs, OLD, days_ago=40, payload=3000)
    other = make_env(envs, OTHER, days_ago=45, payload=200)
    async with running_job(api, jp_home_dir) as use:
        use(OTHER)
        crashed = envs / f".{RECENT}.building-abcd"
        (crashed / "lib").mkdir(parents=True)
        (crashed / "lib" / "half.py").write_bytes(b"h" * 400)
        os.utime(crashed, (time.time() - 2 * DAY, time.time() - 2 * DAY))
        fresh = envs / f".{OLD}.building-efgh"  # a build that started a minute ago
        fresh.mkdir()
        locks = envs / ".locks"
        locks.mkdir()
        (locks / f"{RECENT}.failed.json").write_text(json.dumps({"job": "gone-job", "reason": "No solution found"}))
        (locks / f"{OTHER}.failed.json").write_text(json.dumps({"job": "env-user", "reason": "No solution found"}))

        # A dry run says what would go and removes nothing.
        status, dry = await api("POST", "environments/prune", body={"dry_run": True})
        assert status == 200, dry
        assert dry["dry_run"] is True and dry["unused_days"] == 30
        assert [env["key"] for env in dry["removed"]] == [OLD] and dry["removed"][0]["size"] == old
        assert dry["kept"] == [{"key": OTHER, "reason": "in use by running job env-user"}]
        assert dry["leftovers"] == [{"name": crashed.name, "size": 400}]
        assert dry["failures"] == [RECENT] and dry["cache"] is None
        assert dry["freed"] == old + 400
        assert (envs / OLD / "env.json").is_file() and crashed.is_dir() and (locks / f"{RECENT}.failed.json").is_file()

        status, done = await api("POST", "environments/prune", body={})
        assert status == 200, done
        assert {key: done[key] for key in ("removed", "kept", "leftovers", "failures", "freed")} == {
            key: dry[key] for key in ("removed", "kept", "leftovers", "failures", "freed")
        }
        assert sorted(path.name for path in envs.iterdir()) == sorted([".locks", fresh.name, OTHER, RECENT])
        assert [path.name for path in locks.glob("*.failed.json")] == [f"{OTHER}.failed.json"]  # the running job's stays

        # unused_days 0: everything no running job uses.
        status, all_unused = await api("POST", "environments/prune", body={"unused_days": 0})
        assert status == 200, all_unused
        assert [env["key"] for env in all_unused["removed"]] == [RECENT]
        assert [env["key"] for env in all_unused["kept"]] == [OTHER]
        assert sorted(path.name for path in envs.iterdir()) == sorted([".locks", fresh.name, OTHER])
        listed = (await api("GET", "environments"))[1]
        assert [env["key"] for env in listed["environments"]] == [OTHER] and listed["bytes"] == other


async def test_prune_empties_the_download_cache_only_when_asked_and_no_build_runs(api: Api, envs: Path) -> None:
    cache = envs / ".cache" / "pip" / "http"
    cache.mkdir(parents=True)
    (cache / "blob").write_bytes(b"c" * 9000)
    untouched = (await api("POST", "environments/prune", body={"unused_days": 0}))[1]
    assert untouched["cache"] is None and untouched["freed"] == 0 and (cache / "blob").is_file()

    with held_lock(envs, RECENT):
        busy = (await api("POST", "environments/prune", body={"cache": True}))[1]
    assert busy["cache"] == {"size": 0, "emptied": False, "reason": "a job is building an environment now; prune the cache later"}
    assert (cache / "blob").is_file()

    status, emptied = await api("POST", "environments/prune", body={"cache": True})
    assert status == 200, emptied
    assert emptied["cache"] == {"size": 9000, "emptied": True, "reason": None} and emptied["freed"] == 9000
    assert sorted(path.name for path in envs.iterdir()) == sorted([".locks"])
    assert (await api("GET", "environments"))[1]["cache_bytes"] == 0


async def test_an_environment_being_built_or_removed_is_left_alone(api: Api, envs: Path) -> None:
    make_env(envs, OLD, days_ago=90, payload=10)
    with held_lock(envs, OLD):
        pruned = (await api("POST", "environments/prune", body={"unused_days": 0}))[1]
        refused = assert_error(await api("DELETE", f"environments/{OLD}"), 409, "conflict", "key")
    assert pruned["removed"] == [] and pruned["kept"] == [{"key": OLD, "reason": "being built or used right now"}]
    assert "being built or used right now" in refused["message"], refused
    assert (envs / OLD / "env.json").is_file()


async def test_delete_removes_one_environment_refusing_bad_unknown_and_in_use_keys(
    api: Api, envs: Path, package: Path, jp_home_dir: Path
) -> None:
    size = make_env(envs, OLD, days_ago=1, payload=1234)
    make_env(envs, RECENT, days_ago=1, payload=10)
    async with running_job(api, jp_home_dir) as use:
        use(RECENT)

        bad = assert_error(await api("DELETE", "environments/not-a-key"), 400, "bad_request", "key")
        assert "16 hexadecimal digits" in bad["message"], bad
        assert_error(await api("DELETE", "environments/0123456789ABCDEF"), 400, "bad_request", "key")
        missing = assert_error(await api("DELETE", f"environments/{OTHER}"), 404, "not_found", "key")
        assert OTHER in missing["message"], missing
        in_use = assert_error(await api("DELETE", f"environments/{RECENT}"), 409, "conflict", "key")
        assert "in use by running job env-user" in in_use["message"], in_use

        status, body = await api("DELETE", f"environments/{OLD}")
        assert (status, body) == (200, {"key": OLD, "size": size})
        assert sorted(path.name for path in envs.iterdir()) == sorted([".locks", RECENT])  # no hidden leftovers
        assert_error(await api("DELETE", f"environments/{OLD}"), 404, "not_found", "key")


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"unused_days": -1}, "unused_days", "from 0 to 36500"),
        ({"unused_days": "30"}, "unused_days", "whole number of days"),
        ({"unused_days": 2.5}, "unused_days", "whole number of days"),
        ({"unused_days": True}, "unused_days", "whole number of days"),
        ({"dry_run": "yes"}, "dry_run", "true or false"),
        ({"cache": 1}, "cache", "true or false"),
        ({"unused": 3}, "unused", "unknown field 'unused'"),
    ],
)
async def test_prune_refuses_bad_options_naming_the_field(api: Api, envs: Path, body: dict[str, Any], field: str, words: str) -> None:
    make_env(envs, OLD, days_ago=90, payload=10)
    refused = assert_error(await api("POST", "environments/prune", body=body), 422, "invalid", field)
    assert words in refused["message"], refused
    assert (envs / OLD / "env.json").is_file()  # nothing was pruned


async def test_prune_with_a_malformed_body_is_400(api: Api) -> None:
    assert_error(await api("POST", "environments/prune", raw=b"{nope"), 400, "bad_request")
    assert_error(await api("POST", "environments/prune", raw=b"[1]"), 400, "bad_request")


@pytest.mark.parametrize("token", [None, "wrong-token"])
async def test_environment_routes_need_credentials(api: Api, envs: Path, token: str | None) -> None:
    make_env(envs, OLD, days_ago=90, payload=10)
    for method, path in (("GET", "environments"), ("POST", "environments/prune"), ("DELETE", f"environments/{OLD}")):
        assert_error(await api(method, path, token=token, body={"unused_days": 0} if method == "POST" else None), 403, "forbidden", None)
    assert (envs / OLD / "env.json").is_file()
