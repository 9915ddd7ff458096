"""The shipped recipe with a CephFS home (issue 34): the hub spawns the user's notebook pod, the
kubelet mounts the user's CephFS home into it through the CephFS CSI plugin, and the jobs the
notebook submits mount the same home (home_volume "auto" copies the claim) and write into it.

The user is provisioned as the admin guide's "CephFS homes" says, with the shipped
``deploy/cephfs/provision_home.py``: the directory owned by the notebook's uid, a key for it
alone, its Secret, the static ceph-csi PersistentVolume bound to ``claim-erin`` in the hub's
namespace.  The hub's KubeSpawner finds that claim (``storage_pvc_ensure``) and mounts it.
"""

from __future__ import annotations

import os

import pytest
import requests
from kubernetes import client
from support.ceph import homes
from support.ceph.site import CephSite
from support.hub_site import HubSite

from cluster.k8s_objects import present
from cluster.test_real_node_jupyterhub import TINY_MODEL, submit, wait_phase
from paddle_nbext_server.backends.kubernetes.build.manifests import owner_label

pytestmark = pytest.mark.timeout(1800)

USER = "erin"  # a user of this module only (hub_faults has dave)


def test_a_hub_spawned_notebook_and_its_jobs_share_the_users_cephfs_home(hub: HubSite, ceph_site: CephSite) -> None:
    site = hub.site
    home, mounted = ceph_site.home(USER, hub.namespace, site.uid, site.gid)
    hub.homes[USER] = mounted  # the module's end stops erin's server too
    code = mounted / "tiny" / "train.py"
    code.parent.mkdir()
    code.write_text(TINY_MODEL)
    for path in (code, code.parent):
        os.chown(path, site.uid, site.gid)

    hub.start_server(USER)
    token = hub.user_token(USER)
    core = client.CoreV1Api(hub.api)
    notebook = present(core.read_namespaced_pod(f"jupyter-{USER}", hub.namespace).spec, "spec")
    claims = {v.persistent_volume_claim.claim_name for v in present(notebook.volumes, "volumes") if v.persistent_volume_claim}
    assert claims == {f"claim-{USER}"}
    claim = core.read_namespaced_persistent_volume_claim(f"claim-{USER}", hub.namespace)
    assert present(claim.spec, "spec").volume_name == home.volume_name
    # The notebook pod itself sees the user's file in its home (the Jupyter contents API).
    listed = requests.get(f"{hub.url}/user/{USER}/api/contents/tiny", headers={"Authorization": f"token {token}"}, timeout=60)
    assert listed.status_code == 200 and [c["name"] for c in listed.json()["content"]] == ["train.py"], listed.text[:500]

    fields = {"job_name": "ceph-tiny", "mode": "collective", "trainers": 2, "trainer_cpu": "500m", "entry_point": "python train.py"}
    submit(hub, USER, token, **fields, trainer_package="tiny")
    final = wait_phase(hub, USER, token, "ceph-tiny", {"Succeeded", "Failed", "Cancelled"})
    assert final["phase"] == "Succeeded", final

    # The model the job saved is in CephFS, the user's, and the notebook pod sees it at once.
    saved = f"{home.path}/models/ceph-tiny.pdparams"
    assert len(homes.read_file(ceph_site.cluster, saved)) > 0
    assert homes.owner(ceph_site.cluster, saved) == (site.uid, site.gid)
    models = requests.get(f"{hub.url}/user/{USER}/api/contents/models", headers={"Authorization": f"token {token}"}, timeout=60)
    assert models.status_code == 200 and [c["name"] for c in models.json()["content"]] == ["ceph-tiny.pdparams"], models.text[:500]
    pods = core.list_namespaced_pod(hub.namespace, label_selector=f"paddle-nbext/role=trainer,paddle-nbext/owner={owner_label(USER)}")
    trainer = present(pods.items[0].spec, "spec")
    assert {v.persistent_volume_claim.claim_name for v in present(trainer.volumes, "volumes") if v.persistent_volume_claim} == {
        f"claim-{USER}"
    }
    hub.stop_server(USER)
