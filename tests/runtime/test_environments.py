"""The environment step every replica's launcher runs before the user's code
(`runtime/environments.py`, issue 25): requirements files as pip reads them, the key, the index
settings and their credentials, the installers' own words, and building once across processes.
Real installers (uv and pip) against indexes of tiny wheels made here; no network."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
from support.wheels import SimpleIndex, make_wheel

from paddle_nbext_server.runtime import environments as env

BASE = {"numpy": ("numpy", "1.26.4"), "six": ("six", "1.17.0")}


@pytest.fixture(autouse=True)
def no_machine_pip_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


def package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# ---------------------------------------------------------------------------- requirements files


def test_requirements_are_read_as_pip_reads_them_with_includes_comments_and_continuations(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        {
            "requirements.txt": "# tools\ntinytok==1.0  # the tokenizer\n-r more/extra.txt\n--pre\nlong \\\n  >=2\n",
            "more/extra.txt": "tinyutil[fast]>=1 ; python_version >= '3.8'\n",
        },
    )
    found = env.read_requirements(str(root / "requirements.txt"), str(root))
    assert [(e.name, e.file, e.line) for e in found.entries] == [
        ("tinytok", "requirements.txt", 2),
        ("tinyutil", "more/extra.txt", 1),
        ("long", "requirements.txt", 5),
    ]
    assert found.count() == 3 and found.line_of("because tinyutil was not found").line == 1  # type: ignore[union-attr]


def test_the_digest_covers_included_files_and_local_wheels_the_lines_name(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "pkg" / "wheels", "mine", "0.1")
    root = package(tmp_path, {"requirements.txt": "-r base.txt\n./wheels/mine-0.1-py3-none-any.whl\n", "base.txt": "tinytok\n"})
    first = env.read_requirements(str(root / "requirements.txt"), str(root)).digest
    (root / "base.txt").write_text("tinytok==1.0\n")
    second = env.read_requirements(str(root / "requirements.txt"), str(root)).digest
    make_wheel(wheel.parent, "mine", "0.1", body="CHANGED = True\n")
    third = env.read_requirements(str(root / "requirements.txt"), str(root)).digest
    assert len({first, second, third}) == 3


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ({"requirements.txt": "-r ../outside.txt\n"}, "requirements.txt line 1: "),
        ({"requirements.txt": "-r missing.txt\n"}, "requirements.txt line 1: missing.txt does not exist in the package"),
        ({"requirements.txt": "x" * (env.MAX_REQUIREMENTS_BYTES + 1)}, "is larger than 256 KiB"),
    ],
)
def test_a_requirements_file_that_cannot_be_used_says_where(tmp_path: Path, files: dict[str, str], words: str) -> None:
    (tmp_path / "outside.txt").write_text("x\n")
    root = package(tmp_path, files)
    with pytest.raises(env.RequirementsError) as refused:
        env.read_requirements(str(root / "requirements.txt"), str(root))
    assert words in str(refused.value)


def test_lines_naming_paddle_are_found_whatever_the_variant_and_spelling(tmp_path: Path) -> None:
    root = package(tmp_path, {"requirements.txt": "paddle-nbext\nPaddlePaddle_GPU==2.6.2\npaddlepaddle\npaddleocr\n"})
    found = env.read_requirements(str(root / "requirements.txt"), str(root))
    assert [(e.line, e.text) for e in found.paddle_lines()] == [(2, "PaddlePaddle_GPU==2.6.2"), (3, "paddlepaddle")]


# ---------------------------------------------------------------------------- settings and key


def test_the_users_pip_conf_fills_what_the_site_leaves_open(tmp_path: Path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nindex-url = file:///srv/index-a/simple\nextra-index-url = file:///srv/index-b file:///srv/index-c\n[install]\ntrusted-host = index-b.invalid\n"
    )
    user = env.read_pip_conf({"PIP_CONFIG_FILE": str(conf)})
    assert user.index_url == "file:///srv/index-a/simple" and user.trusted_hosts == ("index-b.invalid",)
    site = env.IndexSettings(index_url="file:///srv/index-d/simple", extra_index_urls=("file:///srv/index-c",))
    merged = site.merged(user)
    assert merged.index_url == "file:///srv/index-d/simple"
    assert merged.extra_index_urls == ("file:///srv/index-c", "file:///srv/index-b")
    assert env.IndexSettings().merged(user).index_url == "file:///srv/index-a/simple"


def test_credentials_are_masked_and_both_installers_get_the_same_settings() -> None:
    settings = env.IndexSettings("https://bot:s3cret-token@127.0.0.5:3141/simple", trusted_hosts=("127.0.0.5:3141",), no_index=False)
    assert settings.masked()["index_url"] == "https://bot:***@127.0.0.5:3141/simple"
    assert settings.secrets() == ["s3cret-token"]
    assert env.mask_url("https://tokenonly1234@127.0.0.5:3141/x") == "https://***@127.0.0.5:3141/x"
    assert settings.args("uv")[-2:] == ["--allow-insecure-host", "127.0.0.5:3141"]
    assert settings.args("pip")[-2:] == ["--trusted-host", "127.0.0.5:3141"]


def test_the_key_changes_with_the_index_settings_and_with_what_the_interpreter_has(tmp_path: Path) -> None:
    root = package(tmp_path, {"requirements.txt": "tinytok\n"})
    found = env.read_requirements(str(root / "requirements.txt"), str(root))
    plain = env.environment_key(found, env.IndexSettings(), BASE)
    assert plain == env.environment_key(found, env.IndexSettings(), dict(BASE))
    assert plain != env.environment_key(found, env.IndexSettings(no_index=True), BASE)
    assert plain != env.environment_key(found, env.IndexSettings(), {**BASE, "numpy": ("numpy", "2.0.0")})


# ---------------------------------------------------------------------------- the installers' words


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        (
            [
                "$ uv pip compile ...",
                "error: No solution found when resolving dependencies",
                "  cause: Because foo was not found in the package registry and you require foo==9.9, we can conclude that your requirements are unsatisfiable.",
            ],
            "No solution found when resolving dependencies: Because foo was not found in the package registry and you require foo==9.9, "
            "we can conclude that your requirements are unsatisfiable.",
        ),
        (
            [
                "  × No solution found when resolving dependencies:",
                "  ╰─▶ Because foo==9.9 was not found, we can conclude that it cannot be used.",
            ],
            "No solution found when resolving dependencies:: Because foo==9.9 was not found, we can conclude that it cannot be used.",
        ),
        (
            [
                "Processing x",
                "ERROR: Could not find a version that satisfies the requirement foo==9.9 (from versions: 1.0)",
                "ERROR: No matching distribution found for foo==9.9",
            ],
            "Could not find a version that satisfies the requirement foo==9.9 (from versions: 1.0) No matching distribution found for foo==9.9",
        ),
        (["$ pip install", "Killed"], "Killed"),
    ],
)
def test_the_reason_is_the_installers_own_line(lines: list[str], reason: str) -> None:
    assert env.installer_reason(lines) == reason


def test_a_conflict_with_what_the_image_has_says_the_environment_only_adds(tmp_path: Path) -> None:
    root = package(tmp_path, {"requirements.txt": "tinytok\nsix>=2\n"})
    found = env.read_requirements(str(root / "requirements.txt"), str(root))
    words = env.explain("No solution found: Because you require six>=2 and six==1.17.0, ...", found, BASE)
    assert words.endswith(
        "(requirements.txt line 2); six==1.17.0 is the image's, and a job's requirements add packages without replacing the image's (use an image that has the version you need)"
    )


def test_the_job_message_while_preparing() -> None:
    assert (
        env.phase_message({"state": "building", "packages": 12, "installer": "uv", "job": "a"}) == "Preparing environment: 12 packages (uv)"
    )
    assert (
        env.phase_message({"state": "building", "installer": "pip", "job": "b", "by": "a"})
        == "Preparing environment: requirements (pip), built by job a"
    )
    assert (
        env.phase_message({"state": "building", "requirements": 1, "installer": "uv", "job": "a"})
        == "Preparing environment: 1 requirement (uv)"
    )
    assert env.phase_message({"state": "ready"}) is None


# ---------------------------------------------------------------------------- building


def _ensure(args: tuple[str, str, str, str, dict[str, str]]) -> dict[str, Any]:
    requirements, package_dir, envs_dir, job, environ = args
    said: list[str] = []
    try:
        prepared = env.ensure(requirements, package_dir, envs_dir, env.Job(job, os.path.join(envs_dir, "..", job)), environ, said.append)
    except (env.BuildFailed, env.RequirementsError) as failure:
        return {"failed": str(failure), "said": said}
    return {"key": prepared.key, "reused": prepared.reused, "said": said, "packages": prepared.packages}


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    directory = tmp_path / "wheels"
    make_wheel(directory, "tinytok", "1.0", requires=("tinyutil>=1",))
    make_wheel(directory, "tinyutil", "1.2")
    return directory


def site_file(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "site.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_processes_that_ask_at_once_build_the_environment_once(tmp_path: Path, wheels: Path) -> None:
    root = package(tmp_path, {"requirements.txt": "tinytok==1.0\n"})
    environ = {**os.environ, env.INDEX_FILE_VAR: site_file(tmp_path, {"no_index": True, "find_links": [str(wheels)]})}
    envs = tmp_path / "envs"
    envs.mkdir()
    jobs = [(str(root / "requirements.txt"), str(root), str(envs), f"job-{n}", environ) for n in range(4)]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_ensure, jobs)
    assert len({r["key"] for r in results}) == 1, results
    assert sorted(r["reused"] for r in results) == [False, True, True, True], results
    assert sum("building environment" in line for r in results for line in r["said"]) == 1
    assert [p.name for p in envs.iterdir() if not p.name.startswith(".")] == [results[0]["key"]]
    assert next(r for r in results if not r["reused"])["packages"] == ["tinytok==1.0", "tinyutil==1.2"]


def test_a_failure_is_remembered_for_its_job_and_tried_again_by_another(tmp_path: Path, wheels: Path) -> None:
    root = package(tmp_path, {"requirements.txt": "tinytok==9.9\n"})
    environ = {**os.environ, env.INDEX_FILE_VAR: site_file(tmp_path, {"no_index": True, "find_links": [str(wheels)], "installer": "pip"})}
    envs = tmp_path / "envs"
    envs.mkdir()
    args = (str(root / "requirements.txt"), str(root), str(envs))
    first = _ensure((*args, "job-a", environ))
    assert "tinytok==9.9" in first["failed"] and first["failed"].endswith("(requirements.txt line 1)"), first
    again = _ensure((*args, "job-a", environ))  # another replica or a retry of the same job
    assert again["failed"] == first["failed"] and not any("building" in line for line in again["said"])
    other = _ensure((*args, "job-b", environ))
    assert other["failed"] == first["failed"] and any("building environment" in line for line in other["said"])
    assert not [p for p in envs.iterdir() if not p.name.startswith(".")], "a failed build leaves no environment"


def test_index_credentials_never_reach_a_file(tmp_path: Path, wheels: Path) -> None:
    root = package(tmp_path, {"requirements.txt": "tinytok==1.0\n"})
    with SimpleIndex(wheels, user="bot", password="s3cret-token-42").serving() as index:
        environ = {**os.environ, env.INDEX_FILE_VAR: site_file(tmp_path, {"index_url": index.url})}
        envs = tmp_path / "envs"
        envs.mkdir()
        result = _ensure((str(root / "requirements.txt"), str(root), str(envs), "job-c", environ))
    assert result.get("reused") is False, result
    assert index.requests, "the index was used"
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "site.json" and p.suffix != ".whl"]
    leaks = [str(p) for p in written if b"s3cret-token-42" in p.read_bytes()]
    assert not leaks, leaks
    info = json.loads((envs / result["key"] / env.INFO_FILE).read_text())
    assert info["index"]["index_url"].startswith("http://bot:***@127.0.0.1:")


def test_the_local_backend_keeps_environments_beside_its_job_dirs_wherever_they_are(tmp_path: Path) -> None:
    from paddle_nbext_server.backends.local import LocalBackend
    from paddle_nbext_server.events import EventHub

    backend = LocalBackend(events=EventHub(), jobs_dir=str(tmp_path / "elsewhere" / "jobs"))
    assert backend.environments_dir(tmp_path / "home") == tmp_path / "elsewhere" / "jobs" / "envs"


def test_a_replica_holds_its_environment_so_housekeeping_cannot_remove_it_while_it_runs(tmp_path: Path, wheels: Path) -> None:
    import fcntl

    root = package(tmp_path, {"requirements.txt": "tinytok==1.0\n"})
    environ = {**os.environ, env.INDEX_FILE_VAR: site_file(tmp_path, {"no_index": True, "find_links": [str(wheels)]})}
    envs = tmp_path / "envs"
    envs.mkdir()
    prepared = env.ensure(str(root / "requirements.txt"), str(root), str(envs), env.Job("runs", None), environ, lambda _: None)
    assert prepared.lock_fd is not None
    lock = os.open(envs / ".locks" / f"{prepared.key}.lock", os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):  # what prune and DELETE /environments/{key} try first
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        again = env.ensure(str(root / "requirements.txt"), str(root), str(envs), env.Job("next", None), environ, lambda _: None)
        assert again.reused and again.key == prepared.key  # a second user starts meanwhile
        os.close(prepared.lock_fd)
        os.close(again.lock_fd)  # type: ignore[arg-type]
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the replicas ended: it can go
    finally:
        os.close(lock)


def test_a_replica_waiting_for_its_own_jobs_build_leaves_the_builders_message(tmp_path: Path) -> None:
    """A waiter can look between the builder's lock and the file that names the builder (CI saw a
    replica overwrite its own job's "1 requirement (uv)" with a vaguer message): it waits for the
    file, leaves its own job's status alone, and tells another job who builds."""
    import fcntl
    import threading
    import time

    envs, key = tmp_path / "envs", "k1"
    (envs / ".locks").mkdir(parents=True)
    builder = os.open(envs / ".locks" / f"{key}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(builder, fcntl.LOCK_EX)
    logs = {name: tmp_path / name / "logs" for name in ("held", "other")}
    building = {"state": "building", "key": key, "requirements": 1, "installer": "uv"}
    env._status(env.Job("held", str(logs["held"])), building)  # what the builder wrote first
    said: list[str] = []
    done: list[env.Prepared] = []

    def wait_for(job: str) -> None:
        fd = os.open(envs / ".locks" / f"{key}.lock", os.O_RDWR)
        done.append(env._ready(fd, str(envs / key), key, env.Job(job, str(logs[job])), lambda: pytest.fail("built twice"), said.append))

    waiters = [threading.Thread(target=wait_for, args=(job,)) for job in ("held", "other")]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.2)  # the waiters look before the builder names itself
    env.write_json(str(envs / ".locks" / f"{key}.json"), {"job": "held", "requirements": 1, "installer": "uv"})
    while len(said) < 2:
        time.sleep(0.02)
    messages = {job: env.phase_message(env.read_status(str(logs[job])) or {}) for job in logs}
    (envs / key).mkdir()
    env.write_json(str(envs / key / env.INFO_FILE), {"installer": "uv", "installed": ["tinytok==1.0"]})
    os.close(builder)
    for waiter in waiters:
        waiter.join()
    for prepared in done:
        os.close(prepared.lock_fd)  # type: ignore[arg-type]
    assert messages == {
        "held": "Preparing environment: 1 requirement (uv)",
        "other": "Preparing environment: 1 requirement (uv), built by job held",
    }
    assert len(done) == 2 and all(prepared.reused for prepared in done)
