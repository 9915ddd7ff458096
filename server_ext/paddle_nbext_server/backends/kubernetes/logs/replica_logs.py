"""Replica logs that outlive their pods: the `kubernetes` backend's reading side.

A pod's log lives only as long as the pod: deleting it, the Jobs' `ttlSecondsAfterFinished`, a
lost node or the Job controller's own clean-up take it along, and with `restartPolicy: Never` a
retry is a new pod, so the API's `previous=true` answers 400.  The launcher in every replica pod
therefore also writes the replica's output into the job's directory on the home volume, one file
per attempt (runtime/replica_log.py, named by runtime/replica_files.py):

    <home>/.paddle-jobs/<job>/logs/<role>-<index>.attempt-<n>.log

The notebook has the same home at the same path (`c.KubernetesBackend.home_path`, also where
`delete` removes the job's directory), so the backend reads the files directly.  The pod's log
still comes from the API while the pod lives: it is what `kubectl logs` shows, and it is there
even when the pod could not write to the volume.  The file is read when the API cannot give the
log (pod gone, node lost), and `previous` is always a file.

Which file is whose: attempts are numbered in the order their launchers started, so counted from
the newest: the newest pod that has started owns the newest file, the started pod before it the
one before, and so on.  A pod that never started (pending, image not pulled) has no file.

Follow streams: a kubelet sends nothing while the container is silent (a pserver may be quiet
for hours), so a follow request has no read timeout, and each open stream holds a thread while it
waits.  They get a pool of their own (`API_STREAMS`), not the default executor that every other
API call needs, so quiet streams can never starve those; a stream beyond its limit follows the
file instead, by polling, which holds no thread.  Closing a stream shuts its socket down, which
frees its thread at once even if nothing would ever come again.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import socket
import threading
from collections.abc import AsyncGenerator, Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import ROLES, ReplicaPhase, Role
from paddle_nbext.model.status import JobStatus

from ....jobfiles.log_tail import read_end
from ....runtime import pod_views, replica_files, replicas
from ..build.manifests import CONTAINER

#: `_request_timeout` of a follow request, (connect, read) seconds, for the connection and the
#: response's head only (the client accepts no "never").  `stream_api` then lifts the read timeout
#: off the socket: silence is normal, and the stream ends when the container does.
FOLLOW_TIMEOUT: tuple[float, float] = (30.0, 30.0)
#: API follow streams open at once per server (each holds a thread while it waits); the server is
#: one user's, so this is generous.  Beyond it a follow reads the file.
MAX_API_STREAMS = 16
#: What a real kubelet serves as a container's log (status 200) once the container was removed.
KUBELET_LOG_GONE = re.compile(r"unable to retrieve container logs for \S+")
#: Seconds between reads of a followed file.
FILE_POLL_INTERVAL = 0.5
READ_SIZE = 64 * 1024
#: The last bytes of an API stream that are looked for in the pod's file, and how far back from
#: its end, to go on there when the stream ends early.  The stream's byte count would not do: the
#: kubelet serves only its newest rotated log file, and `tail` starts it anywhere.
RESUME_WINDOW = 4096
RESUME_SEARCH = 1 << 20
#: TCP keepalive of a follow stream's socket: a connection that died without a word (a lost API
#: server host, a NAT that forgot it) ends after about two minutes instead of holding its thread.
KEEPALIVE = {"TCP_KEEPIDLE": 60, "TCP_KEEPINTVL": 15, "TCP_KEEPCNT": 4}
_POD_NAME = re.compile(rf"^(?P<job>.+)-(?P<role>{'|'.join(ROLES)})-(?P<index>[0-9]+)-[a-z0-9]+$")


# ---------------------------------------------------------------------------------------- files


def log_dir(home: str, job: str) -> Path:
    """The job's log directory as the notebook sees it (the pods see the same path)."""
    return Path(home) / replica_files.JOBS_DIR / job / replica_files.LOGS_DIR


def attempt_files(directory: Path, role: str, index: int) -> list[Path]:
    """The replica's attempt files, oldest first."""
    return [directory / name for _, name in replica_files.attempts(str(directory), role, index)]


def started(pod: dict[str, Any]) -> bool:
    """Whether the pod's container has run, so its launcher has made a file."""
    status = pod.get("status") or {}
    if status.get("phase") in (replicas.POD_RUNNING, replicas.POD_SUCCEEDED):
        return True
    for container in status.get("containerStatuses") or []:
        if container.get("name") != CONTAINER:
            continue
        state = container.get("state") or {}
        if "running" in state:
            return True
        begun = str((state.get("terminated") or {}).get("startedAt") or "")
        return bool(begun) and not begun.startswith("1970-")  # the runtime's "never started"
    return False


def replica_pods(pods: Iterable[dict[str, Any]], role: str, index: int) -> list[dict[str, Any]]:
    """The replica's pods, oldest first (in the order `replicas.newest_pod` ranks them)."""
    mine = [p for p in pods if replicas.pod_identity(p) == (role, index)]
    return sorted(mine, key=pod_views.age_key)


