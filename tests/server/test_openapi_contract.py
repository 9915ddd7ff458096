"""The OpenAPI document in the repo, checked against the live server with schemathesis: for
generated valid and invalid requests to every route there is no 5xx, every 4xx carries the
error body, and status codes, content types and bodies match the document.

`/events` never ends, so it is left to `test_streams.py`.  Job submissions are forced to
`dry_run=true`: fuzzed entry points must never be run as commands."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import schemathesis

# Loaded here, while the module is collected, not on the first `from_dict` inside the test:
# pytest rewrites a plugin's modules as they are imported, and on CPython 3.11 parsing the large
# nested literal of `definitions.py` deep inside the test's async stack once failed with
# "SystemError: AST constructor recursion depth mismatch" (a CPython bug; the module is the same).
import schemathesis.specs.openapi.schemas  # noqa: F401
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import ALICE_TOKEN, Fetch

DOCUMENT = Path(__file__).resolve().parents[2] / "server_ext" / "paddle_nbext_server" / "openapi.json"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 25}
STREAMING = {("GET", "/events")}


def exercise(base_url: str, document: Path = DOCUMENT) -> list[str]:
    """Run every operation in both generation modes; return the failures as readable lines."""
    schema = schemathesis.openapi.from_dict(json.loads(document.read_text()))
    headers = {"Authorization": f"token {ALICE_TOKEN}"}
    failures: list[str] = []
    statuses: dict[int, int] = {}
    results = list(schema.get_all_operations())
    operations = [result.ok() for result in results if isinstance(result, Ok)]
    assert len(operations) == len(results), [result for result in results if not isinstance(result, Ok)]
    assert (
        len(operations) == 21
    )  # resume and checkpoints (issue 26); environments, prune, remove (issue 25); usage, timeline (issue 36); compare, notifications get and put (issue 47)
    for operation in operations:
        if (operation.method.upper(), operation.path) in STREAMING:
            continue
        for mode, count in EXAMPLES.items():

            @settings(
                max_examples=count,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            # schemathesis 4 needs Python 3.11: at mypy's 3.10 target its GenerationMode (a StrEnum) is a str.
            @given(case=operation.as_strategy(generation_mode=mode))  # type: ignore[arg-type]
            def check(case: Any) -> None:
                if (case.method.upper(), case.path) == ("POST", "/jobs"):
                    case.query = {**(case.query or {}), "dry_run": "true"}
                # The document declares the token scheme; send the real token, not a generated one.
                case.headers = {**(case.headers or {}), **headers}
                response = case.call(base_url=base_url, timeout=30)
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                try:
                    case.validate_response(response, checks=CHECKS)
                    if 400 <= response.status_code < 500:
                        body = response.json()
                        assert set(body) >= {"error", "message", "field"} and body["message"], body
                except BaseException as error:  # collect, so one run reports every broken route
                    failures.append(f"{case.method} {case.path} {mode.value}: {response.status_code} {response.text[:300]} -> {error}")  # type: ignore[attr-defined]  # noqa: B023 - check() runs within this iteration
                    raise

            try:
                check()
            except BaseException as error:  # noqa: BLE001 - schemathesis raises exception groups
                if not failures:
                    failures.append(f"{operation.method} {operation.path} {mode.value}: {error!r}")  # type: ignore[attr-defined]  # GenerationMode, as above
    # The run really exercised the server: successes, validation errors and unknown jobs.
    assert statuses.get(200) and statuses.get(422) and statuses.get(404) and statuses.get(400), statuses
    return failures


async def test_live_server_matches_the_openapi_document(jp_fetch: Fetch, jp_http_port: int, jp_base_url: str, package: Path) -> None:
    # (jp_fetch: pytest-jupyter only serves HTTP once its client fixture exists)
    base_url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}paddle/api/v1"
    failures = await asyncio.to_thread(exercise, base_url)
    assert failures == [], "\n".join(failures[:20])
