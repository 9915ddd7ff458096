"""A pod's log through the API (`pods/log` of the main container), with the launcher's file of the same
attempt in the home standing in when the API cannot give it (the pod is gone, its node is lost).

A part of `KubernetesBackend` (backend.py): the log reading reads and follows through it, the
reconciler reads a failed trainer's last lines and asks whether a node still answers."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ....runtime import cluster_master
from ...base import BackendUnavailable
from ..build import manifests
from ..client.api_calls import KubernetesClient
from ..job_view import JobView
from ..settings import BackendSettings
from . import replica_logs


class PodLogs:
    """A pod's log from the API, else from its attempt file in the home."""

    def __init__(self, settings: BackendSettings, api: KubernetesClient, view: JobView) -> None:
        self.settings = settings
        self.api = api
        self.view = view

    async def open(self, doing: str, pod: str, tail: int | None, **options: Any) -> Any:
        """One `pods/log` request of the main container (the raw response: read or streamed)."""
        kwargs: dict[str, Any] = {"container": manifests.CONTAINER, "_preload_content": False, **options}
        if tail is not None:
            kwargs["tail_lines"] = tail
        connection = await self.api.connect()
        core = client.CoreV1Api(connection.api)
        return await self.api.call(doing, core.read_namespaced_pod_log, pod, connection.namespace, **kwargs)

    async def read(self, pod: str, *, tail: int | None, previous: bool) -> str:
        """The pod's log from the API.  When the API cannot give it (the pod is gone, its node is
        lost), and for `previous` (a retry is a new pod, so the API has none), the launcher's file
        of that attempt on the home volume (logs/replica_logs.py).  The API's error when neither has it."""

        replica = replica_logs.replica_of(pod, self.view.pods_by_job)

        async def from_file() -> str | None:
            if replica is None:
                return None
            key, role, index, pods = replica
            return await asyncio.to_thread(
                replica_logs.read_attempt,
                self.settings.home_path,
                self.view.name_of(key),
                role,
                index,
                pods,
                pod,
                tail=tail,
                previous=previous,
            )

        if previous and (text := await from_file()) is not None:
            return text
        try:
            response = await self.open(f"read the log of {pod}", pod, tail, previous=previous)
        except (ApiException, BackendUnavailable):
            text = None if previous else await from_file()
            if text is None:
                raise
            return text
        served = str(response.data.decode("utf-8", errors="replace"))
        if replica_logs.KUBELET_LOG_GONE.fullmatch(served.strip()):
            # A real kubelet answers 200 with this sentence once the container is removed (the pod
            # is being deleted): the launcher's file has what it said.
            return (None if previous else await from_file()) or served
        return served

    async def last_lines(self, pod: str) -> str:
        """Enough of a failed pod's last lines to reach back past Paddle's fatal-signal block to
        the Python traceback ("" when they cannot be read)."""
        try:
            return await self.read(pod, tail=cluster_master.FAILURE_TAIL_LINES, previous=False)
        except (ApiException, BackendUnavailable):
            return ""