def _name(pod: dict[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def attempt_file(files: list[Path], pods: list[dict[str, Any]], pod: str | None, *, previous: bool) -> Path | None:
    """The file of `pod`'s attempt, or with `previous` of the attempt before it; None if there
    is none.  `files` and `pods` are the replica's, oldest first.  `pod` None means the replica's
    newest pod, or when it has none left the newest attempt; a pod the cache no longer has is
    taken as the newest too (the failure tail of the pod that just ended)."""
    if pod is None and pods:
        pod = _name(pods[-1])
    position = next((i for i, p in enumerate(pods) if _name(p) == pod), None)
    if position is None:
        own, newer = True, 0
    else:
        own = started(pods[position])
        newer = sum(1 for p in pods[position + 1 :] if started(p))
    if not own and not previous:
        return None
    slot = len(files) - 1 - newer - (1 if previous and own else 0)
    return files[slot] if 0 <= slot < len(files) else None


Replica = tuple[str, str, int, list[dict[str, Any]]]  # job, role, index, the replica's pods oldest first


def replica_of(pod: str, pods_by_job: dict[str, dict[str, dict[str, Any]]]) -> Replica | None:
    """(job, role, index, the replica's pods) of a pod by name: from the cache, or from the name
    the Job controller gives Indexed Job pods (`<job>-<role>-<index>-<suffix>`) once it is gone."""
    for job, pods in pods_by_job.items():
        found = pods.get(pod)
        identity = replicas.pod_identity(found) if found else None
        if identity is not None:
            return job, identity[0], identity[1], replica_pods(pods.values(), *identity)
    match = _POD_NAME.match(pod)
    if match is None:
        return None
    job, role, index = match["job"], match["role"], int(match["index"])
    return job, role, index, replica_pods(pods_by_job.get(job, {}).values(), role, index)


def _tail_bytes(data: bytes, count: int) -> bytes:
    """The last `count` lines of `data` (lines end with "\\n", as the kubelet counts them)."""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(count):
        end = data.rfind(b"\n", 0, end)
        if end < 0:
            return data
    return data[end + 1 :]


def read_text(path: Path, tail: int | None) -> str:
    """The file's text, or its last `tail` lines, reading only as much of the end as that takes
    (a training log can be large and the failure tail wants 20 lines).  Raises OSError."""
    with open(path, "rb") as handle:
        if tail is not None and tail <= 0:
            return ""
        data, _ = read_end(handle, tail)  # bounded: log_tail.MAX_TAIL_BYTES, MAX_LOG_BYTES
        if tail is not None:
            data = _tail_bytes(data, tail)
    return data.decode("utf-8", errors="replace")


def read_attempt(
    home: str,
    job: str,
    role: str,
    index: int,
    pods: list[dict[str, Any]],
    pod: str | None,
    *,
    tail: int | None,
    previous: bool,
) -> str | None:
    """The text of `pod`'s attempt file (see `attempt_file`), None when there is no such file.
    Blocking: run it in a thread."""
    path = attempt_file(attempt_files(log_dir(home, job), role, index), pods, pod, previous=previous)
    if path is None:
        return None
    try:
        return read_text(path, tail)
    except FileNotFoundError:
        return None  # removed meanwhile (the job was deleted)


def split_complete(text: str) -> tuple[str, str]:
    """(the whole lines of `text`, the rest after its last line end). A carriage return ends a
    line too, so a progress bar that redraws itself with `\r` is at most one frame behind."""
    end = max(text.rfind("\n"), text.rfind("\r"))
    return text[: end + 1], text[end + 1 :]


def resume_offset(path: Path, seen: bytes) -> int | None:
    """Where in `path` an API stream of the same output stopped: just after the last place its
    last bytes `seen` occur near the file's end; None (go on at the end) if they do not.
    Blocking: run it in a thread."""
    if not seen:
        return None
    try:
        with open(path, "rb") as handle:
            start = max(0, handle.seek(0, os.SEEK_END) - RESUME_SEARCH)
            handle.seek(start)
            data = handle.read()
    except OSError:
        return None
    found = data.rfind(seen)
    return None if found < 0 else start + found + len(seen)


def replica_ended(status: JobStatus | None, role: str, index: int) -> bool:
    """No more output will come: the job ended or is gone, or this replica ended and will not
    be retried."""
    if status is None or status.terminal:
        return True
    retries = int(status.spec.get("max_restarts") or 0) if role == Role.TRAINER else 0
    for replica in status.replicas:
        if replica.role == role and replica.index == index:
            ended = replica.phase in (ReplicaPhase.SUCCEEDED, ReplicaPhase.STOPPED)
            return ended or (replica.phase == ReplicaPhase.FAILED and replica.restarts >= retries)
    return False


class _FileFollower:
    """Polls one replica's attempt files: reads on where the last read stopped, and moves on to
    each newer attempt when it appears (a retry), without cutting a UTF-8 character in two."""

    def __init__(self, directory: Path, role: str, index: int, start: tuple[Path, int | None] | None) -> None:
        self.directory, self.role, self.index = directory, role, index
        self.path: Path | None = start[0] if start else None
        self.position: int | None = start[1] if start else 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def _newer(self) -> list[Path]:
        """The attempt files after the current one, oldest first (all of them before the first)."""
        found = replica_files.attempts(str(self.directory), self.role, self.index)
        current = replica_files.attempt_number(self.path.name) if self.path is not None else None
        return [self.directory / name for number, name in found if current is None or number > current]

    def _size(self) -> int:
        try:
            return self.path.stat().st_size if self.path is not None else 0
        except OSError:
            return 0

    def first(self, tail: int | None) -> str:
        """Start at the newest attempt: from its beginning, or with `tail` its last lines and on
        from its end.  Given a start (a file and where the API stream stopped in it, None: at its
        end), go on from there."""
        if self.path is not None:
            if self.position is None:
                self.position = self._size()
            return ""
        files = self._newer()
        if not files:
            return ""
        self.path = files[-1]
        if tail is None:
            return ""
        self.position = self._size()
        try:
            return read_text(self.path, tail)
        except OSError:
            return ""

    def _read_rest(self) -> bytes:
        if self.path is None:
            return b""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.position or 0)
                data = handle.read()
        except OSError:
            return b""
        self.position = (self.position or 0) + len(data)
        return data

    def step(self, final: bool) -> str:
        text = self.decoder.decode(self._read_rest())
        for newer in self._newer():
            text += self.decoder.decode(b"", final=True)
            self.path, self.position = newer, 0
            text += self.decoder.decode(self._read_rest())
        if final:
            text += self.decoder.decode(b"", final=True)
        return text


async def follow_files(
    directory: Path,
    role: str,
    index: int,
    *,
    tail: int | None,
    ended: Callable[[], bool],
    start: tuple[Path, int | None] | None = None,
) -> AsyncGenerator[str, None]:
    """Follow the replica's attempt files until `ended()` and everything written before is
    sent: from the newest (its `tail` last lines), or from `start` (a file and a byte offset in
    it, None: its end), then each newer attempt.  Polling: holds no thread between reads."""
    follower = _FileFollower(directory, role, index, start)
    text = await asyncio.to_thread(follower.first, tail)
    if text:
        yield text
    while True:
        final = ended()  # asked before reading, so what was written before the end is read
        text = await asyncio.to_thread(follower.step, final)
        if text:
            yield text
        if final:
            return
        await asyncio.sleep(FILE_POLL_INTERVAL)


# ---------------------------------------------------------------------------------- API streams


class StreamPool:
    """At most `size` API follow streams at once, each read on a thread of this pool's own
    executor: a slot is claimed before the request and freed only when its last read returned,
    so the pool never has more blocked reads than threads."""

    def __init__(self, size: int, name: str = "paddle-nbext-log-follow") -> None:
        self.size = size
        self.name = name  # its threads are `<name>_<n>`
        self._lock = threading.Lock()
        self._open = 0
        self._executor: ThreadPoolExecutor | None = None

    @property
    def open(self) -> int:
        return self._open

    def claim(self) -> bool:
        with self._lock:
            if self._open >= self.size:
                return False
            self._open += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._open = max(0, self._open - 1)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix=self.name)
            executor = self._executor
        return executor.submit(fn, *args)


