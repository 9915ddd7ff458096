"""The admin guide's install, run as written (issue 44): from an empty namespace to a user's first
distributed job on their CephFS home, with nothing made that the guide does not tell the admin to make.

Each bash block of docs/admin-guide.md's "JupyterHub on Kubernetes" is read from the Markdown
(``support/admin_guide.py``) and run with the shell variables of the guide's table filled in:

1. the wheel, 2. the two images: run by the suite's image pipeline, which takes both from the
   guide (``hub_site.clone_wheel`` runs step 1's commands; the builds take step 2's folders, tags
   and build arguments) and caches them by their inputs;
3. the push: no registry here; each node's containerd is given the images instead (what a pull
   would leave there);
4. ceph-csi's chart cannot be fetched here: the session's Ceph site stands in for it (the node
   plugin honouring ceph-csi's contract, its CSIDriver and ``ceph-config``);
5. paddle-nbext's chart: both blocks, in order (a site without CephFS homes, then with them), each
   with the ``--set`` of this site's own values the guide asks for (the nodes' placement);
6. the user's home, as on a Ceph admin host (Debian's ``python3``, the admin's ``ceph.conf``);
7. Zero to JupyterHub's chart cannot be fetched here: the plain JupyterHub + KubeSpawner block
   runs instead, in the real node's network namespace, with the site's own additions (an
   authenticator, the addresses; ``PADDLE_NBEXT_HUB_EXTRA_CONFIG``);
8. the check, whose answers must be ``yes``.

Then the user logs in, writes a training script in her notebook, submits a 2-trainer job that
trains to the end and saves its model into her home; and "Uninstalling" runs and leaves the home.
A new step, or a changed one the suite does not know how to run, fails the test by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from support import admin_guide
from support.admin_guide import Block
from support.ceph import homes
from support.ceph.site import CephSite
from support.controlplane.build import find_binaries, helm_binary
from support.controlplane.images import REGISTRY, base_image
from support.controlplane.notebook_image import notebook_image
from support.hub_site import HubSite, clone_wheel, hub_version
from support.waiting import eventually

from cluster.k8s_objects import present
from cluster.test_real_node_jupyterhub import TINY_MODEL, submit, wait_phase
from paddle_nbext_server.backends.kubernetes.build.manifests import owner_label

if TYPE_CHECKING:
    from cluster.conftest import RealCluster

pytestmark = pytest.mark.timeout(1800)

USER = "gina"  # this module's user only
PORTS = (8300, 8381, 8301)  # public, hub API, proxy API: beside the session's hubs
DEBIAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
#: The steps the suite cannot run here, and what each must still say (a change fails the test).
NOT_RUN = {
    3: ("buildah push ", "no registry here: each node's containerd is given the two images instead"),
    4: ("helm upgrade --install ceph-csi-cephfs ", "ceph-csi's chart cannot be fetched here: the Ceph site's node plugin stands in"),
}
Z2JH = "helm upgrade --install jhub jupyterhub/jupyterhub "


@dataclass
class Admin:
    """The admin's shell: helm and kubectl on the PATH with the admin's kubeconfig, the guide's
    variables, the clone as the working directory."""

    env: dict[str, str]

    def run(self, block: Block | str, extra_env: Mapping[str, str] | None = None) -> str:
        text = block.text if isinstance(block, Block) else block
        env = {**self.env, **(extra_env or {})}
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + text], cwd=admin_guide.REPO, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, (
            f"the guide's block failed (exit {done.returncode}):\n{text}\n{done.stderr.strip() or done.stdout.strip()}"
        )
        return done.stdout


def with_site_values(block: Block, *assignments: str) -> str:
    """`block`'s one command, with `--set-json` of this site's own values at its end (the guide:
    "add a `--set` for each one you change")."""
    command = block.text.rstrip("\n")
    assert "\n" not in command.replace("\\\n", ""), f"step {block.step} holds more than one command:\n{command}"
    return command + "".join(f" --set-json {json.dumps(a)}" for a in assignments) + "\n"


def admin_shell(kubeconfig: str, workdir: Path, values: Mapping[str, str]) -> Admin:
    tools = workdir / "bin"
    tools.mkdir()
    binaries = find_binaries()
    assert binaries is not None, "kubectl is not built: bash scripts/controlplane.sh build"
    (tools / "kubectl").symlink_to(binaries["kubectl"])
    (tools / "helm").symlink_to(helm_binary())
    helm_home = {f"HELM_{kind}_HOME": str(workdir / "helm" / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}
    path = f"{tools}{os.pathsep}{os.environ['PATH']}"
    return Admin({**os.environ, **helm_home, **values, "PATH": path, "KUBECONFIG": kubeconfig, "NO_COLOR": "1"})


def ceph_admin_host(ceph_site: CephSite, admin: Admin) -> dict[str, str]:
    """Step 6 runs on a Ceph admin host: Debian's python3 (with python3-cephfs) first on the PATH,
    the admin's ceph.conf where Ceph's tools look for it."""
    tools = admin.env["PATH"].split(os.pathsep)[0]
    return {"PATH": f"{tools}{os.pathsep}{DEBIAN_PATH}", "CEPH_CONF": str(ceph_site.cluster.paths.conf)}


@pytest.fixture
def guide_site(real_cluster: RealCluster, ceph_site: CephSite, tmp_path: Path) -> Iterator[tuple[Admin, HubSite, dict[str, str]]]:
    site = real_cluster.node
    if site.node is None:
        pytest.skip("the guide's install runs on the suite's own real nodes (its hub runs in a node's network namespace)")
    api = real_cluster.api_client()
    csi_config = ceph_site.config_map("ceph-csi-config")
    monitors = json.loads(csi_config["data"]["config.json"])[0]["monitors"]
    wheel = clone_wheel(site.node.root.parent / "hub")  # step 1, as written
    notebook = notebook_image(wheel, hub_version())  # step 2, as written
    values = {
        "NAMESPACE": f"guide-{secrets.token_hex(3)}",
        "REGISTRY": REGISTRY,
        "BASE_IMAGE": base_image().reference,
        "VERSION": notebook.reference.rpartition(":")[2],
        "JUPYTERHUB_VERSION": hub_version(),
        "CEPH_CLUSTER_ID": ceph_site.cluster.fsid,
        "CEPH_MONITORS": ",".join(monitors),
        "HUB_USER": USER,
    }
    site.import_image(notebook)  # step 3's stand-in (the job image is every node's from its start)
    admin = admin_shell(real_cluster.admin_kubeconfig(), tmp_path, values)
    hub = HubSite(site, api, values["NAMESPACE"], tmp_path / "hub", image=notebook.reference, ports=PORTS)
    hub.workdir.mkdir()
    hub.hub_kubeconfig = hub.through_the_node(real_cluster.admin_kubeconfig())  # the hub's credentials: the admin's
    try:
        yield admin, hub, values
    finally:
        hub.stop()
        core = client.CoreV1Api(api)
        with contextlib.suppress(ApiException):
            core.delete_namespace(values["NAMESPACE"])
        with contextlib.suppress(ApiException):
            core.delete_persistent_volume(f"cephfs-home-{values['NAMESPACE']}-{USER}")
        with contextlib.suppress(ApiException):
            core.delete_namespaced_secret(f"ceph-{homes.CLIENT_PREFIX}{USER}", homes.CSI_NAMESPACE)
        admin.run(f"helm uninstall paddle-nbext --namespace {values['NAMESPACE']} --ignore-not-found\n")
        with contextlib.suppress(ApiException):  # the session's ceph-csi objects, for the CephFS tests after this one
            core.delete_namespaced_config_map("ceph-csi-config", homes.CSI_NAMESPACE)
        ceph_site.apply_cluster_objects()
        ceph_site.configure_nodes()
        shutil.rmtree(tmp_path / "bin", ignore_errors=True)


def run_install(admin: Admin, hub: HubSite, ceph_site: CephSite, values: Mapping[str, str]) -> list[str]:
    """Every install block, in order; what each step's check printed."""
    placement = hub.site.placement()
    site_values = [f"site.config.KubernetesBackend.{name}={json.dumps(value)}" for name, value in placement.items()]
    printed = []
    for block in admin_guide.install_blocks():
        first = block.text.lstrip()
        if block.step in (1, 2):
            continue  # run by the image pipeline (the fixture), from this same text
        if block.step in NOT_RUN:
            expected, _why = NOT_RUN[block.step]
            assert all(line.startswith(expected) for line in block.text.splitlines() if line and not line.startswith(" ")), block.text
        elif block.step == 5:
            if block.cephfs:  # the chart makes ceph-csi's cluster ConfigMap now: the stand-in's goes
                ceph_site_config_map_handover(ceph_site)
            admin.run(with_site_values(block, *site_values))
            if block.cephfs:
                ceph_site.configure_nodes()  # what the kubelet does with ceph-csi's changed ConfigMap
        elif block.step == 6:
            admin.run(block, ceph_admin_host(ceph_site, admin))
        elif block.step == 7 and first.startswith(Z2JH):
            assert "-f deploy/jupyterhub/values.yaml" in block.text, block.text
        elif block.step == 7:
            hub.start(block.text, dict(values))
        elif block.step == 8:
            printed.append(admin.run(block))
        else:
            pytest.fail(f"the admin guide's install step {block.step} ({block.title}) is new to this test:\n{block.text}")
    return printed


