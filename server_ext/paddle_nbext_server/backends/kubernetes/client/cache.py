"""A watch-backed cache of the job objects (ConfigMaps, Jobs, Pods by label selector).

One background thread per kind lists once, then watches from the list's resourceVersion and
hands every change to the asyncio loop (`loop.call_soon_threadsafe`); the stores themselves are
only touched on the loop, so reading them costs no API call and needs no lock.

Resumption: a watch that ends normally (server timeout) resumes from the last resourceVersion
seen (bookmarks keep it fresh); `410 Gone` (history compacted) or any failure to resume means
re-list and replace, emitting the differences as changes (deleted objects included), so no
update is lost across expiry or an API server restart.  While the API cannot be reached,
`error` holds the cause (and `connected` is False) until a list or watch works again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from .forbidden import Denial, denial_of, sentence_of

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
KINDS = ("configmaps", "jobs", "pods", "events", "pod_events", "workloads", "podgroups")
# Events carry none of our labels: the Job controller's FailedCreate events (quota, LimitRange,
# PodSecurity, a missing ServiceAccount...) are selected by field instead.  They are the only
# trace of a pod that could not be created, so status reads them; a Role without `events` rights
# (deployed before they were needed) only loses those reasons.
EVENTS_SELECTOR = "involvedObject.kind=Job,reason=FailedCreate"
# The pods' warnings: the kubelet's FailedMount (a home that cannot be mounted: status reads it)
# and Evicted, the scheduler's FailedScheduling, ... (the timeline says them in words).
POD_EVENTS_SELECTOR = "involvedObject.kind=Pod,type=Warning"
# Kueue's Workloads carry none of our labels either (Kueue makes them): all of the namespace's
# are watched, and only when a queue is configured; without Kueue (404) or without the right to
# read them (403) status just lacks the queue's words.
WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")
# Volcano's PodGroups are ours (labelled like the job's other objects), watched only with
# gang_scheduler 'volcano'; without Volcano's API (404) or the right to read them (403) status
# keeps the pods' own words.
PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")
OPTIONAL_KINDS = frozenset({"events", "pod_events", "workloads", "podgroups"})
CUSTOM_KINDS = frozenset({"workloads", "podgroups"})  # a 404 means the API is not installed
OPTIONAL_RETRY = 60.0

Handler = Callable[[str, str, dict[str, Any]], None]  # (kind, event type, object)


def describe_failure(error: BaseException) -> str:
    """One sentence for people from a client exception (connection refused, 403, ...).  An RBAC
    refusal says who may not do what where, and the Role that grants it (`forbidden.Denial`)."""
    denial = denial_of(error)
    if denial is not None:
        return denial.sentence()
    if isinstance(error, ApiException):
        try:
            message = json.loads(error.body or "{}").get("message") or error.reason
        except (ValueError, AttributeError):
            message = error.reason
        return f"HTTP {error.status}: {message}"
    reason = getattr(error, "reason", None)  # urllib3 MaxRetryError carries the real cause
    cause = reason if reason is not None else error
    return f"{type(cause).__name__}: {cause}"


@dataclass
class _Kind:
    name: str
    list_call: Callable[..., Any]
    field_selector: str | None = None
    unselected: bool = False  # every object of the namespace (no selector)
    resource_version: str = ""
    synced: bool = False


class WatchCache:
    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        selector: str,
        loop: asyncio.AbstractEventLoop,
        on_change: Handler,
        *,
        watch_timeout: int = 240,
        retry_delay: float = 1.0,
        workloads: bool = False,
        podgroups: bool = False,
    ) -> None:
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        self.namespace = namespace
        self.selector = selector
        self.loop = loop
        self.on_change = on_change
        self.watch_timeout = watch_timeout
        self.retry_delay = retry_delay
        self.kinds = {
            "configmaps": _Kind("configmaps", core.list_namespaced_config_map),
            "jobs": _Kind("jobs", batch.list_namespaced_job),
            "pods": _Kind("pods", core.list_namespaced_pod),
            "events": _Kind("events", core.list_namespaced_event, EVENTS_SELECTOR),
            "pod_events": _Kind("pod_events", core.list_namespaced_event, POD_EVENTS_SELECTOR),
        }
        if workloads:
            custom = client.CustomObjectsApi(api)

            def list_workloads(namespace: str, **kwargs: Any) -> Any:
                return custom.list_namespaced_custom_object(*WORKLOADS[:2], namespace, WORKLOADS[2], **kwargs)

            self.kinds["workloads"] = _Kind("workloads", list_workloads, unselected=True)
        if podgroups:
            groups = client.CustomObjectsApi(api)

            def list_podgroups(namespace: str, **kwargs: Any) -> Any:
                return groups.list_namespaced_custom_object(*PODGROUPS[:2], namespace, PODGROUPS[2], **kwargs)

            self.kinds["podgroups"] = _Kind("podgroups", list_podgroups)
        self.stores: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in KINDS}
        self.error: str | None = None
        self.warnings: dict[str, str] = {}  # optional kinds that cannot be read, and why
        self._errors: dict[str, str] = {}
        self._denials: dict[str, Denial] = {}  # kinds the API refuses to list or watch (RBAC), and how
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._responses: dict[str, Any] = {}
        self._synced = {kind: asyncio.Event() for kind in self.kinds}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for kind in self.kinds.values():
            thread = threading.Thread(target=self._run, args=(kind,), name=f"paddle-nbext-watch-{kind.name}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        """Stop the threads (closing open watches so they return at once)."""
        self._stop.set()
        for response in list(self._responses.values()):
            _abort(response)
        for thread in self._threads:
            thread.join(timeout=5)

    @property
    def synced(self) -> bool:
        return all(event.is_set() for event in self._synced.values())

    @property
    def connected(self) -> bool:
        return self.error is None

    async def wait_synced(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in self._synced.values())), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    # ------------------------------------------------------------------ worker threads

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        if self._stop.is_set():
            return
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # loop closed during shutdown
            self._stop.set()

    @property
    def denials(self) -> list[Denial]:
        """The RBAC refusals behind `error`, when it is one (`GET /config` names them)."""
        return list(self._denials.values())

    def _set_error(self, kind: str, message: str | None, denial: Denial | None = None) -> None:
        if message is None:
            self._errors.pop(kind, None)
        else:
            self._errors[kind] = message
        if denial is None:
            self._denials.pop(kind, None)
        else:
            self._denials[kind] = denial
        denials = [self._denials[k] for k in self._errors if k in self._denials]
        self.error = sentence_of(denials) if denials else next(iter(self._errors.values()), None)

    def _forget_warning(self, kind: str) -> None:
        """`kind` can be read again."""
        self.warnings.pop(kind, None)

    def _run(self, kind: _Kind) -> None:
        while not self._stop.is_set():
            try:
                if not kind.synced:
                    self._relist(kind)
                self._watch(kind)
            except ApiException as error:
                if error.status == 410:
                    kind.synced = False  # history gone: re-list
                    continue
                if kind.name in OPTIONAL_KINDS and (
                    error.status == 403 or (error.status == 404 and (kind.unselected or kind.name in CUSTOM_KINDS))
                ):
                    self._post(self._optional_unreadable, kind.name, describe_failure(error))
                    self._stop.wait(OPTIONAL_RETRY)
                    continue
                self._post(self._set_error, kind.name, describe_failure(error), denial_of(error))
                kind.synced = False
                self._stop.wait(self.retry_delay)
            except Exception as error:  # noqa: BLE001 - connection refused, reset, timeouts ...
                if self._stop.is_set():
                    return
                self._post(self._set_error, kind.name, describe_failure(error))
                self._stop.wait(self.retry_delay)

    def _selectors(self, kind: _Kind) -> dict[str, str]:
        if kind.unselected:
            return {}
        return {"field_selector": kind.field_selector} if kind.field_selector else {"label_selector": self.selector}

    def _relist(self, kind: _Kind) -> None:
        response = kind.list_call(self.namespace, **self._selectors(kind), _preload_content=False, _request_timeout=30)
        body = json.loads(response.data)
        kind.resource_version = (body.get("metadata") or {}).get("resourceVersion", "")
        kind.synced = True
        self._post(self._replace, kind.name, body.get("items") or [])
        self._post(self._set_error, kind.name, None)
        self._post(self._forget_warning, kind.name)

    def _watch(self, kind: _Kind) -> None:
        response = kind.list_call(
            self.namespace,
            **self._selectors(kind),
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=kind.resource_version,
            timeout_seconds=self.watch_timeout,
            _preload_content=False,
            _request_timeout=(10, self.watch_timeout + 30),
        )
        self._responses[kind.name] = response
        self._post(self._set_error, kind.name, None)
        try:
            for line in iter_resp_lines(response):
                if self._stop.is_set():
                    return
                event = json.loads(line)
                kind_of_event, obj = event.get("type"), event.get("object") or {}
                if kind_of_event == "ERROR":
                    if obj.get("code") == 410:
                        kind.synced = False
                        return
                    raise ApiException(status=obj.get("code") or 500, reason=obj.get("message") or "watch error")
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if version:
                    kind.resource_version = version
                if kind_of_event == "BOOKMARK":
                    continue
                self._post(self._apply, kind.name, kind_of_event, obj)
        finally:
            self._responses.pop(kind.name, None)
            response.release_conn()

    # ------------------------------------------------------------------ on the loop

    def _optional_unreadable(self, kind: str, message: str) -> None:
        """An optional kind the Role does not let us read: synced as empty, with a warning."""
        self.warnings[kind] = message
        self._set_error(kind, None)
        self._synced[kind].set()

    def _apply(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        store = self.stores[kind]
        if event_type == DELETED:
            store.pop(name, None)
        else:
            store[name] = obj
        self.on_change(kind, event_type, obj)

    def _replace(self, kind: str, items: list[dict[str, Any]]) -> None:
        store = self.stores[kind]
        fresh = {(item.get("metadata") or {}).get("name", ""): item for item in items}
        for name in [n for n in store if n not in fresh]:
            self._apply(kind, DELETED, store[name])
        for name, item in fresh.items():
            old = store.get(name)
            if old is None:
                self._apply(kind, ADDED, item)
            elif (old.get("metadata") or {}).get("resourceVersion") != (item.get("metadata") or {}).get("resourceVersion"):
                self._apply(kind, MODIFIED, item)
        self._synced[kind].set()

    def put(self, kind: str, obj: dict[str, Any]) -> None:
        """Record an object this process just wrote (its watch event follows; same result)."""
        name = (obj.get("metadata") or {}).get("name", "")
        old = self.stores[kind].get(name)
        if old is not None and _newer(old, obj):
            return
        self._apply(kind, MODIFIED if old else ADDED, obj)

    def forget(self, kind: str, name: str) -> None:
        obj = self.stores[kind].get(name)
        if obj is not None:
            self._apply(kind, DELETED, obj)


def _abort(response: Any) -> None:
    """End an open watch that another thread is reading.

    `close()` alone is not enough on TLS: it waits for the reader's buffer lock, so it blocks
    until the API server sends something (up to a bookmark interval, about a minute).  Shutting
    the socket down makes the blocked read return at once; the reading thread then closes."""
    connection = getattr(response, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed or reset
            sock.shutdown(socket.SHUT_RDWR)
        return
    try:
        response.close()
    except Exception:  # noqa: BLE001 - closing a dead socket may raise anything
        pass


def _newer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when `a` is a later version than `b` (resourceVersions compare as integers on etcd)."""
    try:
        return int(a["metadata"]["resourceVersion"]) > int(b["metadata"]["resourceVersion"])
    except (KeyError, ValueError, TypeError):
        return False
