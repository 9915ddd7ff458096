"""Two users on one hub, isolated, in both namespace recipes (issue 24, item 3).

Alice and Bob each get a notebook pod from the shipped JupyterHub recipe on the real node and run
jobs from it; each sees only their own jobs through paddle-nbext's API (the panel's API).  Then
Bob's code runs *in his notebook pod* (``kubectl exec``, as the notebook's uid, with the pod's own
ServiceAccount token from /var/run/secrets/kubernetes.io/serviceaccount, as any cell can) and asks
the Kubernetes API for Alice's job record, pods, logs and home.  What it gets differs between the
recipes, and each test asserts what its recipe truly guarantees (admin guide: "Where jobs run"):

- **one shared jobs namespace** (the session's hub): every notebook runs as the same
  ``paddle-notebook`` account, so Kubernetes lets Bob's token list Alice's record, pods and logs;
  only paddle-nbext keeps them apart.  The admission policy of deploy/policy/ (installed here, as
  the admin guide says) still refuses Jobs not shaped like paddle-nbext's and a claim other than
  the Job's owner's; but the owner label is the caller's word, so a Job that calls itself Alice's
  may mount Alice's home: the shared namespace does not keep homes apart from user code.
- **one namespace per user** (``PADDLE_NBEXT_HUB_USER_NAMESPACES=1``, a second hub beside the
  first): the API server refuses Bob's token everything in ``paddle-alice``, and Alice's claim is
  not even nameable from ``paddle-bob``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream
from support.hub_site import HubSite
from support.waiting import eventually

from cluster.k8s_objects import meta, present
from cluster.test_k8s_admission_policy import apply_policy, remove_policy
from cluster.test_real_node_jupyterhub import submit, wait_phase, write_code
from paddle_nbext.model.contract import JOB_LABEL
from paddle_nbext_server.backends.kubernetes.build.manifests import object_name

pytestmark = pytest.mark.timeout(1800)

POLICY_LABEL = "paddle-nbext/jobs-policy"
#: What a user's code can do with its pod's token: call the API server with it (standard library
#: only, as in any notebook).  Argument: {name: [method, path, body or None]}; prints one line,
#: PROBE-RESULT {"namespace", "uid", "answers": {name: {"status", "body"}}}.
PROBE = r"""
import json, os, ssl, sys, urllib.error, urllib.request

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(ACCOUNT + "/token").read().strip()
context = ssl.create_default_context(cafile=ACCOUNT + "/ca.crt")


