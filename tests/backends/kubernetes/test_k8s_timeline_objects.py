"""The Kubernetes timeline's entries from synthetic objects: each kind, the words of each event,
the objects' own times, and one key where two sources say the same thing."""

from __future__ import annotations

import json
from typing import Any

from support.k8s_timeline_objects import CREATED, KEY, RECORD_UID, event, pod, record, workload

from paddle_nbext_server.backends.kubernetes.timeline import objects as timeline_objects
from paddle_nbext_server.backends.kubernetes.timeline.objects import Derived, derive


def by_key(found: list[Derived]) -> dict[str, Derived]:
    keyed: dict[str, Derived] = {}
    for entry in found:
        keyed.setdefault(entry.key, entry)
    return keyed


def one(found: list[Derived], prefix: str) -> Derived:
    matching = [entry for entry in found if entry.key.startswith(prefix)]
    assert len(matching) == 1, f"one entry {prefix}* expected, got {matching}"
    return matching[0]


def test_the_record_says_submitted_each_restart_with_its_cause_and_the_end_at_its_own_times() -> None:
    found = derive(
        record(
            resumed_from={"job": "mnist-old", "step": 40},
            restart={
                "attempt": 2,
                "failures": 2,
                "message": "restart 2 of 3: trainer 1 failed with exit code 3; all replicas restarting",
                "began": 1796479500.0,
            },
            final={"phase": "Failed", "message": "trainer 1 failed: Exit code 3", "finished": "2026-12-05T15:00:00Z"},
        ),
        [],
    )
    keyed = by_key(found)
    assert keyed["submitted"].t == "2026-12-05T14:00:00.000Z"
    assert keyed["submitted"].text == "Submitted to resume job mnist-old from step 40."
    restart = keyed["restart:2"]
    assert restart.kind == "restart"
    assert restart.text == "Restart 2 of 3: trainer 1 failed with exit code 3; all replicas restarting."
    assert restart.t == "2026-12-05T14:05:00.000Z"  # the record's `began`, not now
    assert keyed["ended"].kind == "ended"
    assert keyed["ended"].text == "Failed: trainer 1 failed: Exit code 3"
    assert keyed["ended"].t == "2026-12-05T15:00:00.000Z"


def test_a_replica_is_scheduled_on_its_node_started_and_ended_at_the_pods_times() -> None:
    finished = pod(
        "trainer",
        0,
        uid="pod-00001",
        node="node-b",
        scheduled="2026-12-05T14:00:05Z",
        phase="Succeeded",
        terminated={"exitCode": 0, "startedAt": "2026-12-05T14:00:09Z", "finishedAt": "2026-12-05T14:20:00Z"},
    )
    found = by_key(derive(record(), [finished]))
    assert found["scheduled:pod-00001"].text == "trainer 0 scheduled on node node-b."
    assert found["scheduled:pod-00001"].t == "2026-12-05T14:00:05.000Z"
    assert (found["scheduled:pod-00001"].role, found["scheduled:pod-00001"].index) == ("trainer", 0)
    assert found["started:pod-00001"].text == "trainer 0 started on node node-b."
    assert found["started:pod-00001"].t == "2026-12-05T14:00:09.000Z"
    assert found["ended:pod-00001"].kind == "replica_ended"
    assert found["ended:pod-00001"].text == "trainer 0 finished."
    assert found["ended:pod-00001"].t == "2026-12-05T14:20:00.000Z"


def test_oomkilled_is_said_in_words_with_the_limit() -> None:
    killed = pod(
        "trainer",
        1,
        uid="pod-00002",
        phase="Failed",
        limit="2Gi",
        terminated={"exitCode": 137, "reason": "OOMKilled", "startedAt": "2026-12-05T14:00:09Z", "finishedAt": "2026-12-05T14:03:00Z"},
    )
    entry = by_key(derive(record(), [killed]))["ended:pod-00002"]
    assert entry.text == "trainer 1 was killed for running out of memory (OOMKilled, limit 2Gi)."
    assert entry.t == "2026-12-05T14:03:00.000Z"


def test_a_failure_says_the_exit_and_a_stop_by_sigterm_says_nothing() -> None:
    failed = pod("trainer", 0, uid="pod-00003", phase="Failed", terminated={"exitCode": 3, "finishedAt": "2026-12-05T14:03:00Z"})
    stopped = pod("trainer", 1, uid="pod-00004", phase="Failed", terminated={"exitCode": 143, "finishedAt": "2026-12-05T14:03:01Z"})
    found = by_key(derive(record(), [failed, stopped]))
    assert found["ended:pod-00003"].text == "trainer 0 failed: Exit code 3."
    assert "ended:pod-00004" not in found


def test_an_unschedulable_pod_and_the_schedulers_event_share_one_key() -> None:
    waiting = pod("trainer", 0, uid="pod-00005", scheduled=None, unschedulable="2026-12-05T14:00:02Z", phase="Pending")
    failed_scheduling = event(
        "FailedScheduling", waiting, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", first="2026-12-05T14:00:02Z"
    )
    found = derive(record(), [waiting], [failed_scheduling])
    same = [entry for entry in found if entry.key == "unschedulable:pod-00005"]
    assert len(same) == 2  # both sources say it; the writer keeps the first of one key
    assert {entry.kind for entry in same} == {"waiting"}
    assert all("cannot be scheduled yet: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu." in entry.text for entry in same)


