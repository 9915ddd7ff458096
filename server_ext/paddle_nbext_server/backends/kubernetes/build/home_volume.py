"""Which volume holds the user's home, so every replica sees the same files at the same path.

Three ways, by `c.KubernetesBackend.home_volume`:
- `auto`:   read the notebook's own pod and copy the volume that backs the home path (whatever
            it is: a PVC, an in-tree cephfs source, NFS, hostPath...), with the same mount path
            and subPath — the most reliable way to match what JupyterHub's spawner set up;
- `pvc`:    a PVC named by a template (`claim-{username}`, Zero to JupyterHub's default);
- `cephfs`: an in-tree cephfs source (monitors, path template, user, a Secret by name — the
            key itself never appears in config or manifests).

The `pvc` and `cephfs` templates are expanded by `usernames.expand`, the way the hub's
KubeSpawner expanded them for the notebook pod (`c.KubernetesBackend.slug_scheme`): the raw
JupyterHub name (`Alice`, `alice@example.org`) would name another claim or directory.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from .usernames import PLACEHOLDERS, Scheme, expand

# Sources that cannot carry a user's home: a copy would be empty or another pod's private data.
_UNUSABLE = {
    "emptyDir": "an emptyDir lives and dies with the notebook pod, so job pods would see an empty home",
    "configMap": "a ConfigMap is read-only configuration, not a home directory",
    "secret": "a Secret is not a home directory",
    "downwardAPI": "a downwardAPI volume is not a home directory",
    "projected": "a projected volume is not a home directory",
    "ephemeral": "a generic ephemeral volume belongs to the notebook pod alone",
}


class HomeVolumeError(ValueError):
    """The home volume cannot be determined; the message says why and which setting fixes it."""


@dataclass(frozen=True)
class HomeVolume:
    source: dict[str, Any]  # a Volume without its name, e.g. {"persistentVolumeClaim": {...}}
    mount_path: str
    sub_path: str | None = None

    def volume(self) -> dict[str, Any]:
        return {"name": "home", **self.source}

    def mount(self) -> dict[str, Any]:
        mount: dict[str, Any] = {"name": "home", "mountPath": self.mount_path}
        if self.sub_path:
            mount["subPath"] = self.sub_path
        return mount

    def describe(self) -> str:
        kind = next(iter(self.source), "unknown")
        return f"{kind} at {self.mount_path}" + (f" (subPath {self.sub_path})" if self.sub_path else "")


def _covers(mount_path: str, home_path: str) -> bool:
    mount_path = posixpath.normpath(mount_path)
    home_path = posixpath.normpath(home_path)
    return home_path == mount_path or home_path.startswith(mount_path.rstrip("/") + "/")


def from_pod(pod: dict[str, Any], home_path: str, container_name: str | None = None) -> HomeVolume:
    """The volume behind `home_path` in a pod spec (a dict as the API returns it).

    The deepest mount that contains `home_path` wins (a home at /home/jovyan may be mounted at
    /home/jovyan itself or at /home).  Raises `HomeVolumeError` naming the fix."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    if container_name:
        containers = [c for c in containers if c.get("name") == container_name] or containers
    best: dict[str, Any] | None = None
    for container in containers:
        for mount in container.get("volumeMounts") or []:
            covers = _covers(mount.get("mountPath", ""), home_path)
            if covers and (best is None or len(mount["mountPath"]) > len(best["mountPath"])):
                best = mount
    pod_name = (pod.get("metadata") or {}).get("name", "the notebook pod")
    if best is None:
        raise HomeVolumeError(
            f"no volume of pod {pod_name} is mounted at the home path {home_path}, so job pods would not see "
            "your files; set c.KubernetesBackend.home_volume to 'pvc' with the claim of the home (CephFS: a ceph-csi volume, admin guide 'CephFS homes'), or fix home_path"
        )
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    volume = volumes.get(best["name"])
    if volume is None:
        raise HomeVolumeError(f"pod {pod_name} mounts volume '{best['name']}' at {best['mountPath']} but does not define it")
    source = {k: v for k, v in volume.items() if k != "name"}
    kind = next(iter(source), "")
    if kind in _UNUSABLE:
        raise HomeVolumeError(
            f"the home {home_path} of pod {pod_name} is a {kind} volume: {_UNUSABLE[kind]}; "
            "set c.KubernetesBackend.home_volume to 'pvc' with the claim of the home (CephFS: a ceph-csi volume, admin guide 'CephFS homes')"
        )
    return HomeVolume(source=source, mount_path=best["mountPath"], sub_path=best.get("subPath") or None)