def call(method, path, body):
    request = urllib.request.Request(
        "https://kubernetes.default.svc" + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return {"status": answer.status, "body": answer.read().decode(errors="replace")}
    except urllib.error.HTTPError as error:
        return {"status": error.code, "body": error.read().decode(errors="replace")[-3000:]}


calls = json.loads(sys.argv[1])
answers = {name: call(*args) for name, args in calls.items()}
namespace = open(ACCOUNT + "/namespace").read().strip()
print("PROBE-RESULT " + json.dumps({"namespace": namespace, "uid": os.getuid(), "answers": answers}), flush=True)
"""


def job_script(user: str, secret: str) -> str:
    """A job that prints the user's secret (so its log holds it) and leaves it in the home."""
    return f"""import os
print("{user}'s secret: {secret}", flush=True)
with open(os.path.join(os.environ["HOME"], "secret-{user}.txt"), "w") as out:
    out.write("{secret}\\n")
"""


def run_job(hub: HubSite, user: str, token: str, name: str) -> str:
    """`user` submits a one-trainer job from their notebook through paddle-nbext's API; it succeeds.
    Returns the secret its log and the file it wrote into the home hold."""
    secret = secrets.token_hex(8)
    write_code(hub, user, f"{name}/job.py", job_script(user, secret))
    submit(
        hub,
        user,
        token,
        job_name=name,
        mode="collective",
        trainers=1,
        trainer_cpu="250m",
        entry_point="python job.py",
        trainer_package=name,
    )
    final = wait_phase(hub, user, token, name, {"Succeeded", "Failed", "Cancelled"})
    assert final["phase"] == "Succeeded", final
    assert (hub.homes[user] / f"secret-{user}.txt").read_text().strip() == secret
    log = hub.notebook(user, token, "GET", f"jobs/{name}/logs?role=trainer&index=0")
    assert log.status_code == 200 and secret in log.text, log.text[-1000:]
    return secret


def job_names(hub: HubSite, user: str, token: str) -> set[str]:
    listed = hub.notebook(user, token, "GET", "jobs")
    assert listed.status_code == 200, listed.text
    return {job["name"] for job in listed.json()["jobs"]}


def trainer_pod(hub: HubSite, user: str, name: str) -> str:
    """The name of the job's trainer pod, as an admin sees it."""
    pods = (
        client.CoreV1Api(hub.api)
        .list_namespaced_pod(hub.user_namespace(user), label_selector=f"{JOB_LABEL}={object_name(name, user)},paddle-nbext/role=trainer")
        .items
    )
    assert pods, f"no trainer pod of {user}'s job {name} in {hub.user_namespace(user)}"
    return str(meta(pods[0]).name)


def in_notebook_pod(hub: HubSite, user: str, calls: dict[str, list[Any]]) -> dict[str, Any]:
    """Run PROBE in `user`'s notebook container (``kubectl exec``): user code with the pod's token."""
    core = client.CoreV1Api(client.ApiClient(hub.api.configuration))  # stream() takes over its client's requests
    output = stream(
        core.connect_get_namespaced_pod_exec,
        f"jupyter-{user}",
        hub.user_namespace(user),
        container="notebook",
        command=["python3", "-c", PROBE, json.dumps(calls)],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )
    found = [line for line in str(output).splitlines() if line.startswith("PROBE-RESULT ")]
    assert found, f"the probe in {user}'s notebook pod printed no result:\n{output}"
    result: dict[str, Any] = json.loads(found[-1].removeprefix("PROBE-RESULT "))
    return result


def job_manifest(name: str, owner: str, volumes: list[dict[str, Any]], image: str) -> dict[str, Any]:
    """A Job labelled as paddle-nbext's (owner `owner`) whose pod mounts `volumes` at /data."""
    mounts = [{"name": v["name"], "mountPath": f"/data/{v['name']}"} for v in volumes]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "paddle-nbext", "paddle-nbext/owner": owner, "paddle-nbext/role": "trainer"},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": image, "command": ["cat", "/data/home/secret-alice.txt"], "volumeMounts": mounts}
                    ],
                    "volumes": volumes,
                }
            }
        },
    }


def claim(name: str) -> dict[str, Any]:
    return {"name": "home", "persistentVolumeClaim": {"claimName": name}}


@pytest.fixture(scope="module")
def job_policy(hub: HubSite) -> Iterator[None]:
    """deploy/policy/job-pods-policy.yaml on the real node's API server, as the admin guide says
    (the ValidatingAdmissionPolicy and its binding), the shared namespace labelled for it; the
    user namespaces of the second hub are labelled by the recipe itself."""
    core, batch = client.CoreV1Api(hub.api), client.BatchV1Api(hub.api)
    apply_policy(hub.api)
    core.patch_namespace(hub.namespace, {"metadata": {"labels": {POLICY_LABEL: "enforced"}}})

    def in_force() -> bool:  # the API server compiles a new policy a moment after it is made
        probe = job_manifest("probe", "", [], hub.site.image)
        probe["metadata"]["labels"] = {}
        try:
            batch.create_namespaced_job(hub.namespace, client.V1Job.model_validate(probe), dry_run="All")
        except ApiException as error:
            return error.status in (400, 422) and "only paddle-nbext jobs" in str(error.body)
        return False

    eventually(in_force, "the admission policy in force", seconds=60, interval=0.5)
    try:
        yield
    finally:
        core.patch_namespace(hub.namespace, {"metadata": {"labels": {POLICY_LABEL: None}}})
        remove_policy(hub.api)