API_STREAMS = StreamPool(MAX_API_STREAMS)


def _socket_of(response: Any) -> socket.socket | None:
    connection = getattr(response, "connection", None) or getattr(response, "_connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _keep_alive(sock: socket.socket | None) -> None:
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in KEEPALIVE.items():
            if hasattr(socket, option):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


def _reader(response: Any) -> Callable[[], bytes]:
    """One blocking read of whatever has arrived (b"" at the end).  A broken or shut-down
    connection is the end too: the stream has nothing more to give."""
    read1 = getattr(response, "read1", None)
    if read1 is None:  # urllib3 1.x has no read1
        chunks = iter(response.stream(None))

        def read1(_size: int) -> bytes:
            return next(chunks, b"")

    def read() -> bytes:
        try:
            data = read1(READ_SIZE)
        except Exception:  # noqa: BLE001 - urllib3 and ssl errors of a closed or broken connection
            return b""
        return data or b""

    return read


def _close(response: Any) -> None:
    with contextlib.suppress(Exception):  # closing a dead connection may raise anything
        response.close()


async def stream_api(response: Any, pool: StreamPool) -> AsyncGenerator[str, None]:
    """The text of an open follow response (`_preload_content=False`) as it arrives, until the
    server ends it (the container ended), with no read timeout.  Takes over a slot claimed from
    `pool` and frees it when its last read has returned: closing the generator shuts the socket
    down, which ends a read that waits."""
    sock = _socket_of(response)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.settimeout(None)  # no read timeout: a quiet replica is not an ended one
    _keep_alive(sock)
    read = _reader(response)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    reading: Future[Any] | None = None
    try:
        while True:
            reading = pool.submit(read)
            data = await asyncio.wrap_future(reading)
            if not data:
                rest = decoder.decode(b"", final=True)
                if rest:
                    yield rest
                return
            text = decoder.decode(data)
            if text:
                yield text
    finally:
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

        def done(_future: object = None) -> None:
            _close(response)
            pool.release()

        if reading is None:
            done()
        else:
            reading.add_done_callback(done)
