"""Whether a running pod's node answers (`node_answers`), as the API server tells it when it
cannot fetch a pod's log from the kubelet: a failure that may come from that node is held back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from paddle_nbext_server.backends.kubernetes.status import node_answers
from paddle_nbext_server.errors import BackendUnavailable


class Served:
    data = b"step 10 loss 0.5\n"


def opener(outcome: Any) -> node_answers.OpenLog:
    async def open_log(doing: str, pod: str, tail: int | None, **options: Any) -> Any:
        assert tail == 1 and options["_request_timeout"] == node_answers.ANSWER_SECONDS
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return open_log


def refused(status: int, message: str) -> ApiException:
    error = ApiException(status=status, reason="Internal Server Error")
    error.body = f'{{"kind":"Status","message":"{message}"}}'
    return error


@pytest.mark.parametrize(
    ("outcome", "answer"),
    [
        (Served(), True),
        (
            refused(500, "Get 'https://10.200.0.3:10250/containerLogs/ns/p/main': dial tcp 10.200.0.3:10250: connect: connection refused"),
            False,
        ),
        (refused(502, "error trying to reach service: dial tcp 10.200.0.3:10250: i/o timeout"), False),
        (BackendUnavailable("cannot ask the node of p: the Kubernetes API at https://127.0.0.1:6443 timed out"), False),
        (refused(403, "pods 'p' is forbidden"), None),
        (refused(404, "pods 'p' not found"), None),
        (refused(400, "container 'main' in pod 'p' is waiting to start: ContainerCreating"), None),
    ],
)
def test_a_node_answers_when_its_kubelet_serves_a_log_line(outcome: Any, answer: bool | None) -> None:
    assert asyncio.run(node_answers.answers(opener(outcome), "p")) is answer


def test_only_the_pods_whose_node_does_not_answer_are_named() -> None:
    async def open_log(doing: str, pod: str, tail: int | None, **options: Any) -> Any:
        if pod == "dead":
            raise refused(500, "dial tcp 10.200.0.3:10250: connect: no route to host")
        return Served()

    assert asyncio.run(node_answers.unanswered(open_log, ["alive", "dead"])) == frozenset({"dead"})
