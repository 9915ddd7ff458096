"""The garbage collector and namespace controller, the only controllers the emulator runs.

Like kube-controller-manager's, it works asynchronously from watch events: when an owner goes, its
dependents (``metadata.ownerReferences``) are deleted if no other owner remains, recursively
(Background); owners deleted with ``Foreground`` keep a ``foregroundDeletion`` finalizer until their
dependents are gone; a dependent whose owner never existed is collected too. A terminating
namespace is emptied and then removed. A new namespace gets its ``default`` ServiceAccount and
``kube-root-ca.crt`` ConfigMap, as the controller-manager's serviceaccount and root-CA publishers do.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from .errors import ApiError
from .resources import Resource, by_kind
from .store import Event, Store


class GarbageCollector:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._queue: queue.Queue[Event | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="kubeapi-gc", daemon=True)
        self._idle = threading.Event()
        store.listeners.append(self._queue.put)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is None:
                return
            try:
                self._handle(event)
                if self._queue.empty():
                    self._sweep()
            except ApiError:
                pass  # the object changed under us; the next event revisits it

    # --- policies ---------------------------------------------------------------------------
    def _handle(self, event: Event) -> None:
        meta = event.obj["metadata"]
        if event.type == "ADDED" and event.resource.kind == "Namespace":
            self._populate_namespace(meta["name"])
        if event.type == "DELETED":
            self._collect_dependents(meta["uid"])
        elif meta.get("ownerReferences") and event.type == "ADDED":
            self._check_owners(event.resource, event.obj)

    def _populate_namespace(self, namespace: str) -> None:
        for kind, body in (("ServiceAccount", {"metadata": {"name": "default"}}),
                           ("ConfigMap", {"metadata": {"name": "kube-root-ca.crt"},
                                          "data": {"ca.crt": "emulator: no TLS, no CA\n"}})):
            try:
                self._store.create(by_kind(kind), namespace, body)
            except ApiError:
                pass  # already there, or the namespace is already terminating

    def _sweep(self) -> None:
        """Revisit objects waiting on the collector: foreground owners and terminating namespaces."""
        for resource, obj in self._store.all_objects():
            meta = obj["metadata"]
            if not meta.get("deletionTimestamp"):
                continue
            if resource.kind == "Namespace":
                self._empty_namespace(meta["name"])
            elif "foregroundDeletion" in (meta.get("finalizers") or []):
                self._foreground(resource, obj)

    def _dependents(self, owner_uid: str) -> list[tuple[Resource, dict[str, Any]]]:
        return [(r, o) for r, o in self._store.all_objects()
                if any(ref.get("uid") == owner_uid for ref in o["metadata"].get("ownerReferences") or [])]

    def _collect_dependents(self, owner_uid: str) -> None:
        for resource, obj in self._dependents(owner_uid):
            self._check_owners(resource, obj)

    def _check_owners(self, resource: Resource, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        refs = meta.get("ownerReferences") or []
        alive = [ref for ref in refs if self._store.exists_uid(ref.get("uid", ""))]
        if alive == refs:
            return
        if alive:
            def keep_alive(o: dict[str, Any]) -> dict[str, Any]:
                o["metadata"]["ownerReferences"] = alive
                return o
            self._store.force_update(resource, meta.get("namespace"), meta["name"], keep_alive)
        elif not meta.get("deletionTimestamp"):
            self._delete(resource, obj, "Background")

    def _foreground(self, resource: Resource, owner: dict[str, Any]) -> None:
        blocking = self._dependents(owner["metadata"]["uid"])
        for dep_resource, dep in blocking:
            if not dep["metadata"].get("deletionTimestamp"):
                self._delete(dep_resource, dep, "Foreground")
        if not self._dependents(owner["metadata"]["uid"]):
            def release(o: dict[str, Any]) -> dict[str, Any]:
                o["metadata"]["finalizers"] = [f for f in o["metadata"].get("finalizers") or []
                                               if f != "foregroundDeletion"]
                return o
            self._store.force_update(resource, owner["metadata"].get("namespace"), owner["metadata"]["name"], release)

    def _empty_namespace(self, namespace: str) -> None:
        remaining = [(r, o) for r, o in self._store.all_objects()
                     if r.namespaced and o["metadata"].get("namespace") == namespace]
        for resource, obj in remaining:
            if not obj["metadata"].get("deletionTimestamp"):
                self._delete(resource, obj, "Background")
            elif obj["metadata"].get("finalizers"):
                def clear(o: dict[str, Any]) -> dict[str, Any]:
                    o["metadata"]["finalizers"] = []
                    return o
                self._store.force_update(resource, namespace, obj["metadata"]["name"], clear)
        if not remaining:
            def finalize(o: dict[str, Any]) -> dict[str, Any]:
                o["spec"] = {"finalizers": []}
                o["metadata"]["finalizers"] = []
                return o
            self._store.force_update(by_kind("Namespace"), None, namespace, finalize)

    def _delete(self, resource: Resource, obj: dict[str, Any], policy: str) -> None:
        try:
            self._store.delete(resource, obj["metadata"].get("namespace"), obj["metadata"]["name"], policy,
                               {"uid": obj["metadata"]["uid"]})
        except ApiError:
            pass  # already gone or replaced by a new object of the same name