def test_in_the_shared_namespace_only_paddle_nbext_keeps_alice_and_bob_apart(hub: HubSite, job_policy: None) -> None:
    hub.start_server("alice")
    hub.start_server("bob")
    alice, bob = hub.user_token("alice"), hub.user_token("bob")
    secret = run_job(hub, "alice", alice, "private")  # admitted by the policy: paddle-nbext's own shape
    ns, record, pod = hub.namespace, object_name("private", "alice"), trainer_pod(hub, "alice", "private")

    # What the panel shows: each user their own jobs only.
    assert "private" in job_names(hub, "alice", alice)
    assert "private" not in job_names(hub, "bob", bob)
    for path in ("jobs/private", "jobs/private/logs?role=trainer&index=0", "jobs/private/metrics"):
        answer = hub.notebook("bob", bob, "GET", path)
        assert answer.status_code == 404, f"bob GET {path}: {answer.status_code} {answer.text[:300]}"
        assert secret not in answer.text

    # Bob's code in his pod, with the token every notebook of the namespace shares.
    image = hub.site.image
    probe = in_notebook_pod(
        hub,
        "bob",
        {
            "records": ["GET", f"/api/v1/namespaces/{ns}/configmaps?labelSelector={JOB_LABEL}%3D{record}", None],
            "pods": ["GET", f"/api/v1/namespaces/{ns}/pods?labelSelector={JOB_LABEL}%3D{record}", None],
            "log": ["GET", f"/api/v1/namespaces/{ns}/pods/{pod}/log", None],
            "pod": [
                "POST",
                f"/api/v1/namespaces/{ns}/pods?dryRun=All",
                {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "x", "image": image}]}},
            ],
            "plain": [
                "POST",
                f"/apis/batch/v1/namespaces/{ns}/jobs?dryRun=All",
                {**job_manifest("plain", "bob", [], image), "metadata": {"name": "plain"}},
            ],
            "host": [
                "POST",
                f"/apis/batch/v1/namespaces/{ns}/jobs?dryRun=All",
                job_manifest("host", "bob", [{"name": "home", "hostPath": {"path": str(hub.homes["alice"])}}], image),
            ],
            "theirs": [
                "POST",
                f"/apis/batch/v1/namespaces/{ns}/jobs?dryRun=All",
                job_manifest("theirs", "bob", [claim("claim-alice")], image),
            ],
            "as-alice": [
                "POST",
                f"/apis/batch/v1/namespaces/{ns}/jobs?dryRun=All",
                job_manifest("as-alice", "alice", [claim("claim-alice")], image),
            ],
        },
    )
    answers = probe["answers"]
    assert (probe["namespace"], probe["uid"]) == (ns, 1000), probe
    # Kubernetes does not keep them apart: one ServiceAccount for every notebook of the namespace.
    assert answers["records"]["status"] == 200 and record in answers["records"]["body"], answers["records"]
    assert answers["pods"]["status"] == 200 and pod in answers["pods"]["body"], answers["pods"]
    assert answers["log"]["status"] == 200 and secret in answers["log"]["body"], answers["log"]
    # The Role gives no pods of one's own making; the policy refuses Jobs of other shapes and claims.
    assert answers["pod"]["status"] == 403, answers["pod"]
    assert answers["plain"]["status"] in (400, 422) and "only paddle-nbext jobs run in this namespace" in answers["plain"]["body"], answers[
        "plain"
    ]
    assert answers["host"]["status"] in (400, 422) and "no hostPath volume" in answers["host"]["body"], answers["host"]
    theirs = answers["theirs"]
    assert theirs["status"] in (400, 422) and "only its owner's home claim, claim-bob, not another claim" in theirs["body"], theirs
    # ... but the owner label is the caller's word: a Job calling itself Alice's mounts her home.
    assert answers["as-alice"]["status"] == 201, answers["as-alice"]
    hub.stop_server("bob")
    hub.stop_server("alice")


