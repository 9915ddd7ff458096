"""The in-tree `cephfs` volume is gone from Kubernetes 1.31: say so instead of emitting one.

Kubernetes deprecated the in-tree `cephfs` volume plugin in 1.28 and removed it in 1.31: the API
server still accepts a pod with such a volume (and sends a `Warning` header), but no kubelet can
mount it, so the pod stays `ContainerCreating` for ever.  `home_volume = "cephfs"` emits exactly
that volume, and `auto` would copy one from a notebook pod of an old cluster.  On a 1.31+ API
server the backend refuses both, at start (in `GET /config`) and at submit, naming the way that
works: ceph-csi with a static PersistentVolume per user (admin guide: "CephFS homes").
"""

from __future__ import annotations

import re

#: The first Kubernetes release without the in-tree cephfs plugin.
REMOVED_IN = (1, 31)
RECIPE = (
    "mount CephFS homes through ceph-csi instead: a static PersistentVolume per user bound to the "
    "user's claim (deploy/cephfs/, admin guide 'CephFS homes') and c.KubernetesBackend.home_volume = 'pvc' "
    "(or 'auto' in a notebook pod that mounts that claim)"
)


def release_of(git_version: str) -> tuple[int, int] | None:
    """(major, minor) of an API server's `gitVersion` (`v1.37.2`, `v1.30.4-gke.100`); None if unreadable."""
    found = re.match(r"v?(\d+)\.(\d+)", git_version or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def refusal(git_version: str, source: str) -> str | None:
    """Why a home of the in-tree cephfs volume cannot work on this API server (None: it still can,
    or the version is unknown).  `source` says where the volume came from."""
    release = release_of(git_version)
    if release is None or release < REMOVED_IN:
        return None
    return (
        f"{source} is the in-tree cephfs volume, which Kubernetes removed in 1.31; this cluster runs "
        f"{git_version}, where no kubelet can mount it (the job's pods would wait in ContainerCreating for ever); {RECIPE}"
    )
