"""The object store: one global resourceVersion counter, CRUD with the apiserver's conflict rules, and
the event history that watches replay.

Everything that changes state goes through here (HTTP handlers, the garbage collector, the played
Job controller and kubelet), so every change gets a resourceVersion and a watch event exactly once.
"""

from __future__ import annotations

import copy
import datetime
import threading
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from . import admission, errors
from .resources import Resource, by_kind

Key = tuple[str, str, str, str]  # (group, plural, namespace or "", name)
HISTORY_LIMIT = 20000


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _finalizers(obj: dict[str, Any]) -> list[str]:
    """What still holds a deleted object: metadata finalizers, plus spec.finalizers for a Namespace."""
    pending = list(obj["metadata"].get("finalizers") or [])
    if obj.get("kind") == "Namespace":
        pending += (obj.get("spec") or {}).get("finalizers") or []
    return pending


def key_of(resource: Resource, namespace: str | None, name: str) -> Key:
    return (resource.group, resource.plural, namespace or "" if resource.namespaced else "", name)


@dataclass(frozen=True)
class Event:
    rv: int
    resource: Resource
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None


class Store:
    """Thread-safe in-memory objects; ``cond`` is notified on every change (watches wait on it)."""

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.RLock())
        self._objects: dict[Key, dict[str, Any]] = {}
        self._rv = 100
        self._history: deque[Event] = deque()
        self._compacted = self._rv  # events with rv <= this are forgotten
        self.listeners: list[Callable[[Event], None]] = []
        # (namespace, pod, container) -> {"current": str, "previous": str | None}
        self.logs: dict[tuple[str, str, str], dict[str, str | None]] = {}

    # --- versions and history -------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        with self.cond:
            return self._rv

    def _record(self, resource: Resource, type_: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        event = Event(int(obj["metadata"]["resourceVersion"]), resource, type_, copy.deepcopy(obj), old)
        self._history.append(event)
        while len(self._history) > HISTORY_LIMIT:
            self._compacted = self._history.popleft().rv
        for listener in self.listeners:
            listener(event)
        self.cond.notify_all()

    def compact(self) -> None:
        """Forget all history: a watch resuming from any resourceVersion before now gets 410."""
        with self.cond:
            self._history.clear()
            self._compacted = self._rv

    def events_after(self, rv: int, timeout: float) -> list[Event]:
        """Events newer than ``rv``, waiting up to ``timeout`` for one; 410 if ``rv`` was compacted."""
        with self.cond:
            if rv < self._compacted:
                raise errors.expired(f"too old resource version: {rv} ({self._compacted + 1})")
            if self._rv <= rv:
                self.cond.wait(timeout)
            if rv < self._compacted:
                raise errors.expired(f"too old resource version: {rv} ({self._compacted + 1})")
            result = []
            for event in reversed(self._history):
                if event.rv <= rv:
                    break
                result.append(event)
            result.reverse()
            return result

    def _bump(self, obj: dict[str, Any]) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)

    # --- reads ---------------------------------------------------------------------------
    def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        with self.cond:
            obj = self._objects.get(key_of(resource, namespace, name))
            if obj is None:
                raise errors.not_found(resource.plural, resource.group, name)
            return copy.deepcopy(obj)

    def find(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        with self.cond:
            obj = self._objects.get(key_of(resource, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, resource: Resource, namespace: str | None,
             match: Callable[[dict[str, Any]], bool] = lambda o: True) -> tuple[list[dict[str, Any]], int]:
        with self.cond:
            items = [copy.deepcopy(obj) for key, obj in sorted(self._objects.items())
                     if key[0] == resource.group and key[1] == resource.plural
                     and (not namespace or key[2] == namespace) and match(obj)]
            return items, self._rv

    def all_objects(self) -> list[tuple[Resource, dict[str, Any]]]:
        with self.cond:
            return [(by_kind(obj["kind"]), copy.deepcopy(obj)) for obj in self._objects.values()]

    # --- writes --------------------------------------------------------------------------
    def create(self, resource: Resource, namespace: str | None, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of a {resource.kind} must be a JSON object")
        obj = copy.deepcopy(body)
        obj["kind"], obj["apiVersion"] = resource.kind, resource.api_version
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        with self.cond:
            if resource.namespaced:
                if meta.get("namespace") and namespace and meta["namespace"] != namespace:
                    raise errors.bad_request("the namespace of the provided object does not match the namespace "
                                             "sent on the request")
                namespace = namespace or meta.get("namespace")
                if not namespace:
                    raise errors.bad_request("the namespace of the object must be given")
                ns = self._objects.get(("", "namespaces", "", namespace))
                if ns is None:
                    raise errors.not_found("namespaces", "", namespace)
                if ns["metadata"].get("deletionTimestamp"):
                    raise errors.forbidden(f'{errors.qualified(resource.plural, resource.group)} '
                                           f'"{meta.get("name") or meta.get("generateName", "")}" is forbidden: unable '
                                           f"to create new content in namespace {namespace} because it is being "
                                           "terminated", resource.plural, resource.group, meta.get("name"))
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise errors.invalid(resource.kind, resource.group, "",
                                         [("metadata.name", "Required value: name or generateName is required")])
                while True:
                    meta["name"] = meta["generateName"] + admission.random_suffix()
                    if key_of(resource, namespace, meta["name"]) not in self._objects:
                        break
            key = key_of(resource, namespace, meta["name"])
            if key in self._objects:
                raise errors.already_exists(resource.plural, resource.group, meta["name"])
            for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
                meta.pop(field, None)
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
            admission.default_on_create(resource, obj)
            admission.validate(resource, obj, None)
            self._bump(obj)
            self._objects[key] = obj
            self._record(resource, "ADDED", obj, None)
            return copy.deepcopy(obj)

    def update(self, resource: Resource, namespace: str | None, name: str, body: Any,
               subresource: str | None = None) -> dict[str, Any]:
        """PUT: a stale ``metadata.resourceVersion`` is 409; ``/status`` writes change only ``.status``."""
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of a {resource.kind} must be a JSON object")
        with self.cond:
            old = self.get(resource, namespace, name)
            meta = body.get("metadata") or {}
            if meta.get("name") and meta["name"] != name:
                raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the "
                                         f"URL ({name})")
            if meta.get("resourceVersion") and meta["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise errors.conflict(resource.plural, resource.group, name)
            return self._apply(resource, old, copy.deepcopy(body), subresource)

    def replace_with(self, resource: Resource, namespace: str | None, name: str,
                     change: Callable[[dict[str, Any]], dict[str, Any]], subresource: str | None = None,
                     precondition_rv: str | None = None) -> dict[str, Any]:
        """Read-modify-write under the lock (PATCH and in-process helpers); ``change`` gets a copy."""
        with self.cond:
            old = self.get(resource, namespace, name)
            new = change(copy.deepcopy(old))
            wanted = precondition_rv or (new.get("metadata") or {}).get("resourceVersion")
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                raise errors.conflict(resource.plural, resource.group, name)
            return self._apply(resource, old, new, subresource)

    def _apply(self, resource: Resource, old: dict[str, Any], new: dict[str, Any],
               subresource: str | None) -> dict[str, Any]:
        if subresource == "status":
            status = new.get("status")
            new = copy.deepcopy(old)
            new["status"] = status if status is not None else {}
        else:
            if resource.has_status:
                new["status"] = copy.deepcopy(old.get("status", {}))
            meta = new.get("metadata")
            if not isinstance(meta, dict):
                meta = new["metadata"] = {}
            for field in ("uid", "creationTimestamp", "deletionTimestamp", "namespace", "name", "generation"):
                if field in old["metadata"]:
                    meta[field] = old["metadata"][field]
                else:
                    meta.pop(field, None)
            if resource.kind == "Namespace":
                new["spec"] = old.get("spec", {})
        new["kind"], new["apiVersion"] = resource.kind, resource.api_version
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return old  # a no-op write does not move the resourceVersion, as on kube-apiserver
        admission.validate(resource, new, old)
        if subresource is None and admission.spec_changed(old, new):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        self._bump(new)
        key = key_of(resource, new["metadata"].get("namespace"), new["metadata"]["name"])
        self._objects[key] = new
        self._record(resource, "MODIFIED", new, old)
        if new["metadata"].get("deletionTimestamp") and not _finalizers(new):
            self._remove(resource, key)
        return copy.deepcopy(new)

    def delete(self, resource: Resource, namespace: str | None, name: str, propagation: str | None = None,
               preconditions: dict[str, Any] | None = None) -> dict[str, Any]:
        """DELETE with ``propagationPolicy``; returns the object as last stored (with deletionTimestamp if pending).

        Like kube-apiserver, batch/v1 Jobs default to ``Orphan`` (their pods stay) and everything else
        to ``Background``; the garbage collector does the cascade.
        """
        with self.cond:
            key = key_of(resource, namespace, name)
            obj = self._objects.get(key)
            if obj is None:
                raise errors.not_found(resource.plural, resource.group, name)
            meta = obj["metadata"]
            for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
                wanted = (preconditions or {}).get(field)
                if wanted and wanted != meta.get(field):
                    raise errors.conflict(resource.plural, resource.group, name,
                                          f"Precondition failed: {label} in precondition: {wanted}, "
                                          f"{label} in object meta: {meta.get(field)}")
            if propagation not in (None, "Orphan", "Background", "Foreground"):
                raise errors.bad_request(f'propagationPolicy: Unsupported value: "{propagation}": supported values: '
                                         '"Foreground", "Background", "Orphan"')
            policy = propagation or ("Orphan" if resource.kind == "Job" else "Background")
            if resource.kind == "Namespace":
                if meta.get("deletionTimestamp"):
                    return copy.deepcopy(obj)

                def terminate(o: dict[str, Any]) -> dict[str, Any]:
                    o["metadata"]["deletionTimestamp"] = now()
                    o["status"] = {"phase": "Terminating"}
                    return o
                self._force_update(resource, key, terminate)
                return copy.deepcopy(self._objects[key])
            if policy == "Orphan":
                self._orphan_dependents(meta["uid"])
            finalizers = list(meta.get("finalizers") or [])
            if policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            if finalizers:
                if not meta.get("deletionTimestamp") or finalizers != meta.get("finalizers"):
                    def mark(o: dict[str, Any]) -> dict[str, Any]:
                        o["metadata"].setdefault("deletionTimestamp", now())
                        o["metadata"]["deletionGracePeriodSeconds"] = 0
                        o["metadata"]["finalizers"] = finalizers
                        return o
                    self._force_update(resource, key, mark)
                return copy.deepcopy(self._objects[key])
            return self._remove(resource, key)

    def _force_update(self, resource: Resource, key: Key, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """A server-side change (deletion marks, GC edits) that bypasses the main/status split."""
        old = self._objects[key]
        new = change(copy.deepcopy(old))
        self._bump(new)
        self._objects[key] = new
        self._record(resource, "MODIFIED", new, old)
        if new["metadata"].get("deletionTimestamp") and not _finalizers(new):
            self._remove(resource, key)

    def force_update(self, resource: Resource, namespace: str | None, name: str,
                     change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        with self.cond:
            key = key_of(resource, namespace, name)
            if key in self._objects:
                self._force_update(resource, key, change)

    def _remove(self, resource: Resource, key: Key) -> dict[str, Any]:
        obj = self._objects.pop(key)
        old = copy.deepcopy(obj)
        self._bump(obj)
        self._record(resource, "DELETED", obj, old)
        if resource.kind == "Pod":
            for log_key in [k for k in self.logs if k[:2] == (key[2], key[3])]:
                del self.logs[log_key]
        return copy.deepcopy(obj)

    def _orphan_dependents(self, owner_uid: str) -> None:
        for key, obj in list(self._objects.items()):
            refs = obj["metadata"].get("ownerReferences") or []
            if any(ref.get("uid") == owner_uid for ref in refs):
                def drop(o: dict[str, Any]) -> dict[str, Any]:
                    kept = [r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
                    if kept:
                        o["metadata"]["ownerReferences"] = kept
                    else:
                        o["metadata"].pop("ownerReferences", None)
                    return o
                self._force_update(by_kind(obj["kind"]), key, drop)

    def exists_uid(self, uid: str) -> bool:
        with self.cond:
            return any(obj["metadata"]["uid"] == uid for obj in self._objects.values())

    # --- pod logs (the kubelet's part, set by test hooks) ---------------------------------
    def set_log(self, namespace: str, pod: str, container: str, text: str, *, previous: bool = False,
                append: bool = False) -> None:
        with self.cond:
            entry = self.logs.setdefault((namespace, pod, container), {"current": "", "previous": None})
            slot = "previous" if previous else "current"
            entry[slot] = ((entry[slot] or "") + text) if append else text
            self.cond.notify_all()

    def rotate_log(self, namespace: str, pod: str, container: str) -> None:
        """A container restart: the current log becomes ``previous``, the new one starts empty."""
        with self.cond:
            entry = self.logs.setdefault((namespace, pod, container), {"current": "", "previous": None})
            entry["previous"], entry["current"] = entry["current"], ""
            self.cond.notify_all()