def test_the_pods_events_in_words() -> None:
    running = pod("trainer", 0, uid="pod-00006", started="2026-12-05T14:00:09Z")
    gone = {"metadata": {"name": f"{KEY}-trainer-1-zzzzz", "uid": "pod-gone"}}
    events = [
        event("FailedMount", running, 'MountVolume.SetUp failed for volume "home": permission denied', first="2026-12-05T14:00:06Z"),
        event("Evicted", gone, "The node was low on resource: memory.", first="2026-12-05T14:10:00Z"),
        event("Preempted", running, "Preempted by pod urgent on node node-a", first="2026-12-05T14:11:00Z", kind="Normal"),
        event("BackOff", running, "Back-off restarting failed container", first="2026-12-05T14:12:00Z"),
        event("FailedMount", running, "an earlier job's", first="2026-12-05T13:00:00Z", uid="ev-old"),
    ]
    found = timeline_objects.event_entries(events, [running], CREATED)
    texts = {entry.key: (entry.kind, entry.text, entry.t, entry.role, entry.index) for entry in found}
    assert texts["mount:pod-00006"] == (
        "warning",
        'trainer 0 cannot mount its volumes: MountVolume.SetUp failed for volume "home": permission denied.',
        "2026-12-05T14:00:06.000Z",
        "trainer",
        0,
    )
    # A pod already gone is named by its name; an eviction and a preemption share the pod's key.
    assert texts["disrupted:pod-gone"] == (
        "warning",
        "trainer 1 was evicted: The node was low on resource: memory.",
        "2026-12-05T14:10:00.000Z",
        "trainer",
        1,
    )
    assert texts["disrupted:pod-00006"][1] == "trainer 0 was preempted: Preempted by pod urgent on node node-a."
    assert len(found) == 3, found  # BackOff is not one that matters; the event before the record is not this job's


def test_evicted_preempted_and_lost_pods_say_so_from_their_own_status() -> None:
    evicted = pod(
        "trainer",
        0,
        uid="pod-00007",
        phase="Failed",
        reason="Evicted",
        message="The node was low on resource: memory.",
        conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet", "lastTransitionTime": "2026-12-05T14:30:00Z"}
        ],
        terminated={"exitCode": 137, "finishedAt": "2026-12-05T14:30:02Z"},
    )
    preempted = pod(
        "trainer",
        1,
        uid="pod-00008",
        conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "lastTransitionTime": "2026-12-05T14:31:00Z"}
        ],
        started="2026-12-05T14:00:09Z",
    )
    lost = pod(
        "trainer",
        2,
        uid="pod-00009",
        node="node-c",
        conditions=[
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-12-05T14:31:40Z"},
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByTaintManager",
                "lastTransitionTime": "2026-12-05T14:32:00Z",
            },
        ],
        started="2026-12-05T14:00:09Z",
    )
    found = by_key(derive(record(trainers=3), [evicted, preempted, lost]))
    assert found["disrupted:pod-00007"].text == "trainer 0 was evicted by the kubelet of node node-a: The node was low on resource: memory."
    assert found["disrupted:pod-00007"].t == "2026-12-05T14:30:00.000Z"
    assert "ended:pod-00007" not in found  # the eviction says how it ended
    assert found["disrupted:pod-00008"].text == "trainer 1 was preempted by a higher-priority pod."
    assert found["disrupted:pod-00009"].text == "Node node-c stopped responding; trainer 2 lost."
    assert all(found[key].kind == "warning" for key in ("disrupted:pod-00007", "disrupted:pod-00008", "disrupted:pod-00009"))