IDENTITY_KEYS = ("runAsUser", "runAsGroup", "fsGroup", "supplementalGroups")


def identity_of(pod: dict[str, Any], home_path: str) -> dict[str, Any]:
    """The user and groups the notebook runs as, for the job pods' securityContext.

    KubeSpawner sets the uid on the *container* (`runAsUser: 1000`) and `fsGroup: 100` on the
    *pod*; a container's setting wins over the pod's, as in Kubernetes.  The container is the
    one that mounts the home.  Job pods that miss either level run as the image's user (root in
    Paddle's images) and leave root-owned files in the home."""
    spec = pod.get("spec") or {}
    identity = {k: v for k, v in (spec.get("securityContext") or {}).items() if k in IDENTITY_KEYS}
    for container in spec.get("containers") or []:
        if any(_covers(m.get("mountPath", ""), home_path) for m in container.get("volumeMounts") or []):
            own = container.get("securityContext") or {}
            identity.update({k: own[k] for k in ("runAsUser", "runAsGroup") if k in own})
            break
    return identity


def _placeholder_list() -> str:
    return ", ".join("{" + name + "}" for name in PLACEHOLDERS)


def from_pvc_template(template: str, username: str, home_path: str, *, scheme: Scheme = "safe", servername: str = "") -> HomeVolume:
    """A PVC home; `scheme` and `servername` must be what the hub's KubeSpawner used (its
    `slug_scheme`, and the notebook's server name, "" for the default server), so that the
    claim is the one the notebook pod mounts."""
    try:
        claim = expand(template, username, scheme, servername)
    except (KeyError, IndexError, ValueError) as error:
        raise HomeVolumeError(
            f"c.KubernetesBackend.home_pvc_template '{template}' is not a valid template ({error}); "
            f"use KubeSpawner's placeholders ({_placeholder_list()}), e.g. 'claim-{{username}}'"
        ) from None
    return HomeVolume(source={"persistentVolumeClaim": {"claimName": claim}}, mount_path=home_path)


def from_cephfs(cephfs: dict[str, Any], username: str, home_path: str, *, scheme: Scheme = "safe", servername: str = "") -> HomeVolume:
    """`cephfs` config: monitors (list), path (template with {username}), user, secret_ref
    (Secret name), optional read_only.  The path expands like KubeSpawner expands the same path
    in `singleuser.storage.extraVolumes` (`scheme`, `servername` as in `from_pvc_template`)."""
    monitors = cephfs.get("monitors")
    if not monitors or not isinstance(monitors, (list, tuple)) or not all(isinstance(m, str) for m in monitors):
        raise HomeVolumeError("c.KubernetesBackend.cephfs['monitors'] must list the Ceph monitors, e.g. ['10.0.0.1:6789']")
    path_template = cephfs.get("path", "/home/{username}")
    try:
        path = expand(str(path_template), username, scheme, servername)
    except (KeyError, IndexError, ValueError) as error:
        raise HomeVolumeError(
            f"c.KubernetesBackend.cephfs['path'] '{path_template}' is not a valid template ({error}); "
            f"use KubeSpawner's placeholders ({_placeholder_list()}), e.g. '/home/{{username}}'"
        ) from None
    if "secret_file" in cephfs or "key" in cephfs:
        raise HomeVolumeError("c.KubernetesBackend.cephfs takes 'secret_ref' (a Secret name), never the key itself")
    source: dict[str, Any] = {"monitors": list(monitors), "path": path}
    if cephfs.get("user"):
        source["user"] = str(cephfs["user"])
    if cephfs.get("secret_ref"):
        source["secretRef"] = {"name": str(cephfs["secret_ref"])}
    if cephfs.get("read_only"):
        source["readOnly"] = True
    return HomeVolume(source={"cephfs": source}, mount_path=home_path)
