"""paddle-nbext's chart (deploy/chart) installed, upgraded and uninstalled with the pinned Helm on
the real control plane, with the admin guide's commands (Install step 5 and 8, Upgrading step 4,
Uninstalling).  What is checked is what the admin and the notebook then get from the API server:
`kubectl auth can-i` for the notebook's account, the admission policy's refusals of the Jobs the
notebook's token could make, the objects and their uids, and jobs the backend submitted under the
chart's Role and site settings (issue 44)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from support.cluster_cli import ClusterCli
from support.waiting import eventually

from cluster.test_k8s_backend import REPO, home_dir, obj, run, spec
from paddle_nbext_server.backends.base import SubmitRequest
from paddle_nbext_server.backends.kubernetes import KubernetesBackend
from paddle_nbext_server.events import EventHub

if TYPE_CHECKING:
    from cluster.conftest import Cluster

pytestmark = pytest.mark.cluster

RELEASE = "paddle-nbext"
CHART = str(REPO / "deploy" / "chart")
JOB_IMAGE = "registry.local/paddle-job:3.0.0"
#: The label that binds the chart's admission policy to a namespace (admin guide: "Nobody else's pods").
ENFORCED = {"paddle-nbext/jobs-policy": "enforced"}
CEPH_CLUSTER_ID = "4a1c3f9e-7d2b-4c55-9a0e-2f6b1d8c9e10"
CEPH_MONITORS = ["10.0.0.11:6789", "v2:10.0.0.12:3300"]
#: What the backend calls, each as `kubectl auth can-i` asks it: (verb, resource, subresource).
NOTEBOOK_NEEDS = [
    ("create", "jobs.batch", ""),
    ("watch", "jobs.batch", ""),
    ("patch", "jobs.batch", ""),
    ("delete", "jobs.batch", ""),
    ("create", "configmaps", ""),
    ("patch", "configmaps", ""),
    ("create", "services", ""),
    ("get", "pods", ""),
    ("watch", "pods", ""),
    ("get", "pods", "log"),
    ("list", "events", ""),
    ("list", "pods.metrics.k8s.io", ""),
    ("get", "persistentvolumeclaims", ""),
    ("list", "resourcequotas", ""),
]
#: What the notebook's token must not do in its own namespace: pods only through Jobs the policy
#: checks, no Secrets, no rights of its own making, no token of another account.
NOTEBOOK_MUST_NOT = [
    ("create", "pods", ""),
    ("delete", "pods", ""),
    ("get", "secrets", ""),
    ("list", "secrets", ""),
    ("create", "roles.rbac.authorization.k8s.io", ""),
    ("create", "rolebindings.rbac.authorization.k8s.io", ""),
    ("create", "serviceaccounts", "token"),
]


def notebook_user(namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:paddle-notebook"


def master_user(namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:paddle-nbext-master"


@dataclass
class Site:
    """A fresh namespace for the release (labelled for the policy) and the admin's commands."""

    cluster: Cluster
    admin: ClusterCli
    namespace: str
    workdir: Path

    def install(self, *assignments: str) -> str:
        """The admin guide's Install step 5, with the test's job image: one `--set` per assignment."""
        command = ["upgrade", "--install", RELEASE, CHART, "--namespace", self.namespace, "--create-namespace"]
        return self.admin.helm(*command, *set_values(f"site.config.KubernetesBackend.default_image={JOB_IMAGE}", *assignments))

    def may(self, user: str, check: tuple[str, str, str], namespace: str | None = None) -> bool:
        """Whether the API server lets `user` make the call `check` (verb, resource, subresource)."""
        verb, resource, subresource = check
        return self.admin.review(user, verb, resource, namespace or self.namespace, subresource=subresource)

    def await_notebook_role(self) -> None:
        """The API server authorizes from a cache of Roles a moment behind Helm's creates."""
        eventually(lambda: self.may(notebook_user(self.namespace), ("create", "jobs.batch", "")), "the notebook's Role in force")

    def notebook_cli(self) -> ClusterCli:
        """kubectl with a token of the notebook's account, as a notebook pod holds one."""
        token = self.admin.kubectl("create", "token", "paddle-notebook", "--namespace", self.namespace, "--duration=1h").strip()
        return ClusterCli(self.cluster.kubeconfig_with_token(token, self.namespace), self.admin.home)

    def site_settings(self) -> dict[str, Any]:
        """The settings every notebook reads: the chart's site ConfigMap as the API server holds it."""
        config_map = self.admin.get("configmap", "paddle-nbext-site", self.namespace)
        assert config_map is not None, "the site ConfigMap paddle-nbext-site is missing"
        settings: dict[str, Any] = json.loads(config_map["data"]["paddle_nbext_site.json"])
        return settings

    def uids(self, objects: list[dict[str, Any]]) -> dict[str, str | None]:
        """`kind/name` -> the uid the API server has for it now (None: gone)."""
        found = {ref: self.admin.get(resource(o), o["metadata"]["name"], namespace_of(o, self.namespace)) for o, ref in refs(objects)}
        return {ref: (o or {}).get("metadata", {}).get("uid") for ref, o in found.items()}


