"""The policy's side of a stall on Kubernetes: a trainer whose launcher stopped it for a stall
(exit `STALL_EXIT_CODE`, the stall's words in its termination message or last line) restarts
the whole job, counted like a failure's restart, while `on_stall` is restart and restarts are
left, and otherwise fails the job in the stall's words (the local master's semantics,
`master.lifecycle.Master.check_health`).  Also read from pods as the server and the in-cluster master do."""

from __future__ import annotations

import json
from typing import Any

from paddle_nbext.model.contract import STALL_EXIT_CODE, Phase
from paddle_nbext_server.runtime import replicas
from paddle_nbext_server.runtime.policy import Observed, decide, stall_words

WORDS = "no progress for 10 min since step 1234; trainer 1 last wrote at 14:02:05"
LAST_LINE = f"[rank 0] step 1234\npaddle-nbext launcher: the training stalled: {WORDS}\n"


def job(stalled: Observed) -> list[Observed]:
    return [Observed("pserver", 0, "Running"), Observed("trainer", 0, "Running", restarts=stalled.restarts), stalled]


def test_on_stall_restart_with_restarts_left_restarts_the_whole_job_counted_like_a_failure() -> None:
    stalled = Observed("trainer", 1, "Failed", STALL_EXIT_CODE, restarts=1, reason=f"Stalled: {WORDS}")
    decision = decide(job(stalled), max_restarts=3, on_stall="restart")
    assert decision.phase == Phase.RUNNING and not decision.terminal
    assert decision.restart == [("trainer", 1)] and decision.disruption is False
    assert decision.message == f"restart 2 of 3: the job stalled ({WORDS}); all replicas restarting"


def test_on_stall_restart_without_restarts_left_fails_the_job_saying_so() -> None:
    stalled = Observed("trainer", 1, "Failed", STALL_EXIT_CODE, restarts=2, log_tail=LAST_LINE)
    decision = decide(job(stalled), max_restarts=2, on_stall="restart")
    assert decision.phase == Phase.FAILED and decision.restart == []
    assert decision.message == f"The job stalled: {WORDS}; no restarts left (max_restarts 2)."
    assert set(decision.stop) == {("pserver", 0), ("trainer", 0)}
    never = decide(job(Observed("trainer", 1, "Failed", STALL_EXIT_CODE, log_tail=LAST_LINE)), max_restarts=0, on_stall="restart")
    assert never.message == f"The job stalled: {WORDS}; no restarts left (max_restarts 0)."


def test_on_stall_fail_fails_the_job_in_the_stalls_words_even_with_restarts_left() -> None:
    for restarts in (0, 3):
        stalled = Observed("trainer", 1, "Failed", STALL_EXIT_CODE, restarts=restarts, reason=f"Stalled: {WORDS}")
        decision = decide(job(stalled), max_restarts=3, on_stall="fail")
        assert decision.phase == Phase.FAILED and decision.restart == []
        assert decision.message == f"The job stalled: {WORDS}; on_stall is 'fail'."


def test_an_exit_five_without_the_stalls_words_is_an_ordinary_failure() -> None:
    """The user's own `sys.exit(5)` is not a stall: the words must be there too."""
    plain = Observed("trainer", 1, "Failed", STALL_EXIT_CODE, reason="Exit code 5", log_tail="ValueError: no\n")
    assert stall_words(plain) is None
    decision = decide(job(plain), max_restarts=0, on_stall="fail")
    assert decision.message == "trainer 1 failed with Exit code 5: ValueError: no"
    other = Observed("trainer", 1, "Failed", 1, reason="Exit code 1", log_tail=LAST_LINE)
    assert stall_words(other) is None  # the words without the stall's exit code: not a stall either


def pod(index: int, phase: str, terminated: dict[str, Any] | None = None) -> dict[str, Any]:
    state = {"terminated": terminated} if terminated else {"running": {"startedAt": "2026-12-06T01:00:00Z"}}
    return {
        "metadata": {
            "name": f"mnist-2bd806-trainer-{index}-abcde",
            "creationTimestamp": "2026-12-06T01:00:00Z",
            "labels": {"paddle-nbext/role": "trainer", "batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {"volumes": []},
        "status": {"phase": phase, "containerStatuses": [{"name": "main", "state": state}]},
    }


def record(on_stall: str, failures: int = 0) -> dict[str, Any]:
    spec = {"job_name": "mnist", "mode": "collective", "pservers": 0, "trainers": 2, "max_restarts": 1, "on_stall": on_stall}
    restarts = json.dumps({"attempt": failures, "failures": failures, "disruptions": 0, "stopping": False, "message": ""})
    return {
        "metadata": {"name": "mnist-2bd806", "uid": "u1", "annotations": {"paddle-nbext/restart": restarts}},
        "data": {"spec.json": json.dumps(spec)},
    }


def pods(attempt: int) -> list[dict[str, Any]]:
    ended = {"exitCode": STALL_EXIT_CODE, "reason": "Error", "message": WORDS, "finishedAt": "2026-12-06T01:20:00Z"}
    found = [pod(0, "Running"), pod(1, "Failed", ended)]
    for each in found:
        each["metadata"]["labels"]["paddle-nbext/attempt"] = str(attempt)
    return found


def test_pods_read_as_a_stall_from_the_termination_message_by_the_server_and_the_master() -> None:
    views, decision = replicas.decide_job(record("restart"), pods(0))
    stalled = next(v for v in views if v.index == 1)
    assert stalled.reason == f"Stalled: {WORDS}"  # the replica table says it in words
    assert decision.restart == [("trainer", 1)] and decision.message.startswith("restart 1 of 1: the job stalled (")
    following = replicas.Restarts().next(decision)
    assert (following.failures, following.disruptions) == (1, 0)  # counted like other restarts
    # The next attempt stalls too: no restarts left.
    _views, decision = replicas.decide_job(record("restart", failures=1), pods(1))
    assert decision.phase == Phase.FAILED
    assert decision.message == f"The job stalled: {WORDS}; no restarts left (max_restarts 1)."
    _views, decision = replicas.decide_job(record("fail"), pods(0))
    assert decision.phase == Phase.FAILED and decision.message == f"The job stalled: {WORDS}; on_stall is 'fail'."
