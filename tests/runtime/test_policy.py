"""The lifecycle rules every runner applies (runtime/policy.py)."""

from __future__ import annotations

from paddle_nbext.model.contract import Phase, ReplicaPhase
from paddle_nbext_server.runtime.policy import Observed, decide, failure_line

# Replica phases build the inputs; a job phase compares equal to the replica phase of that name.
PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED = (
    ReplicaPhase.PENDING,
    ReplicaPhase.RUNNING,
    ReplicaPhase.SUCCEEDED,
    ReplicaPhase.FAILED,
    ReplicaPhase.STOPPED,
)
CANCELLED = Phase.CANCELLED


def job(trainers: list[str], pservers: list[str], **extra: Observed) -> list[Observed]:
    replicas = [Observed("pserver", i, phase) for i, phase in enumerate(pservers)]
    replicas += [Observed("trainer", i, phase) for i, phase in enumerate(trainers)]
    return replicas


def test_all_trainers_done_succeeds_and_stops_pservers() -> None:
    decision = decide(job([SUCCEEDED, SUCCEEDED], [RUNNING, RUNNING]), max_restarts=0)
    assert decision.phase == SUCCEEDED
    assert sorted(decision.stop) == [("pserver", 0), ("pserver", 1)]


def test_trainer_failure_without_retries_fails_with_code_and_tail() -> None:
    replicas = job([RUNNING, RUNNING], [RUNNING])
    replicas[2] = Observed("trainer", 1, FAILED, exit_code=3, log_tail="step 5\nValueError: bad batch\n")
    decision = decide(replicas, max_restarts=0)
    assert decision.phase == FAILED
    assert "trainer 1" in decision.message and "exit code 3" in decision.message
    assert "ValueError: bad batch" in decision.message
    assert ("pserver", 0) in decision.stop and ("trainer", 0) in decision.stop


def test_trainer_failure_with_retries_left_restarts_it() -> None:
    replicas = job([RUNNING, RUNNING], [RUNNING])
    replicas[2] = Observed("trainer", 1, FAILED, exit_code=1, restarts=0)
    decision = decide(replicas, max_restarts=2)
    assert decision.phase == RUNNING
    assert decision.restart == [("trainer", 1)]


def test_pserver_ending_early_fails_the_job() -> None:
    replicas = job([RUNNING, SUCCEEDED], [RUNNING, FAILED])
    replicas[1] = Observed("pserver", 1, FAILED, exit_code=-9)
    decision = decide(replicas, max_restarts=0)
    assert decision.phase == FAILED
    assert "pserver 1" in decision.message and "SIGKILL" in decision.message


def test_memory_reason_is_reported() -> None:
    replicas = [Observed("trainer", 0, FAILED, exit_code=-9, reason="MemoryLimitExceeded: used 1.2Gi of 1Gi")]
    decision = decide(replicas, max_restarts=0)
    assert decision.phase == FAILED and "MemoryLimitExceeded: used 1.2Gi of 1Gi" in decision.message


def test_cancel_and_timeout_stop_everything() -> None:
    replicas = job([RUNNING], [RUNNING])
    assert decide(replicas, max_restarts=0, cancelled=True).phase == CANCELLED
    timed_out = decide(replicas, max_restarts=0, timed_out_after=60)
    assert timed_out.phase == FAILED and "DeadlineExceeded" in timed_out.message
    assert len(timed_out.stop) == 2


def test_stopped_pservers_after_success_are_normal() -> None:
    decision = decide(job([SUCCEEDED], [STOPPED]), max_restarts=0)
    assert decision.phase == SUCCEEDED and decision.stop == []


def test_nothing_started_is_pending() -> None:
    assert decide(job([PENDING], [PENDING]), max_restarts=0).phase == PENDING


