"""Every REST route and its error paths, against a real Jupyter server with the extension and
the real local backend (jobs here are short shell commands, not Paddle)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jupyter_server.serverapp import ServerApp

from paddle_nbext_server.app import ENV_TOKEN, ENV_URL

from .conftest import ALICE_TOKEN, Api

ROUTES = [
    ("GET", "jobs"),
    ("POST", "jobs"),
    ("GET", "jobs/some-job"),
    ("DELETE", "jobs/some-job"),
    ("POST", "jobs/some-job/cancel"),
    ("POST", "jobs/some-job/resume"),
    ("GET", "jobs/some-job/checkpoints"),
    ("GET", "jobs/some-job/logs"),
    ("GET", "jobs/some-job/metrics"),
    ("GET", "jobs/some-job/usage"),
    ("GET", "jobs/some-job/timeline"),
    ("GET", "events"),
    ("GET", "config"),
    ("GET", "version"),
    ("GET", "openapi.json"),
]


def assert_error(result: tuple[int, Any], status: int, code: str | None = None, field: str | None = "-") -> dict[str, Any]:
    got_status, body = result
    assert got_status == status, body
    assert isinstance(body, dict) and set(body) >= {"error", "message", "field"}, body
    assert body["message"], body
    if code is not None:
        assert body["error"] == code, body
    if field != "-":
        assert body["field"] == field, body
    return body


async def wait_for(api: Api, name: str, phases: set[str], user: str = "alice") -> dict[str, Any]:
    """Poll the job until it reaches one of `phases` (the pytest timeout bounds the wait)."""
    import asyncio

    while True:
        status, job = await api("GET", f"jobs/{name}", user=user)
        assert status == 200, job
        if job["phase"] in phases:
            reached: dict[str, Any] = job
            return reached
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("token", [None, "wrong-token"])
async def test_every_route_refuses_requests_without_valid_credentials(api: Api, token: str | None) -> None:
    for method, path in ROUTES:
        body = {"entry_point": "python x.py"} if method == "POST" else None
        assert_error(await api(method, path, token=token, body=body), 403, "forbidden", None)


async def test_version_config_and_openapi(api: Api, jp_base_url: str, jp_home_dir: Path) -> None:
    status, version = await api("GET", "version")
    assert status == 200 and version["api"] == "v1" and version["version"]

    status, config = await api("GET", "config")
    assert status == 200
    assert config["backend"]["name"] == "local" and config["backend"]["ok"] is True and config["backend"]["error"] is None
    assert config["limits"]["max_trainers"] == 64
    # Left out, the mode follows the request: collective unless pservers are asked for.
    assert config["defaults"]["mode"] == "collective" and config["defaults"]["trainers"] == 1
    assert config["user"] == "alice" and config["home"] == str(jp_home_dir)

    status, document = await api("GET", "openapi.json")
    assert status == 200
    on_disk = json.loads((Path(__file__).parents[2] / "server_ext" / "paddle_nbext_server" / "openapi.json").read_text())
    assert document["paths"] == on_disk["paths"] and document["components"] == on_disk["components"]
    assert document["servers"] == [{"url": f"{jp_base_url}paddle/api/v1"}]

    assert_error(await api("GET", "no-such-route"), 404, "not_found", None)


async def test_kernels_inherit_the_api_url_and_token(api: Api, jp_serverapp: ServerApp, jp_http_port: int, jp_base_url: str) -> None:
    import asyncio
    import os

    import requests

    url = os.environ[ENV_URL]
    assert url == f"http://127.0.0.1:{jp_http_port}{jp_base_url}paddle/api/v1"
    assert os.environ[ENV_TOKEN] == ALICE_TOKEN
    # What a kernel does with them: a plain HTTP call, from another thread (the loop serves it).
    response = await asyncio.to_thread(
        requests.get, f"{url}/version", headers={"Authorization": f"token {os.environ[ENV_TOKEN]}"}, timeout=10
    )
    assert response.status_code == 200 and response.json()["api"] == "v1"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"entry_point": "python t.py", "trainers": 0}, "trainers", "at least 1"),
        ({"entry_point": "python t.py", "trainers": 65}, "trainers", "at most 64"),
        ({"entry_point": "python t.py", "trainerz": 2}, "trainerz", "unknown field"),
        ({"entry_point": "python t.py", "job_name": "Bad_Name"}, "job_name", "lower-case"),
        ({"trainers": 2}, "entry_point", "required"),
        ({"entry_point": "python t.py", "trainer_mem": "lots"}, "trainer_mem", None),
        ({"entry_point": "python t.py", "entry_script": 42}, "entry_script", "string"),
        ({"entry_point": "python t.py", "trainer_package": "/etc"}, "trainer_package", "outside your home"),
        ({"entry_point": "python t.py", "trainer_package": "missing-dir"}, "trainer_package", "does not exist"),
    ],
)
async def test_invalid_fields_are_422_naming_the_field(
    api: Api, package: Path, body: dict[str, Any], field: str, words: str | None
) -> None:
    error = assert_error(await api("POST", "jobs", body=body), 422, field=field)
    if words:
        assert words in error["message"]
    status, listing = await api("GET", "jobs")
    assert listing["jobs"] == []


async def test_malformed_requests_are_400(api: Api) -> None:
    assert_error(await api("POST", "jobs", raw=b"{not json"), 400, "bad_request", None)
    assert_error(await api("POST", "jobs", raw=b""), 400, "bad_request", None)
    assert_error(await api("POST", "jobs", body=["python t.py"]), 400, "bad_request", None)
    assert_error(await api("POST", "jobs", body={"entry_point": "x"}, params={"dry_run": "perhaps"}), 400, field="dry_run")
    assert_error(await api("GET", "jobs/x/logs", params={"role": "chief"}), 400, field="role")
    assert_error(await api("GET", "jobs/x/logs", params={"index": "-1"}), 400, field="index")
    assert_error(await api("GET", "jobs/x/logs", params={"tail": "ten"}), 400, field="tail")
    assert_error(await api("GET", "jobs/x/logs", params={"follow": "true", "previous": "true"}), 400, field="previous")


async def test_dry_run_returns_the_plan_and_creates_nothing(api: Api, package: Path, jp_home_dir: Path) -> None:
    body = {"job_name": "dry", "entry_point": "python sleep.py 1", "trainer_package": "work", "trainers": 2}
    status, result = await api("POST", "jobs", body=body, params={"dry_run": "true"})
    assert status == 200, result
    assert result["dry_run"] is True and result["job"]["name"] == "dry" and result["job"]["owner"] == "alice"
    assert result["job"]["spec"]["trainers"] == 2 and result["plan"]
    assert (await api("GET", "jobs"))[1]["jobs"] == []
    assert_error(await api("GET", "jobs/dry"), 404, "not_found")
    jobs_dir = jp_home_dir / ".paddle-jobs"
    assert not jobs_dir.exists() or list(jobs_dir.iterdir()) == []


async def test_unknown_jobs_are_404(api: Api) -> None:
    for name in ("no-such-job", "UPPER", "a" * 41, "..", "%2e%2e"):
        assert_error(await api("GET", f"jobs/{name}"), 404, "not_found")
        assert_error(await api("DELETE", f"jobs/{name}"), 404, "not_found")
        assert_error(await api("POST", f"jobs/{name}/cancel"), 404, "not_found")
        assert_error(await api("GET", f"jobs/{name}/logs"), 404, "not_found")
        assert_error(await api("GET", f"jobs/{name}/logs", params={"follow": "true"}), 404, "not_found")
        assert_error(await api("GET", f"jobs/{name}/metrics"), 404, "not_found")


async def test_job_lifecycle_owner_isolation_and_name_conflicts(api: Api, package: Path) -> None:
    body = {"job_name": "sleeper", "mode": "collective", "trainers": 1, "entry_point": "python sleep.py 120", "trainer_package": "work"}
    status, job = await api("POST", "jobs", body=body)
    assert status == 201, job
    try:
        assert job["name"] == "sleeper" and job["owner"] == "alice" and job["backend"] == "local"
        assert job["phase"] in ("Pending", "Running")

        # The name is taken: a second submit is refused and changes nothing.
        assert_error(await api("POST", "jobs", body=body), 409, "name_taken")

        listed = (await api("GET", "jobs"))[1]["jobs"]
        assert [j["name"] for j in listed] == ["sleeper"]

        # Bob sees nothing of Alice's job: not in lists, and every route says "no such job".
        assert (await api("GET", "jobs", user="bob"))[1]["jobs"] == []
        assert_error(await api("GET", "jobs/sleeper", user="bob"), 404, "not_found")
        assert_error(await api("GET", "jobs/sleeper/logs", user="bob"), 404, "not_found")
        assert_error(await api("POST", "jobs/sleeper/cancel", user="bob"), 404, "not_found")
        assert_error(await api("DELETE", "jobs/sleeper", user="bob"), 404, "not_found")

        running = await wait_for(api, "sleeper", {"Running"})
        assert running["roles"]["trainer"]["desired"] == 1

        # Logs of a replica that does not exist (404 naming the field to change), then the real one.
        missing_role = assert_error(await api("GET", "jobs/sleeper/logs", params={"role": "pserver"}), 404, "not_found", "role")
        assert "has no pservers" in missing_role["message"], missing_role
        missing_index = assert_error(await api("GET", "jobs/sleeper/logs", params={"index": "99"}), 404, "not_found", "index")
        assert "has no trainer 99: it has 1 trainer (index 0 to 0)" in missing_index["message"], missing_index
        while "started" not in (await api("GET", "jobs/sleeper/logs", params={"role": "trainer", "index": 0}))[1]:
            import asyncio

            await asyncio.sleep(0.1)

        status, cancelled = await api("POST", "jobs/sleeper/cancel")
        assert status == 200 and cancelled["phase"] == "Cancelled", cancelled
        # The record and its log stay after cancel.
        assert (await api("GET", "jobs/sleeper"))[1]["phase"] == "Cancelled"
        status, text = await api("GET", "jobs/sleeper/logs", params={"tail": "5"})
        assert status == 200 and "started" in text
    finally:
        status, _ = await api("DELETE", "jobs/sleeper")
    assert status == 204
    assert_error(await api("GET", "jobs/sleeper"), 404)
    assert (await api("GET", "jobs"))[1]["jobs"] == []


@pytest.mark.parametrize(
    ("paddle_config", "trait"),
    [
        ({"backend": "yarn"}, "backend"),
        ({"max_trainers": 0}, "max_trainers"),
        ({"max_mem_per_replica": "plenty"}, "max_mem_per_replica"),
        ({"defaults": {"trainerz": 2}}, "defaults"),
        ({"allowed_images": ["paddle:3.0"], "default_image": "other:1"}, "default_image"),
    ],
)
async def test_invalid_configuration_keeps_the_server_up_and_names_the_trait(api: Api, paddle_config: dict[str, Any], trait: str) -> None:
    status, config = await api("GET", "config")
    assert status == 200
    assert config["backend"]["ok"] is False and trait in config["backend"]["error"], config["backend"]
    for method, path in (("GET", "jobs"), ("POST", "jobs"), ("GET", "jobs/x"), ("GET", "events")):
        body = {"entry_point": "python t.py"} if method == "POST" else None
        error = assert_error(await api(method, path, body=body), 503, "unavailable")
        assert trait in error["message"]
    assert (await api("GET", "version"))[0] == 200


@pytest.mark.parametrize("local_config", [{"poll_interval": "often"}])
async def test_backend_that_cannot_be_built_is_reported(api: Api, local_config: dict[str, Any]) -> None:
    status, config = await api("GET", "config")
    assert config["backend"]["ok"] is False and "poll_interval" in config["backend"]["error"]
    error = assert_error(await api("GET", "jobs"), 503, "unavailable")
    assert "local backend could not be created" in error["message"]


@pytest.mark.parametrize(
    "paddle_config",
    [{"max_trainers": 4, "allowed_images": ["paddle:3.0"], "default_image": "paddle:3.0", "defaults": {"trainers": 2}}],
)
async def test_limits_and_defaults_from_configuration(api: Api, package: Path, paddle_config: dict[str, Any]) -> None:
    status, config = await api("GET", "config")
    assert config["backend"]["ok"] is True
    assert config["limits"]["max_trainers"] == 4 and config["images"] == ["paddle:3.0"] and config["default_image"] == "paddle:3.0"
    assert config["defaults"]["trainers"] == 2 and config["defaults"]["image"] == "paddle:3.0"
    error = assert_error(await api("POST", "jobs", body={"entry_point": "python t.py", "trainers": 5}), 422, field="trainers")
    assert "at most 4" in error["message"]
    assert_error(await api("POST", "jobs", body={"entry_point": "python t.py", "image": "evil:1"}), 422, field="image")
    status, plan = await api("POST", "jobs", body={"entry_point": "python t.py", "trainer_package": "work"}, params={"dry_run": "1"})
    assert status == 200 and plan["job"]["spec"]["trainers"] == 2 and plan["job"]["spec"]["image"] == "paddle:3.0"


@pytest.mark.parametrize("paddle_config", [{"backend": "kubernetes"}])
async def test_kubernetes_backend_without_a_cluster_answers_503_with_the_cause(
    api: Api, paddle_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    status, config = await api("GET", "config")
    assert status == 200 and config["backend"]["name"] == "kubernetes"
    status, body = await api("GET", "jobs")
    error = assert_error((status, body), 503, "unavailable")
    assert len(error["message"]) > 20  # the cause, not just "unavailable"
    # /config must agree with the job routes: the panel and the form read it.
    status, config = await api("GET", "config")
    assert config["backend"]["ok"] is False and config["backend"]["error"]
    assert (await api("GET", "version"))[0] == 200


@pytest.mark.parametrize("paddle_config", [{"backend": "kubernetes", "allowed_images": ["mirror/paddle:3.0.0"]}])
async def test_backend_default_image_outside_the_allow_list_is_reported(api: Api, paddle_config: dict[str, Any]) -> None:
    """A job naming no image would get c.KubernetesBackend.default_image; the allow-list must
    cover it, so a default outside the list is a configuration error shown in /config."""
    status, config = await api("GET", "config")
    assert status == 200 and config["backend"]["ok"] is False
    assert "allowed_images" in config["backend"]["error"] and "paddlepaddle/paddle:3.0.0" in config["backend"]["error"]
    assert_error(await api("GET", "jobs"), 503, "unavailable")


@pytest.mark.parametrize("paddle_config", [{"backend_class": "support.site_backend.SiteBackend"}])
async def test_a_site_plugs_in_its_own_backend_class(api: Api, package: Path, paddle_config: dict[str, Any]) -> None:
    status, config = await api("GET", "config")
    assert status == 200 and config["backend"]["ok"] is True and config["backend"]["name"] == "site-local", config["backend"]
    status, plan = await api("POST", "jobs", body={"entry_point": "python t.py", "trainer_package": "work"}, params={"dry_run": "1"})
    assert status == 200 and plan["dry_run"] is True, plan


@pytest.mark.parametrize("paddle_config", [{"backend_class": "support.site_backend.NotABackend"}])
async def test_a_backend_class_that_is_no_backend_is_reported_naming_the_setting(api: Api, paddle_config: dict[str, Any]) -> None:
    status, config = await api("GET", "config")
    assert status == 200 and config["backend"]["ok"] is False and "backend_class" in config["backend"]["error"], config["backend"]
    error = assert_error(await api("GET", "jobs"), 503, "unavailable")
    assert "backend_class" in error["message"]
