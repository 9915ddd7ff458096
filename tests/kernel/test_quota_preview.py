"""Quota before submit on the kernel side (issue 17): the ipywidgets form's "Check resources" and
`paddle-nbext submit --dry-run` show the server's quota sentence, and a job that can never fit
cannot be submitted from the form.

The server here is a small HTTP stand-in for a Kubernetes-backed paddle-nbext API: it answers
`GET /config` and `POST /jobs` with the bodies the real one sends (the dry run's `quota` is made
by the server's own `quota.judge`, so the shape cannot drift); the real answers are tested on the
control plane (tests/cluster/test_k8s_quota.py)."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from paddle_nbext.client import Client
from paddle_nbext.model.quantity import Quantity
from paddle_nbext.model.quota import Verdict
from paddle_nbext_server.backends.kubernetes.quota import quota

from .conftest import disabled

CLI = str(Path(sys.executable).with_name("paddle-nbext"))
GPU = "nvidia.com/gpu"
CONFIG = {"backend": {"name": "kubernetes", "ok": True, "error": None, "quota_check": True}, "defaults": {}, "limits": {}, "images": []}


def quota_of(body: dict[str, Any]) -> dict[str, Any]:
    """What the server's check says about `body` against 4 GPUs of ResourceQuota `gpus`, 2 free."""
    trainers, gpu = int(body.get("trainers") or 1), int(body.get("trainer_gpu") or 0)
    each = {"cpu": Quantity.parse(str(body.get("trainer_cpu") or "1")), GPU: Quantity(Fraction(gpu))}
    groups = [quota.PodGroup("trainer", trainers, {k: v for k, v in each.items() if v.value})]
    bounds = [quota.Bound(GPU, "ResourceQuota gpus", Fraction(4), Fraction(2))]
    return quota.judge(groups, bounds, [], GPU).to_dict()


class _FakeKubernetesApi(http.server.BaseHTTPRequestHandler):
    submitted: list[dict[str, Any]] = []

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(200, CONFIG) if self.path.endswith("/config") else self._answer(404, {"error": "not_found", "message": "no"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        check = quota_of(body)
        job = {"name": body.get("job_name") or "job-x", "phase": "Pending", "spec": body, "replicas": []}
        if "dry_run=true" in self.path:
            self._answer(200, {"dry_run": True, "job": job, "plan": {"namespace": "team-a", "manifests": []}, "quota": check})
        elif check["verdict"] == "never":
            self._answer(422, {"error": "invalid", "message": check["words"], "field": check["field"]})
        else:
            self.submitted.append(body)
            self._answer(201, job)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_api() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeKubernetesApi)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _FakeKubernetesApi.submitted = []
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/paddle/api/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_form_checks_resources_warns_when_it_waits_and_refuses_what_never_fits(fake_api: str, tmp_path: Path) -> None:
    from paddle_nbext.widgets._theme import ERROR_COLOUR, WARN_COLOUR
    from paddle_nbext.widgets.form import JobForm

    form = JobForm(Client(fake_api, "t"))
    assert form.check_button.layout.display == "flex"  # the backend checks quota
    form.inputs["mode"].value = "collective"
    form.inputs["pservers"].value = 0
    (tmp_path / "train.py").write_text("print('train')\n")  # the form checks the script is there
    form.inputs["trainer_package"].value = str(tmp_path)
    form.inputs["entry_point"].value = "python train.py"
    form.inputs["trainers"].value = 2
    form.inputs["trainer_gpu"].value = 2

    waits = form.check_resources()
    assert waits is not None and waits.verdict == Verdict.WAITS
    assert "free now: 2 GPUs — it will wait (short of 2 GPUs in ResourceQuota gpus)" in form.quota.value
    assert f"color:{WARN_COLOUR}" in form.quota.value and disabled(form.submit_button) is False  # the theme's orange

    form.inputs["trainers"].value = 3  # an edit: the sentence was about other values
    assert form.quota.value == "" and form.quota_check is None
    never = form.check_resources()
    assert never is not None and never.verdict == Verdict.NEVER and never.field == "trainers"
    assert "it can never run: it needs 6 GPUs, but ResourceQuota gpus has at most 4 GPUs" in form.quota.value
    assert f"color:{ERROR_COLOUR}" in form.quota.value and disabled(form.submit_button) is True  # the theme's red

    # Sent anyway (the button bypassed): the server's 422 lands under the field it names.
    assert form.submit() is None
    assert form.messages["trainers"].startswith("This job needs")
    assert _FakeKubernetesApi.submitted == []
    form.close()


def test_the_check_button_is_hidden_where_the_backend_checks_no_quota(fake_api: str) -> None:
    from paddle_nbext.widgets.form import JobForm

    form = JobForm(Client(fake_api, "t"), config={**CONFIG, "backend": {"name": "local", "ok": True}})
    assert form.check_button.layout.display == "none"
    form.close()


@pytest.mark.parametrize(("trainers", "code", "sentence"), [(2, 0, "it will wait"), (3, 1, "it can never run")])
def test_cli_dry_run_prints_the_quota_sentence_and_fails_what_never_fits(
    fake_api: str, tmp_path: Path, trainers: int, code: int, sentence: str
) -> None:
    argv = [CLI, "--url", fake_api, "--token", "t", "submit", "--entry", "python x.py", "--mode", "collective"]
    argv += ["--trainers", str(trainers), "--trainer-gpu", "2", "--package", str(tmp_path), "--dry-run"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    assert json.loads(done.stdout)["quota"]["verdict"] in ("waits", "never")  # stdout stays the plan's JSON
    assert done.stderr.startswith("Quota: This job needs ") and sentence in done.stderr, done.stderr
    as_json = subprocess.run([*argv, "-o", "json"], capture_output=True, text=True, timeout=60)
    assert as_json.stderr == "" and json.loads(as_json.stdout)["quota"]["words"] in done.stderr