def test_the_failure_line_is_the_exception_not_paddles_shutdown_noise() -> None:
    log = (
        'step 19 loss 0.1\nTraceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
        '    raise ValueError("bad batch")\nValueError: bad batch\n'
        "I1201 06:29:17.266114   569 server.cpp:1167] Server[paddle::distributed::DownpourPsClientService] is going to quit\n"
    )
    assert failure_line(log) == "ValueError: bad batch"
    segfault = (
        "step 3\n--------------------------------------\nC++ Traceback (most recent call last):\n"
        "--------------------------------------\n0   paddle::framework::Executor::Run()\n"
        "----------------------\nError Message Summary:\n----------------------\n"
        "FatalError: `Segmentation fault` is detected by the operating system.\n"
        "  [TimeInfo: *** Aborted at 1764570000 (unix time) ***]\n"
        "  [SignalInfo: *** SIGSEGV (@0x0) received by PID 12 (TID 0x7f) from PID 0 ***]\n"
    )
    assert failure_line(segfault) == "FatalError: `Segmentation fault` is detected by the operating system."
    assert failure_line("I1201 06:29:17.266114 569 server.cpp:1167] quit\nW1201 06:29:17.3 569 x.cc:1] gloo\n") == ""
    assert failure_line("loading\nsimulated crash at step 20\n") == "simulated crash at step 20"


def test_a_signal_is_named_with_its_likely_cause() -> None:
    replicas = job([RUNNING, RUNNING], [RUNNING])
    replicas[2] = Observed("trainer", 1, FAILED, exit_code=-9)
    assert "trainer 1 failed with killed by signal 9 (SIGKILL — out of memory?)" in decide(replicas, max_restarts=0).message
    replicas[2] = Observed("trainer", 1, FAILED, exit_code=139)  # a shell's report of SIGSEGV
    assert "exit code 139 (SIGSEGV — a crash in native code)" in decide(replicas, max_restarts=0).message
    replicas[2] = Observed("trainer", 1, FAILED, exit_code=130 + 100)
    assert decide(replicas, max_restarts=0).message.startswith("trainer 1 failed with exit code 230")


def test_a_pserver_whose_code_never_serves_fails_with_what_to_do() -> None:
    """A plain script in ps mode: the pserver runs it, it ends 0 at once, trainers go on."""
    replicas = job([RUNNING], [SUCCEEDED])
    replicas[0] = Observed("pserver", 0, SUCCEEDED, exit_code=0, log_tail="hello\n")
    decision = decide(replicas, max_restarts=0)
    assert decision.phase == FAILED
    assert decision.message.startswith("pserver 0 ended with exit code 0 before the trainers finished: its code never served.")
    assert "fleet.init_server()" in decision.message and "fleet.run_server()" in decision.message
    assert "mode=collective" in decision.message


def test_the_rank_whose_code_failed_is_named_not_the_one_that_aborted_because_of_it() -> None:
    """Collective: rank 1 raises, rank 0 aborts (SIGABRT, 134) when its peer goes away."""
    replicas = job([FAILED, FAILED], [])
    replicas[0] = Observed("trainer", 0, FAILED, exit_code=134, log_tail="FatalError: `Process abort signal` is detected\n")
    replicas[1] = Observed("trainer", 1, FAILED, exit_code=1, log_tail="Traceback (most recent call last):\nValueError: bad batch\n")
    assert decide(replicas, max_restarts=0).message == "trainer 1 failed with exit code 1: ValueError: bad batch"


def test_a_rank_whose_pod_is_gone_and_only_its_job_says_failed_is_not_blamed() -> None:
    """Kubernetes: rank 1 raises; its Job fails (backoffLimit 0) and the Job controller deletes
    rank 0's pod, so rank 0 is failed only by its Job's word, with no exit code of its own."""
    replicas = job([FAILED, FAILED], [])
    replicas[0] = Observed("trainer", 0, FAILED, reason="BackoffLimitExceeded: Job has reached the specified backoff limit")
    replicas[1] = Observed("trainer", 1, FAILED, exit_code=1, log_tail="Traceback (most recent call last):\nValueError: bad batch\n")
    assert decide(replicas, max_restarts=0).message == "trainer 1 failed with exit code 1: ValueError: bad batch"
    restart = decide(replicas, max_restarts=1)
    assert restart.message.startswith("restart 1 of 1: trainer 1 failed with exit code 1 (ValueError: bad batch)")


def test_a_failure_with_restarts_left_restarts_the_whole_job_in_words() -> None:
    replicas = job([RUNNING, FAILED], [RUNNING])
    replicas[2] = Observed("trainer", 1, FAILED, exit_code=3, restarts=1, log_tail="ValueError: bad batch\n")
    decision = decide(replicas, max_restarts=3)
    assert decision.message == "restart 2 of 3: trainer 1 failed with exit code 3 (ValueError: bad batch); all replicas restarting"
    assert decision.phase == RUNNING and decision.restart == [("trainer", 1)]