def set_values(*assignments: str) -> list[str]:
    """`--set key=value` for each assignment, as the admin guide writes them."""
    return [word for assignment in assignments for word in ("--set", assignment)]


def resource(manifest: dict[str, Any]) -> str:
    """What kubectl calls the object's kind, with its API group (`role.rbac.authorization.k8s.io`)."""
    group = manifest["apiVersion"].rpartition("/")[0]
    return f"{manifest['kind'].lower()}.{group}" if group else manifest["kind"].lower()


def namespace_of(manifest: dict[str, Any], release_namespace: str) -> str:
    return str(manifest["metadata"].get("namespace") or release_namespace)


def refs(objects: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    return [(o, f"{o['kind']}/{o['metadata']['name']}") for o in objects]


@pytest.fixture(scope="module")
def admin(module_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> ClusterCli:
    """The admin's helm and kubectl.  Only on the suite's own control plane (`plane` skips
    elsewhere): the chart's admission policy and CSIDriver are cluster-wide with fixed names, and
    another cluster may run paddle-nbext's own release of them."""
    assert module_cluster.plane is not None
    return ClusterCli.for_kubeconfig(module_cluster.admin_kubeconfig(), tmp_path_factory.mktemp("helm-home"))


@pytest.fixture
def site(module_cluster: Cluster, admin: ClusterCli, tmp_path: Path) -> Iterator[Site]:
    """A namespace for one release; the release is uninstalled after the test whatever happened,
    since its admission policy and CSIDriver are cluster-wide and another release makes them next."""
    namespace = module_cluster.new_namespace(labels=ENFORCED)
    yield Site(module_cluster, admin, namespace, tmp_path)
    admin.run("helm", "uninstall", RELEASE, "--namespace", namespace, "--ignore-not-found")


# --- the Jobs the notebook's token could create, as `kubectl create` sends them ------------------

CONTAINER = {"name": "main", "image": JOB_IMAGE, "command": ["python3", "train.py"]}
OURS = {"app.kubernetes.io/managed-by": "paddle-nbext", "paddle-nbext/owner": "alice", "paddle-nbext/role": "trainer"}


def job(name: str, pod: dict[str, Any], labels: dict[str, str] = OURS) -> str:
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [CONTAINER], **pod}}},
    }
    return json.dumps(manifest)


def dry_run_create(cli: ClusterCli, namespace: str, manifest: str) -> tuple[bool, str]:
    """`kubectl create --dry-run=server`: admission policies judge it as a real create; whether it
    was admitted, and kubectl's words."""
    answer = cli.run("kubectl", "create", "--dry-run=server", "--namespace", namespace, "--output", "name", "-f", "-", stdin=manifest)
    return answer.code == 0, (answer.stdout + answer.stderr).strip()


def await_policy(cli: ClusterCli, namespace: str) -> None:
    """The API server compiles a new ValidatingAdmissionPolicy a moment after Helm made it."""
    plain = job("probe", {}, labels={})
    eventually(lambda: not dry_run_create(cli, namespace, plain)[0], "the chart's admission policy in force")


# --- install -------------------------------------------------------------------------------------