def ceph_site_config_map_handover(ceph_site: CephSite) -> None:
    """The Ceph site's own ``ceph-csi-config`` removed, so that the chart's takes its place (Helm
    adopts no object it did not make)."""
    ceph_site.plane.api("DELETE", f"/api/v1/namespaces/{homes.CSI_NAMESPACE}/configmaps/ceph-csi-config")


def contents(hub: HubSite, token: str, path: str, body: dict[str, Any] | None = None) -> requests.Response:
    """Jupyter's contents API in the user's notebook pod, as the file browser and editor use it."""
    method = "PUT" if body is not None else "GET"
    url = f"{hub.url}/user/{USER}/api/contents/{path}"
    return requests.request(method, url, json=body, headers={"Authorization": f"token {token}"}, timeout=60)


def test_the_admin_guides_install_runs_as_written_to_a_users_first_job_on_her_cephfs_home(
    guide_site: tuple[Admin, HubSite, dict[str, str]], ceph_site: CephSite
) -> None:
    admin, hub, values = guide_site
    namespace = values["NAMESPACE"]
    core = client.CoreV1Api(hub.api)
    with contextlib.suppress(ApiException):
        core.read_namespace(namespace)
        pytest.fail(f"{namespace} exists before the install: the guide's steps must start from nothing")

    printed = run_install(admin, hub, ceph_site, values)
    assert [line.strip() for line in "".join(printed).splitlines()] == ["yes", "yes"], printed

    # The user logs in; the hub spawns her notebook pod with the chart's account and her home.
    hub.homes[USER] = Path(homes.HOMES_ROOT) / USER
    hub.start_server(USER)
    token = hub.user_token(USER)
    pod = present(core.read_namespaced_pod(f"jupyter-{USER}", namespace).spec, "spec")
    assert pod.service_account_name == "paddle-notebook"
    claims = {v.persistent_volume_claim.claim_name for v in present(pod.volumes, "volumes") if v.persistent_volume_claim}
    assert claims == {f"claim-{USER}"}
    bound = present(core.read_namespaced_persistent_volume_claim(f"claim-{USER}", namespace).spec, "spec").volume_name
    assert bound == f"cephfs-home-{namespace}-{USER}"

    # She writes a training script in her notebook and submits it as a 2-trainer job.
    assert contents(hub, token, "tiny", {"type": "directory"}).status_code in (200, 201)
    written = contents(hub, token, "tiny/train.py", {"type": "file", "format": "text", "content": TINY_MODEL})
    assert written.status_code in (200, 201), written.text[:500]
    fields = {"job_name": "first", "mode": "collective", "trainers": 2, "trainer_cpu": "500m", "entry_point": "python train.py"}
    submit(hub, USER, token, **fields, trainer_package="tiny")
    final = wait_phase(hub, USER, token, "first", {"Succeeded", "Failed", "Cancelled"})
    assert final["phase"] == "Succeeded", final

    # The model is in her CephFS home, hers, and her notebook sees it.
    saved = f"{homes.HOMES_ROOT}/{USER}/models/first.pdparams"
    assert len(homes.read_file(ceph_site.cluster, saved)) > 0
    assert homes.owner(ceph_site.cluster, saved) == (1000, 100)  # the notebook image's jovyan, as provisioned
    models = contents(hub, token, "models")
    assert models.status_code == 200 and [c["name"] for c in models.json()["content"]] == ["first.pdparams"], models.text[:500]
    trainers = core.list_namespaced_pod(namespace, label_selector=f"paddle-nbext/role=trainer,paddle-nbext/owner={owner_label(USER)}")
    assert len(trainers.items) == 2
    for trainer in trainers.items:
        mounted = {v.persistent_volume_claim.claim_name for v in present(trainer.spec, "spec").volumes or [] if v.persistent_volume_claim}
        assert mounted == {f"claim-{USER}"}

    # Uninstalling, as the guide says: the chart's objects go, her home and its volume stay.
    hub.stop_server(USER)
    admin.run(admin_guide.uninstall_command())
    eventually(lambda: _missing(core.read_namespaced_service_account, "paddle-notebook", namespace), "the chart's account removed")
    assert present(core.read_persistent_volume(f"cephfs-home-{namespace}-{USER}").spec, "spec").csi is not None
    assert len(homes.read_file(ceph_site.cluster, saved)) > 0


def _missing(read: Any, name: str, namespace: str) -> bool:
    try:
        read(name, namespace)
    except ApiException as error:
        return bool(error.status == 404)
    return False
