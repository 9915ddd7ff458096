"""The user's home in job pods: which volume holds it, whom the pods run as (the notebook's uid and
groups), and the job's snapshot of the code inside it.

A part of `KubernetesBackend` (backend.py): the admission asks it for the home and the pods' identity."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.spec import SpecError

from ....jobfiles import package
from ...base import BackendForbidden, BackendUnavailable, InvalidRequest, InvalidState
from ..build import home_volume as homes
from ..build import intree_cephfs
from ..build.usernames import Scheme
from ..client.api_calls import KubernetesClient
from ..client.cache import describe_failure
from ..client.connection import Connection
from ..client.forbidden import denial_of
from ..settings import BackendSettings


class HomeSetup:
    """The user's home in job pods."""

    def __init__(self, settings: BackendSettings, api: KubernetesClient, log: logging.Logger) -> None:
        self.settings = settings
        self.api = api
        self.log = log
        self.home: homes.HomeVolume | None = None  # the notebook pod's, in `auto` mode, once read
        self.home_node: str | None = None  # set when the home can only be mounted on the notebook's node
        self._security_context: dict[str, Any] | None = None
        self._server_version: str | None = None  # the API server's gitVersion, once asked
        self.home_problem: str | None = None  # a home no kubelet can mount (an in-tree cephfs on 1.31+), said at start

    def identity(self) -> dict[str, Any]:
        """Whom job pods run as: the whole `pod_security_context` when set, else the uid/gids
        the settings name, else the notebook pod's (read at the first submit), else the image's
        user (the server knows no notebook pod: a server outside the cluster, say)."""
        if self.settings.pod_security_context:
            return dict(self.settings.pod_security_context)
        named = {"runAsUser": self.settings.run_as_user, "runAsGroup": self.settings.run_as_group, "fsGroup": self.settings.fs_group}
        explicit = {key: value for key, value in named.items() if value is not None}
        if explicit:
            return {**(self._security_context or {}), **explicit}
        return dict(self._security_context or {})

    async def home_volume(self, owner: str, connection: Connection) -> homes.HomeVolume:
        home = await self._configured_home(owner)
        if home is None:
            home = await self._home_of_the_notebook_pod(connection)
        else:
            await self._notebook_identity(connection)
        if "cephfs" in home.source:
            problem = await self.intree_cephfs_problem(connection)
            if problem:
                raise BackendUnavailable(problem)
        return home

    async def intree_cephfs_problem(self, connection: Connection) -> str | None:
        """Why an in-tree cephfs home cannot be mounted on this cluster (its release is 1.31 or
        later), or None; the API server's version is asked once."""
        if self._server_version is None:
            try:
                info = await self.api.call("read the API server's version", client.VersionApi(connection.api).get_code)
                self._server_version = str(info.git_version or "")
            except (ApiException, BackendUnavailable) as error:
                self.log.warning("paddle-nbext: cannot read the API server's version (%s)", error)
                return None
        source = "home_volume 'cephfs'" if self.settings.home_volume == "cephfs" else "the notebook pod's home volume"
        return intree_cephfs.refusal(self._server_version, source)

    async def _notebook_identity(self, connection: Connection) -> None:
        """In `pvc` and `cephfs` modes the home comes from settings, but whom the pods run as still
        comes from the notebook's pod when the server runs in one: the files in the home are
        that uid's.  Best effort (the pod read may be refused): the server's own uid and gid,
        which are the notebook's in its pod, stand in.  Outside a pod (a kubeconfig) there is no
        notebook pod: the server's own uid and gid are the owner of the files it shows, so the
        pods run as them too, unless the server runs as root (then the settings, or the image's
        user, decide: root's files are nobody's in particular)."""
        if self._security_context is not None or not self.settings.copy_security_context:
            return
        if not connection.in_cluster:
            self._security_context = _own_ids_unless_root()
            return
        identity: dict[str, Any] = {}
        if self.settings.pod_name:
            core = client.CoreV1Api(connection.api)
            try:
                response = await self.api.call(
                    "read the notebook pod", core.read_namespaced_pod, self.settings.pod_name, connection.namespace, _preload_content=False
                )
                identity = homes.identity_of(json.loads(response.data), self.settings.home_path)
            except (ApiException, BackendUnavailable, ValueError) as error:
                self.log.warning(
                    "paddle-nbext: cannot read the notebook pod %s for its uid and groups (%s); job pods run as this server's uid %s",
                    self.settings.pod_name,
                    error,
                    os.getuid(),
                )
        self._security_context = _with_own_ids(identity)

    async def _configured_home(self, owner: str) -> homes.HomeVolume | None:
        """The home the `pvc` or `cephfs` settings name (None in `auto` mode)."""
        try:
            if self.settings.home_volume == "pvc":
                return homes.from_pvc_template(
                    self.settings.home_pvc_template,
                    owner,
                    self.settings.home_path,
                    scheme=cast(Scheme, self.settings.slug_scheme),
                    servername=os.environ.get("JUPYTERHUB_SERVER_NAME", ""),
                )
            if self.settings.home_volume == "cephfs":
                return homes.from_cephfs(
                    dict(self.settings.cephfs),
                    owner,
                    self.settings.home_path,
                    scheme=cast(Scheme, self.settings.slug_scheme),
                    servername=os.environ.get("JUPYTERHUB_SERVER_NAME", ""),
                )
        except homes.HomeVolumeError as error:
            raise BackendUnavailable(f"the home volume is misconfigured: {error}") from None
        return None

    async def _home_of_the_notebook_pod(self, connection: Connection) -> homes.HomeVolume:
        """`auto` mode: the volume behind the home path in the notebook's own pod."""
        if self.home is None:
            if not self.settings.pod_name:
                raise BackendUnavailable(
                    "home_volume is 'auto' but the notebook's pod name is unknown (no $HOSTNAME); "
                    "set c.KubernetesBackend.pod_name, or use home_volume 'pvc' (a claim of the home, e.g. a ceph-csi volume)"
                )
            core = client.CoreV1Api(connection.api)
            try:
                response = await self.api.call(
                    "read the notebook pod", core.read_namespaced_pod, self.settings.pod_name, connection.namespace, _preload_content=False
                )
            except ApiException as error:
                if (denial := denial_of(error)) is not None:
                    raise BackendForbidden(
                        f"home_volume 'auto' needs to read the notebook pod {self.settings.pod_name}: {denial.sentence()} "
                        "(or use home_volume 'pvc': a claim of the home, e.g. a ceph-csi volume); nothing was created"
                    ) from None
                raise BackendUnavailable(
                    f"home_volume 'auto' needs to read the notebook pod {self.settings.pod_name} in {connection.namespace}: "
                    f"{describe_failure(error)}; grant 'get pods' or use home_volume 'pvc' (a claim of the home, e.g. a ceph-csi volume)"
                ) from None
            pod = json.loads(response.data)
            try:
                self.home = homes.from_pod(pod, self.settings.home_path)
            except homes.HomeVolumeError as error:
                raise BackendUnavailable(str(error)) from None
            if self.settings.copy_security_context:
                identity = homes.identity_of(pod, self.settings.home_path)
                self._security_context = _with_own_ids(identity) if connection.in_cluster else identity
            self.home_node = await self._single_node_home(pod, self.home, connection)
        return self.home

    async def _single_node_home(self, pod: dict[str, Any], home: homes.HomeVolume, connection: Connection) -> str | None:
        """A ReadWriteOnce claim (Zero to JupyterHub's default home) can be mounted only on one
        node at a time: the notebook's.  Job pods are then pinned to that node, where they can
        share it; ReadWriteOncePod allows no second pod at all and is refused."""
        claim = (home.source.get("persistentVolumeClaim") or {}).get("claimName")
        if not claim:
            return None
        core = client.CoreV1Api(connection.api)
        try:
            response = await self.api.call(
                f"read the home claim {claim}",
                core.read_namespaced_persistent_volume_claim,
                claim,
                connection.namespace,
                _preload_content=False,
            )
        except ApiException as error:
            self.log.warning(
                "paddle-nbext: cannot read the home claim %s (%s); assuming it can be shared across nodes", claim, describe_failure(error)
            )
            return None
        claim_obj = json.loads(response.data)
        modes = set((claim_obj.get("status") or {}).get("accessModes") or (claim_obj.get("spec") or {}).get("accessModes") or [])
        if "ReadWriteMany" in modes or "ReadOnlyMany" in modes:
            return None
        if modes == {"ReadWriteOncePod"}:
            raise BackendUnavailable(
                f"the home claim {claim} is ReadWriteOncePod: no job pod can mount it beside the notebook; ask the "
                "admin for a ReadWriteMany home (e.g. CephFS) or set c.KubernetesBackend.home_volume = 'pvc'"
            )
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            raise BackendUnavailable(f"the home claim {claim} is ReadWriteOnce and the notebook pod is on no node yet")
        return str(node)

    def container_path(self, local: Path, notebook_home: Path) -> str:
        """The path a job pod sees for a file in the notebook's home."""
        relative = os.path.relpath(os.path.realpath(local), os.path.realpath(notebook_home))
        return self.settings.home_path if relative == "." else f"{self.settings.home_path.rstrip('/')}/{relative}"

    @staticmethod
    def snapshot(source: Path, job_dir: Path, entry_script: str | None, home: Path) -> None:
        target = job_dir / "package"
        if job_dir.exists():  # left by an earlier job of the same name (its record is gone: we got the name)
            left = remove_tree(job_dir)
            if left:
                raise InvalidState(
                    f"the folder {job_dir} of an earlier job '{job_dir.name}' cannot be removed for the new one: "
                    f"{len(left)} of its files stay (first: {left[0]}); files a job pod wrote as another user (root?) "
                    "must be removed by that user or an admin, or choose another job_name",
                    field="job_name",
                )
        job_dir.mkdir(parents=True)
        try:
            package.snapshot_package(source, target, entry_script, home=home)  # links: only into the home
        except SpecError as error:
            shutil.rmtree(job_dir, ignore_errors=True)
            raise InvalidRequest(error.message, field=error.field) from None