def test_install_gives_the_notebooks_account_what_the_backend_needs_and_nothing_more(site: Site) -> None:
    hub = site.cluster.new_namespace()  # the hub's namespace, beside the notebooks'
    site.install()
    release = site.admin.release(RELEASE, site.namespace)
    assert (release["version"], release["info"]["status"]) == (1, "deployed")
    for account in ("paddle-notebook", "paddle-nbext-master"):
        assert site.admin.get("serviceaccount", account, site.namespace) is not None, f"no ServiceAccount {account}"

    site.await_notebook_role()
    notebook = notebook_user(site.namespace)
    guide_checks = [("create", "jobs.batch"), ("get", "pods")]  # Install step 8: `kubectl auth can-i` answers yes
    assert [site.admin.can_i(notebook, verb, what, site.namespace) for verb, what in guide_checks] == [True, True]
    assert {check: site.may(notebook, check) for check in NOTEBOOK_NEEDS} == dict.fromkeys(NOTEBOOK_NEEDS, True)
    assert {check: site.may(notebook, check) for check in NOTEBOOK_MUST_NOT} == dict.fromkeys(NOTEBOOK_MUST_NOT, False)
    elsewhere = [("get", "pods", ""), ("create", "jobs.batch", ""), ("list", "configmaps", "")]
    assert {check: site.may(notebook, check, hub) for check in elsewhere} == dict.fromkeys(elsewhere, False)

    master = master_user(site.namespace)
    # a whole restart remakes the replica Jobs and patches the Service to name the new attempt's pods
    master_needs = [("patch", "jobs.batch", ""), ("create", "jobs.batch", ""), ("watch", "pods", ""), ("patch", "configmaps", "")]
    master_needs.append(("patch", "services", ""))
    assert {check: site.may(master, check) for check in master_needs} == dict.fromkeys(master_needs, True)
    assert not site.may(master, ("create", "pods", "")) and not site.may(master, ("get", "secrets", ""))


