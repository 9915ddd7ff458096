"""A home claim as an admin provisions one statically: a PersistentVolume made for the claim
(``claimRef``), the claim naming it, bound by the PV controller.  The cluster suite's CephFS
stand-in (a ceph-csi source no node mounts) and the real node's ``local`` home share it."""

from __future__ import annotations

import time
from typing import Any

import kubernetes

BIND_WAIT = 60.0


def create_bound_claim(
    core: kubernetes.client.CoreV1Api, namespace: str, claim: str, source: dict[str, Any], *, prefix: str = "pnb-home-"
) -> str:
    """Create the volume (``source``: its ``csi``/``local``/``nodeAffinity`` fields) and the
    ReadWriteMany claim ``claim`` bound to it; returns the volume's name once the claim is Bound."""
    volume = core.create_persistent_volume(
        kubernetes.client.V1PersistentVolume.model_validate(
            {
                "metadata": {"generateName": prefix, "labels": {"paddle-nbext/test": "true"}},
                "spec": {
                    "capacity": {"storage": "10Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "claimRef": {"namespace": namespace, "name": claim},
                    **source,
                },
            }
        )
    )
    assert volume.metadata is not None
    name = str(volume.metadata.name)
    core.create_namespaced_persistent_volume_claim(
        namespace,
        kubernetes.client.V1PersistentVolumeClaim.model_validate(
            {
                "metadata": {"name": claim},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "",
                    "volumeName": name,
                    "resources": {"requests": {"storage": "10Gi"}},
                },
            }
        ),
    )
    deadline = time.monotonic() + BIND_WAIT
    while _phase(core.read_namespaced_persistent_volume_claim(claim, namespace)) != "Bound":
        if time.monotonic() > deadline:
            raise AssertionError(f"PersistentVolumeClaim {claim} was not Bound to {name} by kube-controller-manager")
        time.sleep(0.1)
    return name


def _phase(claim: kubernetes.client.V1PersistentVolumeClaim) -> str | None:
    assert claim.status is not None  # the API server gives every claim a status (phase Pending at first)
    return claim.status.phase
