"""Errors of the Kubernetes client that are not HTTP answers are reported as what they are."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
import urllib3
from kubernetes import client

from paddle_nbext_server.backends.kubernetes import KubernetesBackend
from paddle_nbext_server.errors import BackendUnavailable
from paddle_nbext_server.events import EventHub


def call(fn: object) -> BackendUnavailable:
    backend = KubernetesBackend(events=EventHub())
    with pytest.raises(BackendUnavailable) as error:
        asyncio.run(backend.api.call("create Job x-trainer", fn))
    return error.value


def test_a_model_validation_error_is_named_not_called_unreachable() -> None:
    def bad_toleration(**_: object) -> None:
        client.V1Toleration(key="gpu", operator="Exists", toleration_seconds="soon")  # type: ignore[arg-type]  # the wrong type on purpose: the client's model refuses it

    message = call(bad_toleration).message
    assert "unreachable" not in message
    assert message.startswith("cannot create Job x-trainer: the Kubernetes client refused the request (")
    assert "V1Toleration" in message and "toleration_seconds" in message
    assert "c.KubernetesBackend" in message


def test_a_connection_failure_is_unreachable() -> None:
    def refused(**_: object) -> None:
        no_pool = cast(urllib3.connectionpool.ConnectionPool, None)  # no pool: the error only names it ("None: Max retries…")
        raise urllib3.exceptions.MaxRetryError(no_pool, "/api", ConnectionRefusedError(111, "Connection refused"))

    message = call(refused).message
    assert "is unreachable" in message and "Connection refused" in message
