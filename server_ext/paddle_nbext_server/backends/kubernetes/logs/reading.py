"""A replica's log: from the API while its pod lives, from the file in the home once it is gone; tails
and live follows.

A part of `KubernetesBackend` (backend.py): the backend finds the caller's job, this reads its replica's log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from paddle_nbext.model.contract import ROLES
from paddle_nbext.model.status import JobStatus

from ....runtime import replicas
from ...base import BackendUnavailable, InvalidState, replica_not_found
from ..client.cache import describe_failure
from ..job_view import JobView
from ..settings import BackendSettings
from . import replica_logs
from .pod_logs import PodLogs


class LogReading:
    """A replica's log."""

    def __init__(self, settings: BackendSettings, view: JobView, pod_logs: PodLogs) -> None:
        self.settings = settings
        self.view = view
        self.pod_logs = pod_logs

    def _pod_of(self, status: JobStatus, role: str, index: int) -> str:
        desired = int(status.spec.get(f"{role}s") or 0) if role in ROLES else 0
        if not 0 <= index < desired:
            raise replica_not_found(status.name, role, index, desired)
        pods = [p for p in self.view.pods_by_job.get(self.view.key(status), {}).values() if replicas.pod_identity(p) == (role, index)]
        if not pods:
            raise InvalidState(f"{role} {index} of job '{status.name}' has no pod (not started yet, or removed after the job ended)")
        return str(replicas.newest_pod(pods)["metadata"]["name"])

    def _log_source(self, status: JobStatus, role: str, index: int) -> tuple[str | None, list[dict[str, Any]]]:
        """The replica's newest pod (None once it has none, e.g. removed after the job ended) and
        all its pods, oldest first; an index the job does not have is refused."""

        try:
            pod: str | None = self._pod_of(status, role, index)
        except InvalidState:  # the replica has no pod (any more): its file on the home may have the log
            pod = None
        return pod, replica_logs.replica_pods(self.view.pods_by_job.get(self.view.key(status), {}).values(), role, index)

    async def read(self, status: JobStatus, role: str, index: int, *, tail: int | None = None, previous: bool = False) -> str:
        """The log of replica `role` `index` of the job: its pod's (from the API, else its file),
        or once it has no pod the file of its last (or `previous`) attempt in the home."""
        name = status.name
        pod, pods = self._log_source(status, role, index)
        what = f"{'previous ' if previous else ''}log for {role} {index} of '{name}'"
        directory = replica_logs.log_dir(self.settings.home_path, name)
        if pod is not None:
            try:
                return await self.pod_logs.read(pod, tail=tail, previous=previous)
            except ApiException as error:
                if previous and error.status == 400:
                    raise InvalidState(f"no {what}: it has not been restarted (no earlier attempt in {directory})") from None
                if error.status in (400, 404):
                    raise InvalidState(f"no {what}: {describe_failure(error)}") from None
                raise BackendUnavailable(f"cannot read the log of {role} {index}: {describe_failure(error)}") from None
        text = await asyncio.to_thread(
            replica_logs.read_attempt, self.settings.home_path, name, role, index, pods, None, tail=tail, previous=previous
        )
        if text is None and previous:
            raise InvalidState(f"no {what}: no earlier attempt of it is in {directory}")
        if text is None:
            raise InvalidState(f"no {what}: it has no pod (not started yet, or removed after the job ended) and no log file in {directory}")
        return text

    async def follow(self, status: JobStatus, role: str, index: int, *, tail: int | None = None) -> AsyncGenerator[str, None]:
        """The pod's log stream from the API while the pod lives (no read timeout: a quiet
        replica is not an ended one; at most `replica_logs.MAX_API_STREAMS` at once).  When it ends before
        the replica does (a retry is a new pod; a lost node breaks the stream) the follow goes on
        in the attempt files, from where the stream stopped; it reads the files alone once the
        pods are gone or when every API stream is taken."""

        name = status.name
        key = self.view.key(status)
        pod, pods = self._log_source(status, role, index)
        directory = replica_logs.log_dir(self.settings.home_path, name)

        def ended() -> bool:
            return replica_logs.replica_ended(self.view.statuses.get(key), role, index)

        async def own_file() -> Path | None:
            current = replica_logs.replica_pods(self.view.pods_by_job.get(key, {}).values(), role, index) or pods
            files = await asyncio.to_thread(replica_logs.attempt_files, directory, role, index)
            return replica_logs.attempt_file(files, current, pod, previous=False)

        streams = replica_logs.API_STREAMS
        if pod is not None and streams.claim():
            try:
                response = await self.pod_logs.open(
                    f"follow the log of {pod}", pod, tail, follow=True, _request_timeout=replica_logs.FOLLOW_TIMEOUT
                )
            except (ApiException, BackendUnavailable) as error:
                streams.release()
                if await own_file() is None:  # else: pod or node gone, its file has the lines
                    if isinstance(error, ApiException):
                        cause = describe_failure(error)
                        raise InvalidState(f"no log for {role} {index} of '{name}': {cause}") from None
                    raise
            except BaseException:
                streams.release()
                raise
            else:
                chunks = replica_logs.stream_api(response, streams)
                seen = b""
                # Only whole lines go out while the stream lasts: what a breaking stream sends last
                # may be the kubelet's own words ("context cancelled"), not the replica's output.
                pending = ""
                try:
                    async for chunk in chunks:
                        complete, pending = replica_logs.split_complete(pending + chunk)
                        if complete:
                            seen = (seen + complete.encode("utf-8"))[-replica_logs.RESUME_WINDOW :]
                            yield complete
                finally:
                    await chunks.aclose()  # now, not at garbage collection: it frees a stream thread
                # The container ended, or the stream broke while it runs.  Go on in the pod's file
                # from where the stream stopped, then in the files of the replica's retries (each a
                # new pod), until the replica ends.
                own = await own_file()
                if ended():
                    if pending:
                        yield pending  # the replica's last words, without a final newline
                    return
                if own is None:
                    return
                start = (own, await asyncio.to_thread(replica_logs.resume_offset, own, seen))
                async for chunk in replica_logs.follow_files(directory, role, index, tail=None, ended=ended, start=start):
                    yield chunk
                return
        async for chunk in replica_logs.follow_files(directory, role, index, tail=tail, ended=ended):
            yield chunk