ABORT_TAIL = "FatalError: `Process abort signal` is detected by the operating system.\n"


def test_a_rank_aborted_before_its_failing_peer_ended_waits_for_the_peer_to_be_named() -> None:
    """Seen on the real node: rank 1 raised, rank 0's gloo aborted at once, and rank 0's pod
    ended first; the job must not blame rank 0 while rank 1 (its traceback still being
    written) runs, but name rank 1 once it has ended."""
    aborted = Observed("trainer", 0, FAILED, exit_code=134, log_tail=ABORT_TAIL, finished="2026-12-01T21:30:00Z")
    waiting = decide([aborted, Observed("trainer", 1, RUNNING)], max_restarts=0, now=aborted_at(aborted) + 2)
    assert waiting.phase == RUNNING and not waiting.stop
    assert "trainer 0 ended with exit code 134" in waiting.message and "waiting for the other trainers" in waiting.message

    raised = Observed("trainer", 1, FAILED, exit_code=1, log_tail="Traceback (most recent call last):\nValueError: bad batch\n")
    named = decide([aborted, raised], max_restarts=0, now=aborted_at(aborted) + 4)
    assert named.phase == FAILED and named.message.startswith("trainer 1 failed with exit code 1: ValueError: bad batch")


def test_an_aborted_rank_is_named_once_its_peers_do_not_end_in_time() -> None:
    aborted = Observed("trainer", 0, FAILED, exit_code=134, log_tail=ABORT_TAIL, finished="2026-12-01T21:30:00+00:00")
    late = decide([aborted, Observed("trainer", 1, RUNNING)], max_restarts=0, now=aborted_at(aborted) + 60)
    assert late.phase == FAILED and late.message.startswith("trainer 0 failed with exit code 134")
    assert ("trainer", 1) in late.stop


def test_a_failure_of_the_code_itself_is_named_at_once_and_without_a_clock_nothing_waits() -> None:
    crashed = Observed("trainer", 0, FAILED, exit_code=1, log_tail="ValueError: x\n", finished="2026-12-01T21:30:00Z")
    assert decide([crashed, Observed("trainer", 1, RUNNING)], max_restarts=0, now=aborted_at(crashed)).phase == FAILED
    aborted = Observed("trainer", 0, FAILED, exit_code=134, log_tail=ABORT_TAIL, finished="2026-12-01T21:30:00Z")
    assert decide([aborted, Observed("trainer", 1, RUNNING)], max_restarts=0).phase == FAILED


def aborted_at(replica: Observed) -> float:
    import datetime

    assert replica.finished is not None
    return datetime.datetime.fromisoformat(replica.finished.replace("Z", "+00:00")).timestamp()


RANK_TAIL = (
    "[rank 1] Traceback (most recent call last):\n"
    '[rank 1]   File "train.py", line 9, in <module>\n'
    "[rank 1] ValueError: bad batch at step 10\n"
    "[rank 0] FatalError: `Process abort signal` is detected by the operating system.\n"
    "trainer 1 rank 1 failed: ValueError: bad batch at step 10\n"
)


def test_a_failed_rank_is_named_once_with_its_own_words() -> None:
    """The launcher's last line names trainer and rank: the job's message says it once."""
    replicas = job([SUCCEEDED, RUNNING], [])
    replicas[1] = Observed("trainer", 1, FAILED, exit_code=1, log_tail=RANK_TAIL)
    assert decide(replicas, max_restarts=0).message == "trainer 1 rank 1 failed: ValueError: bad batch at step 10"
    replicas[1] = Observed("trainer", 1, FAILED, exit_code=1, restarts=2, log_tail=RANK_TAIL)
    assert decide(replicas, max_restarts=2).message == "trainer 1 rank 1 failed after 2 restarts: ValueError: bad batch at step 10"
    # Kubernetes words a plain failed container as its exit code (replicas.py): the same message.
    replicas[1] = Observed("trainer", 1, FAILED, exit_code=1, reason="Exit code 1", log_tail=RANK_TAIL)
    assert decide(replicas, max_restarts=0).message == "trainer 1 rank 1 failed: ValueError: bad batch at step 10"