def test_the_charts_admission_policy_refuses_other_jobs_made_with_the_notebooks_token(site: Site) -> None:
    site.install()
    site.await_notebook_role()
    notebook = site.notebook_cli()
    await_policy(notebook, site.namespace)

    refusals = {
        "only paddle-nbext jobs run in this namespace": job("plain", {}, labels={}),
        "no hostPath volume": job("host", {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
        "only its owner's home claim, claim-alice": job(
            "theirs", {"volumes": [{"name": "h", "persistentVolumeClaim": {"claimName": "claim-bob"}}]}
        ),
        "runs only the job master": job("token", {"serviceAccountName": "paddle-nbext-master"}),
    }
    for message, manifest in refusals.items():
        admitted, said = dry_run_create(notebook, site.namespace, manifest)
        assert not admitted and "paddle-nbext-jobs" in said and message in said, said
    own_home = {"volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}}]}
    assert dry_run_create(notebook, site.namespace, job("mine", own_home)) == (True, "job.batch/mine")

    unlabelled = site.cluster.new_namespace()  # the policy binds only to labelled namespaces
    assert dry_run_create(site.admin, unlabelled, job("plain", {}, labels={})) == (True, "job.batch/plain")


@pytest.mark.parametrize(
    ("route", "values"),
    [
        ("ceph-csi's chart", ["cephfs.cephConf=false", "cephfs.kmsConfig=false"]),
        ("ceph-csi's manifests", ["cephfs.csiDriver=true"]),
    ],
)
def test_cephfs_values_make_ceph_csis_cluster_objects_with_the_monitors(site: Site, route: str, values: list[str]) -> None:
    """Install step 5's CephFS command (monitors as the guide passes them, comma-separated), and the
    hand-install route of ceph-csi, whose CSIDriver the chart then makes."""
    ceph = site.cluster.new_namespace()  # ceph-csi's, made by ceph-csi's install before this step
    monitors = ",".join(CEPH_MONITORS)
    site.install(
        "cephfs.enabled=true", f"cephfs.clusterID={CEPH_CLUSTER_ID}", f"cephfs.monitors={{{monitors}}}", f"cephfs.namespace={ceph}", *values
    )
    csi_config = site.admin.get("configmap", "ceph-csi-config", ceph)
    assert csi_config is not None, f"{route}: no ceph-csi-config in {ceph}"
    assert json.loads(csi_config["data"]["config.json"]) == [{"clusterID": CEPH_CLUSTER_ID, "monitors": CEPH_MONITORS}]
    ceph_conf = site.admin.get("configmap", "ceph-config", ceph)
    kms = site.admin.get("configmap", "ceph-csi-encryption-kms-config", ceph)
    driver = site.admin.get("csidriver", "cephfs.csi.ceph.com")
    if route == "ceph-csi's chart":  # its chart makes ceph-config, the KMS ConfigMap and the CSIDriver itself
        assert (ceph_conf, kms, driver) == (None, None, None)
        return
    assert ceph_conf is not None and kms is not None and driver is not None
    assert set(ceph_conf["data"]) == {"ceph.conf", "keyring"} and "auth_client_required = cephx" in ceph_conf["data"]["ceph.conf"]
    assert json.loads(kms["data"]["config.json"]) == {}
    assert (driver["spec"]["fsGroupPolicy"], driver["spec"]["attachRequired"]) == ("None", False)


# --- upgrade -------------------------------------------------------------------------------------


def submit_jobs(site: Site, notebook: ClusterCli, home: Path) -> dict[str, str]:
    """What users have in the namespace before an upgrade: a running job and a cancelled one,
    submitted by the backend with the notebook's token and the chart's site settings; their
    phases by name."""

    async def scenario() -> dict[str, str]:
        backend = notebook_backend(site, notebook, home)
        await backend.start()
        try:
            await backend.submit(SubmitRequest(spec("running", trainers=1), "alice", home))
            await backend.submit(SubmitRequest(spec("stopped", trainers=1), "alice", home))
            await backend.cancel("stopped", "alice")
            return {status.name: status.phase for status in await backend.list_jobs("alice")}
        finally:
            await backend.stop()

    return run(scenario())


def listed_jobs(site: Site, notebook: ClusterCli, home: Path) -> dict[str, str]:
    """The jobs a notebook server started now lists (phase by name)."""

    async def scenario() -> dict[str, str]:
        backend = notebook_backend(site, notebook, home)
        await backend.start()
        try:
            return {status.name: status.phase for status in await backend.list_jobs("alice")}
        finally:
            await backend.stop()

    return run(scenario())


def notebook_backend(site: Site, notebook: ClusterCli, home: Path) -> KubernetesBackend:
    """The kubernetes backend as a notebook server makes it: the site ConfigMap's settings, the
    notebook's token."""
    settings = site.site_settings()["KubernetesBackend"]
    return KubernetesBackend(
        events=EventHub(), kubeconfig=notebook.kubeconfig, namespace=site.namespace, home_path=str(home), sync_timeout=60.0, **settings
    )


def job_objects(site: Site) -> list[dict[str, Any]]:
    """The objects the backend made for the jobs, as kubectl lists them: every record, Service and
    Job, and the running job's pods (the cancelled one's go as its Jobs end)."""
    ours = "app.kubernetes.io/managed-by=paddle-nbext"
    listed = site.admin.kubectl("get", "configmaps,services,jobs.batch", "--namespace", site.namespace, "-l", ours, "-o", "json")
    pods = site.admin.kubectl("get", "pods", "--namespace", site.namespace, "-l", f"{ours},paddle-nbext/job={obj('running')}", "-o", "json")
    items: list[dict[str, Any]] = json.loads(listed)["items"] + json.loads(pods)["items"]
    for item in items:
        item["metadata"].setdefault("namespace", site.namespace)
    return items


def test_upgrade_with_changed_values_keeps_every_object_the_notebooks_token_and_the_jobs(site: Site) -> None:
    site.cluster.home_claim(site.namespace, "claim-alice")
    site.install("site.config.KubernetesBackend.home_volume=pvc")
    charted = site.admin.manifest(RELEASE, site.namespace)
    before = site.uids(charted)
    assert None not in before.values(), before
    site.await_notebook_role()
    notebook = site.notebook_cli()
    await_policy(notebook, site.namespace)
    home = home_dir(site.workdir)
    phases = submit_jobs(site, notebook, home)
    assert phases["stopped"] == "Cancelled" and phases["running"] in ("Pending", "Running"), phases
    site.cluster.await_job_pods(site.namespace)
    jobs_before = job_objects(site)
    assert {o["metadata"]["name"] for o in jobs_before if o["kind"] == "Job"} >= {obj("running") + "-trainer", obj("stopped") + "-trainer"}

    new_image = "registry.local/paddle-job:3.1.0"
    upgrade = ["upgrade", RELEASE, CHART, "--namespace", site.namespace, "--reset-then-reuse-values"]  # Upgrading, step 4
    site.admin.helm(*upgrade, *set_values("queues.enabled=true", f"site.config.KubernetesBackend.default_image={new_image}"))

    release = site.admin.release(RELEASE, site.namespace)
    assert (release["version"], release["info"]["status"]) == (2, "deployed")
    settings = site.site_settings()["KubernetesBackend"]
    assert (settings["default_image"], settings["home_volume"]) == (new_image, "pvc"), "the new value, and the one set at install kept"
    assert site.admin.get("role.rbac.authorization.k8s.io", "paddle-nbext-queues", site.namespace) is not None
    eventually(lambda: site.may(notebook_user(site.namespace), ("create", "jobsets.jobset.x-k8s.io", "")), "the queues Role in force")
    assert site.uids(charted) == before, "an upgrade recreated objects of the first install"
    assert site.uids(jobs_before) == {ref: o["metadata"]["uid"] for o, ref in refs(jobs_before)}, "the upgrade touched the jobs' objects"
    listed = listed_jobs(site, notebook, home)  # with the token it had before the upgrade
    assert listed.keys() == phases.keys() and listed["stopped"] == "Cancelled" and listed["running"] in ("Pending", "Running"), listed


# --- uninstall -----------------------------------------------------------------------------------


def test_uninstall_removes_the_charts_objects_and_leaves_homes_keys_and_jobs(site: Site) -> None:
    ceph = site.cluster.new_namespace()
    site.cluster.home_claim(site.namespace, "claim-alice")
    ceph_values = [f"cephfs.namespace={ceph}", f"cephfs.clusterID={CEPH_CLUSTER_ID}", f"cephfs.monitors={{{CEPH_MONITORS[0]}}}"]
    site.install("site.config.KubernetesBackend.home_volume=pvc", "cephfs.enabled=true", "cephfs.csiDriver=true", *ceph_values)
    key_of_home = ["secret", "generic", "ceph-home-alice", "--from-literal=userID=home-alice", "--from-literal=userKey=k"]
    site.admin.kubectl("create", *key_of_home, "--namespace", ceph)  # the home's key, as provision_home.py makes it
    charted = site.admin.manifest(RELEASE, site.namespace)
    site.await_notebook_role()
    notebook = site.notebook_cli()
    await_policy(notebook, site.namespace)
    submit_jobs(site, notebook, home_dir(site.workdir))
    left_by_design = job_objects(site)
    home_claim = site.admin.get("persistentvolumeclaim", "claim-alice", site.namespace)
    assert home_claim is not None and home_claim["status"]["phase"] == "Bound"
    key = site.admin.get("secret", "ceph-home-alice", ceph)
    assert key is not None

    made = site.uids(charted)
    outside_the_namespace = {"ValidatingAdmissionPolicy/paddle-nbext-jobs", "CSIDriver/cephfs.csi.ceph.com", "ConfigMap/ceph-csi-config"}
    assert None not in made.values() and outside_the_namespace <= made.keys(), made

    site.admin.helm("uninstall", RELEASE, "--namespace", site.namespace)

    assert {ref: uid for ref, uid in site.uids(charted).items() if uid} == {}, "helm uninstall left objects of the chart"
    gone = site.admin.run("helm", "status", RELEASE, "--namespace", site.namespace)
    assert gone.code != 0 and "not found" in gone.stderr
    assert site.uids(left_by_design) == {ref: o["metadata"]["uid"] for o, ref in refs(left_by_design)}, "the jobs' objects went too"
    claim_after = site.admin.get("persistentvolumeclaim", "claim-alice", site.namespace)
    assert claim_after is not None and claim_after["metadata"]["uid"] == home_claim["metadata"]["uid"]
    assert site.admin.get("persistentvolume", home_claim["spec"]["volumeName"]) is not None, "the home's PersistentVolume went"
    key_after = site.admin.get("secret", "ceph-home-alice", ceph)
    assert key_after is not None and key_after["metadata"]["uid"] == key["metadata"]["uid"]
    user = notebook_user(site.namespace)
    eventually(lambda: not site.may(user, ("create", "jobs.batch", "")), "the notebook's Role gone: it can submit nothing")