def test_in_per_user_namespaces_the_api_server_keeps_alice_and_bob_apart(hub_user_namespaces: HubSite, job_policy: None) -> None:
    hub = hub_user_namespaces
    core = client.CoreV1Api(hub.api)
    hub.start_server("alice")
    hub.start_server("bob")
    for user in ("alice", "bob"):
        namespace = core.read_namespace(hub.user_namespace(user))
        assert (meta(namespace).labels or {}).get(POLICY_LABEL) == "enforced", meta(namespace).labels
        notebook = core.read_namespaced_pod(f"jupyter-{user}", hub.user_namespace(user))
        notebook_spec = present(notebook.spec, "spec")
        assert notebook_spec.service_account_name == "paddle-notebook" and notebook_spec.node_name in hub.site.node_names
    alice, bob = hub.user_token("alice"), hub.user_token("bob")

    # Both users' jobs run, each in the user's own namespace, into the user's own home (names of
    # their own: the shared hub's Alice has a job "private" of the same object name in its namespace).
    secret = run_job(hub, "alice", alice, "diary")
    run_job(hub, "bob", bob, "own")
    for user, name in (("alice", "diary"), ("bob", "own")):
        placed = {
            meta(p).namespace for p in core.list_pod_for_all_namespaces(label_selector=f"{JOB_LABEL}={object_name(name, user)}").items
        }
        assert placed == {hub.user_namespace(user)}, (user, placed)
    assert job_names(hub, "alice", alice) == {"diary"}
    assert job_names(hub, "bob", bob) == {"own"}
    answer = hub.notebook("bob", bob, "GET", "jobs/diary")
    assert answer.status_code == 404, answer.text

    theirs, own = hub.user_namespace("alice"), hub.user_namespace("bob")
    pod, image = trainer_pod(hub, "alice", "diary"), hub.site.image
    probe = in_notebook_pod(
        hub,
        "bob",
        {
            "records": ["GET", f"/api/v1/namespaces/{theirs}/configmaps", None],
            "record": ["GET", f"/api/v1/namespaces/{theirs}/configmaps/{object_name('diary', 'alice')}", None],
            "pods": ["GET", f"/api/v1/namespaces/{theirs}/pods", None],
            "log": ["GET", f"/api/v1/namespaces/{theirs}/pods/{pod}/log", None],
            "job-there": [
                "POST",
                f"/apis/batch/v1/namespaces/{theirs}/jobs?dryRun=All",
                job_manifest("there", "alice", [claim("claim-alice")], image),
            ],
            "her-claim-here": ["GET", f"/api/v1/namespaces/{own}/persistentvolumeclaims/claim-alice", None],
            "new-claim": [
                "POST",
                f"/api/v1/namespaces/{own}/persistentvolumeclaims?dryRun=All",
                {
                    "metadata": {"name": "claim-alice"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                },
            ],
            "volumes": ["GET", "/api/v1/persistentvolumes", None],
            "theirs": [
                "POST",
                f"/apis/batch/v1/namespaces/{own}/jobs?dryRun=All",
                job_manifest("theirs", "bob", [claim("claim-alice")], image),
            ],
            "own-jobs": ["GET", f"/apis/batch/v1/namespaces/{own}/jobs", None],
        },
    )
    answers = probe["answers"]
    assert (probe["namespace"], probe["uid"]) == (own, 1000), probe
    denied = f"system:serviceaccount:{own}:paddle-notebook"
    for name in ("records", "record", "pods", "log", "job-there"):  # Alice's namespace: nothing at all
        assert answers[name]["status"] == 403 and denied in answers[name]["body"], (name, answers[name])
        assert secret not in answers[name]["body"]
    # Her home: a claim lives in its namespace, so from Bob's there is none to name, nor a way to make one.
    assert answers["her-claim-here"]["status"] == 404, answers["her-claim-here"]
    assert answers["new-claim"]["status"] == 403, answers["new-claim"]
    assert answers["volumes"]["status"] == 403, answers["volumes"]
    assert answers["theirs"]["status"] in (400, 422) and "claim-bob, not another claim" in answers["theirs"]["body"], answers["theirs"]
    # His own namespace still works for him: his job's objects are there.
    assert answers["own-jobs"]["status"] == 200 and object_name("own", "bob") in answers["own-jobs"]["body"], answers["own-jobs"]