def test_a_rank_that_said_nothing_is_named_with_its_exit_and_a_backend_reason_is_kept() -> None:
    replicas = job([SUCCEEDED, RUNNING], [])
    tail = "[rank 2] step 4\ntrainer 1 rank 2 failed: exit code 137 (SIGKILL — out of memory?)\n"
    replicas[1] = Observed("trainer", 1, FAILED, exit_code=137, log_tail=tail)
    assert decide(replicas, max_restarts=0).message == "trainer 1 rank 2 failed with exit code 137 (SIGKILL — out of memory?)."
    replicas[1] = Observed("trainer", 1, FAILED, exit_code=1, reason="MemoryLimitExceeded: used 2Gi of 2Gi", log_tail=RANK_TAIL)
    assert decide(replicas, max_restarts=0).message == (
        "trainer 1 rank 1 failed with MemoryLimitExceeded: used 2Gi of 2Gi: ValueError: bad batch at step 10"
    )


def test_a_rank_line_of_another_trainer_is_only_quoted_and_a_restart_names_the_rank() -> None:
    replicas = job([FAILED, SUCCEEDED], [])
    replicas[0] = Observed("trainer", 0, FAILED, exit_code=1, log_tail="trainer 1 rank 1 failed: ValueError: x\n")
    assert decide(replicas, max_restarts=0).message == "trainer 0 failed with exit code 1: trainer 1 rank 1 failed: ValueError: x"
    replicas[0] = Observed("trainer", 1, FAILED, exit_code=1, restarts=0, log_tail=RANK_TAIL)
    assert decide(replicas, max_restarts=1).message == (
        "restart 1 of 1: trainer 1 rank 1 failed with exit code 1 (ValueError: bad batch at step 10); all replicas restarting"
    )


def test_a_replica_that_cannot_start_while_the_others_run_is_named_not_training() -> None:
    """A gang trains only whole: with trainer 1 unschedulable (no capacity, a quota) the running
    replicas wait for it, and the job says which replica and why instead of "Training is running";
    it is Pending (issue 46: a PS job whose trainers a quota refused read Running, its pserver up)."""
    unschedulable = Observed("trainer", 1, PENDING, reason="Unschedulable: 0/2 nodes are available: 2 Insufficient cpu.")
    decision = decide([Observed("trainer", 0, RUNNING), unschedulable], max_restarts=0)
    assert (decision.phase, decision.message) == (
        PENDING,
        "trainer 1: Unschedulable: 0/2 nodes are available: 2 Insufficient cpu; the other replicas wait for it.",
    )
    assert decide([Observed("trainer", 0, RUNNING), Observed("trainer", 1, PENDING)], max_restarts=0).message == "Training is running."


def test_a_replica_whose_image_the_node_may_never_pull_fails_the_job_naming_the_image() -> None:
    never = Observed(
        "trainer", 1, PENDING, reason='ErrImageNeverPull: Container image "example.org/paddle:9" is not present with pull policy of Never'
    )
    decision = decide([Observed("trainer", 0, RUNNING), never], max_restarts=0)
    assert decision.phase == FAILED and decision.message == (
        'trainer 1 cannot start: ErrImageNeverPull: Container image "example.org/paddle:9" is not present with pull policy of Never'
    )
    assert sorted(decision.stop) == [("trainer", 0), ("trainer", 1)]  # nothing is left running


def test_a_ps_job_whose_trainers_a_quota_refuses_is_pending_each_trainer_in_its_own_words() -> None:
    """Issue 46: the pserver ran, both trainers' pods were refused by a ResourceQuota, and the job
    read Running while trainer 1's reason quoted trainer 0's pod.  Nothing can train: Pending, and
    each trainer's reason names no other replica's pod."""
    from paddle_nbext_server.backends.kubernetes.lifecycle.reconcile import role_words

    event = 'Error creating: pods "sq-1a2b3c-trainer-0-x7k2p" is forbidden: exceeded quota: team, requested: pods=1, used: pods=4, limited: pods=4'
    reason = f"FailedCreate: {role_words(event)}"
    assert (
        reason
        == "FailedCreate: Error creating: its pod is forbidden: exceeded quota: team, requested: pods=1, used: pods=4, limited: pods=4"
    )
    replicas = [
        Observed("pserver", 0, RUNNING),
        Observed("trainer", 0, PENDING, reason=reason),
        Observed("trainer", 1, PENDING, reason=reason),
    ]
    decision = decide(replicas, max_restarts=0)
    assert decision.phase == PENDING and decision.message == f"trainer 0: {reason.rstrip('.')}; the other replicas wait for it."