def _with_own_ids(identity: dict[str, Any]) -> dict[str, Any]:
    """`identity` with the uid and gid this server runs as where the notebook pod's spec named
    none (an image whose USER sets them): in the notebook's pod the server is the notebook."""
    if hasattr(os, "getuid"):
        identity = {"runAsUser": os.getuid(), "runAsGroup": os.getgid(), **identity}
    return identity


def _own_ids_unless_root() -> dict[str, Any]:
    """This server's uid and gid as a pod identity, or nothing when it runs as root."""
    if not hasattr(os, "getuid") or os.getuid() == 0:
        return {}
    return {"runAsUser": os.getuid(), "runAsGroup": os.getgid()}


def remove_tree(folder: Path) -> list[str]:
    """Remove `folder`; what could not be removed, as "path (error)" lines, never silently kept."""
    failed: dict[str, str] = {}

    def note(_function: Any, path: Any, error: Any) -> None:
        failure = error[1] if isinstance(error, tuple) else error
        failed[str(path)] = f"{path} ({type(failure).__name__}: {failure})"

    shutil.rmtree(folder, onerror=note)  # onerror, not onexc (3.12+): Python 3.10 is supported
    # A folder that stays only because something in it stays is not a leftover of its own.
    return [text for path, text in failed.items() if not any(other.startswith(path.rstrip("/") + "/") for other in failed)]