def test_kueue_says_queued_why_it_waits_admitted_and_preempted_each_transition_once() -> None:
    waiting = workload(
        [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 4 more needed",
                "lastTransitionTime": "2026-12-05T14:00:02Z",
            }
        ]
    )
    admitted = workload(
        [
            {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-12-05T14:05:00Z"},
            {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-12-05T14:05:00Z"},
        ],
        cluster_queue="cq-cpu",
    )
    preempted = workload(
        [
            {"type": "Admitted", "status": "False", "lastTransitionTime": "2026-12-05T14:40:00Z"},
            {"type": "Evicted", "status": "True", "reason": "Preempted", "lastTransitionTime": "2026-12-05T14:40:00Z"},
            {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "lastTransitionTime": "2026-12-05T14:40:00Z"},
        ]
    )
    seen = [*derive(record(), [], workloads=[("trainer", waiting)]), *derive(record(), [], workloads=[("trainer", admitted)])]
    seen += derive(record(), [], workloads=[("trainer", preempted)])
    keyed = by_key(seen)
    assert keyed["queued:wl-1"].text == "The trainers: queued in team-a."
    waited = one(seen, "waiting:wl-1:")
    assert waited.kind == "waiting"
    assert waited.text.startswith("The trainers: waiting for quota: couldn't assign flavors")
    assert waited.t == "2026-12-05T14:00:02.000Z"
    assert one(seen, "admitted:wl-1:").text == "The trainers: admitted by cluster queue cq-cpu."
    evicted = one(seen, "evicted:wl-1:")
    assert evicted.kind == "warning"
    assert evicted.text == "The trainers: preempted by a higher-priority workload; queued again in team-a."
    assert evicted.t == "2026-12-05T14:40:00.000Z"


def test_a_jobset_workload_speaks_for_the_whole_job() -> None:
    admitted = workload([{"type": "Admitted", "status": "True", "lastTransitionTime": "2026-12-05T14:05:00Z"}], cluster_queue="cq")
    assert one(derive(record(), [], workloads=[("job", admitted)]), "admitted:").text == "Admitted by cluster queue cq."


def test_volcano_says_why_the_gang_waits_and_when_it_is_placed() -> None:
    group: dict[str, Any] = {
        "metadata": {"name": KEY, "uid": "pg-1", "creationTimestamp": "2026-12-05T14:00:01Z"},
        "spec": {"minMember": 3, "queue": "default"},
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "message": "3/3 tasks in gang unschedulable",
                    "lastTransitionTime": "2026-12-05T14:00:03Z",
                },
                {"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-12-05T14:02:00Z"},
            ],
        },
    }
    found = derive(record(), [], pod_group=group)
    assert one(found, "gang-waiting:").text == "Waiting for the volcano scheduler: 3/3 tasks in gang unschedulable."
    placed = one(found, "gang-admitted:")
    assert (placed.kind, placed.text, placed.t) == (
        "admitted",
        "Admitted by the volcano scheduler: all 3 replicas placed together.",
        "2026-12-05T14:02:00.000Z",
    )


def test_resumed_from_a_checkpoint_at_the_first_start_of_the_attempt() -> None:
    pods = [
        pod("trainer", 0, uid="pod-00010", attempt=1, started="2026-12-05T14:10:09Z"),
        pod("trainer", 1, uid="pod-00011", attempt=1, started="2026-12-05T14:10:07Z"),
        pod("trainer", 0, uid="pod-00012", attempt=0, started="2026-12-05T14:00:07Z"),
    ]
    entry = by_key(derive(record(), pods, resumed=("1.", "resumed from step 40")))["resumed:1."]
    assert (entry.kind, entry.text, entry.t) == ("resumed", "Every replica resumes from step 40.", "2026-12-05T14:10:07.000Z")


def test_pods_of_an_earlier_job_of_the_same_name_are_not_this_ones() -> None:
    other = pod("trainer", 0, uid="pod-00013", started="2026-12-05T13:00:00Z")
    other["metadata"]["labels"]["paddle-nbext/record-uid"] = "another-record"
    assert RECORD_UID != "another-record"
    assert not [entry for entry in derive(record(), [other]) if entry.key.endswith("pod-00013")]


def test_damaged_objects_lose_their_entries_only() -> None:
    broken = record(restart={"attempt": "two", "began": "soon"}, final={"phase": "Failed", "finished": "never"})
    broken["metadata"]["annotations"]["paddle-nbext/restart"] = json.dumps({"attempt": 1, "began": 1e300, "message": "x"})
    odd = pod("trainer", 0, uid="pod-00014", scheduled="not a time", started="later")
    odd["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": None, "finishedAt": "2026-12-05T14:00:30Z"}}
    found = by_key(derive(broken, [odd], [{"reason": "FailedMount", "involvedObject": {"kind": "Pod"}, "firstTimestamp": "bad"}]))
    assert sorted(found) == ["ended", "ended:pod-00014", "submitted"]
    assert found["ended"].t == "2026-12-05T14:00:00.000Z"  # no readable end time: the record's creation


def test_pods_that_cannot_be_created_are_said_once_per_job() -> None:
    def failed_create(first: str, uid: str = "job-uid-1") -> dict[str, Any]:
        return {
            "metadata": {"name": f"{KEY}-trainer.{first}", "uid": f"ev-{first}"},
            "involvedObject": {"kind": "Job", "name": f"{KEY}-trainer", "uid": uid},
            "reason": "FailedCreate",
            "message": 'Error creating: pods "x" is forbidden: exceeded quota: team, requested: limits.cpu=4, used: limits.cpu=8, limited: limits.cpu=8',
            "firstTimestamp": first,
        }

    found = derive(record(), [], job_events=[failed_create("2026-12-05T14:00:02Z"), failed_create("2026-12-05T14:00:30Z")])
    created = [entry for entry in found if entry.key == "failedcreate:job-uid-1"]
    assert {entry.kind for entry in created} == {"warning"}
    assert created[0].text.startswith('The trainers\' pods cannot be created: Error creating: pods "x" is forbidden: exceeded quota')
    earlier = derive(record(), [], job_events=[failed_create("2026-12-05T13:00:00Z", "old")])  # before this record: an earlier job's
    assert not [entry for entry in earlier if entry.key.startswith("failedcreate:")]
