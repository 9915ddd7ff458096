"""HTTP front of the emulator: routing, authentication, authorization, watches and logs over real HTTP.

A ``ThreadingHTTPServer`` on 127.0.0.1 speaking HTTP/1.1 with keep-alive; watch and ``follow`` log
responses are chunked streams. ``down()`` closes the listener *and* every open connection (clients
see connection refused / reset), and serving resumes on the same port with the same state - that
is how the suite provokes "API unreachable" and recovery.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import json
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator
from urllib.parse import parse_qs, urlsplit

from . import errors, resources, selectors
from .errors import ApiError
from .gc import GarbageCollector
from .patch import json_patch, merge_patch, strategic_merge_patch
from .rbac import Attributes, Authenticator, Authorizer, User
from .resources import Resource, by_kind
from .store import Event, Store, now

BOOKMARK_INTERVAL = 2.0
DEFAULT_WATCH_TIMEOUT = 1800.0
_PATCHERS: dict[str, Callable[[Any, Any], Any]] = {
    "application/merge-patch+json": merge_patch,
    "application/strategic-merge-patch+json": strategic_merge_patch,
    "application/json-patch+json": json_patch,
}


class KubeAPIServer:
    """The emulator. ``start()`` serves on ``url``; ``admin_token`` is allowed everything.

    Test hooks: ``compact_history()``, ``drop_watches()``, ``down()``, ``request_counts()``,
    ``reset_request_counts()``, and ``store`` for in-process changes (the played kubelet and Job
    controller) that must not count as API requests.
    """

    def __init__(self, port: int = 0) -> None:
        self.store = Store()
        self.authn = Authenticator(self.store)
        self.authz = Authorizer(self.store)
        self._gc = GarbageCollector(self.store)
        self._counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._counts_lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.watch_epoch = 0
        self.stopping = threading.Event()
        self.port = port

    # --- lifecycle ----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_token(self) -> str:
        return self.authn.admin_token

    def start(self) -> None:
        if not self._gc_started():
            self._gc.start()
        self.stopping.clear()
        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), _Handler)
        httpd.daemon_threads = True
        httpd.api = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="kubeapi-http", daemon=True)
        self._thread.start()

    def _gc_started(self) -> bool:
        return self._gc._thread.is_alive()

    def stop(self) -> None:
        """Stop serving: close the listener and every open connection (watches end abruptly)."""
        self.stopping.set()
        with self.store.cond:
            self.store.cond.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        with self._connections_lock:
            for conn in list(self._connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self._connections.clear()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def close(self) -> None:
        self.stop()
        self._gc.stop()

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """Unreachable inside the block (connection refused), back on the same port after it."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    # --- hooks --------------------------------------------------------------------------------
    def compact_history(self) -> None:
        self.store.compact()

    def drop_watches(self) -> None:
        """End every open watch stream cleanly, as an apiserver does when a watch times out."""
        with self.store.cond:
            self.watch_epoch += 1
            self.store.cond.notify_all()

    def request_counts(self) -> dict[tuple[str, str], int]:
        """Requests served so far by ``(verb, resource)``, e.g. ``("create", "configmaps")``,
        ``("watch", "pods")``, ``("get", "pods/log")``; non-resource URLs as ``("get", "/version")``."""
        with self._counts_lock:
            return dict(self._counts)

    def reset_request_counts(self) -> None:
        with self._counts_lock:
            self._counts.clear()

    def count(self, verb: str, what: str) -> None:
        with self._counts_lock:
            self._counts[(verb, what)] += 1

    def track(self, conn: socket.socket, add: bool) -> None:
        with self._connections_lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)


class _Route:
    """A parsed resource URL."""

    def __init__(self, group: str, version: str, plural: str, namespace: str, name: str, sub: str) -> None:
        self.group, self.version, self.plural = group, version, plural
        self.namespace, self.name, self.sub = namespace, name, sub
        self.resource: Resource | None = resources.lookup(group, version, plural)


def _parse_route(path: str) -> _Route | None:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    else:
        namespace = ""
    if len(rest) > 3:
        return _Route(group, version, "", namespace, "", "")
    rest += [""] * (3 - len(rest))
    return _Route(group, version, rest[0], namespace, rest[1], rest[2])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kubeapi-emulator"

    @property
    def api(self) -> KubeAPIServer:
        return self.server.api  # type: ignore[attr-defined,no-any-return]

    def setup(self) -> None:
        super().setup()
        self.api.track(self.connection, True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.api.track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
        return

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # --- plumbing -----------------------------------------------------------------------------
    def _send_json(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_text(self, code: int, text: str) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _end_stream(self) -> None:
        with contextlib.suppress(OSError):
            self.wfile.write(b"0\r\n\r\n")

    def _client_gone(self) -> bool:
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            body = self._read_body()
            user = self.api.authn.authenticate(self.headers.get("Authorization"))
            route = _parse_route(url.path)
            if route is None:
                self._non_resource(method, url.path, user)
                return
            self._resource(method, route, query, body, user)
        except ApiError as exc:
            self._send_json(exc.code, exc.status())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _non_resource(self, method: str, path: str, user: User) -> None:
        self.api.count(method.lower(), path)
        self.api.authz.check(user, Attributes(method.lower(), "", "", path=path))
        parts = [p for p in path.split("/") if p]
        doc: Any = None
        if method == "GET":
            if path in ("/healthz", "/readyz", "/livez"):
                self._send_text(200, "ok")
                return
            if parts == ["version"]:
                doc = resources.version_doc()
            elif parts == ["api"]:
                doc = resources.api_versions_doc(f"127.0.0.1:{self.api.port}")
            elif parts == ["apis"]:
                doc = resources.api_group_list_doc()
            elif len(parts) == 2 and parts[0] == "api":
                doc = resources.resource_list_doc("", parts[1])
            elif len(parts) == 2 and parts[0] == "apis":
                doc = resources.api_group_doc(parts[1])
            elif len(parts) == 3 and parts[0] == "apis":
                doc = resources.resource_list_doc(parts[1], parts[2])
        if doc is None:
            raise errors.path_not_found()
        self._send_json(200, doc)

    def _resource(self, method: str, route: _Route, query: dict[str, str], body: Any, user: User) -> None:
        if route.group == resources.REVIEW_GROUP and route.plural == "selfsubjectaccessreviews" and method == "POST":
            self._access_review(body, user)
            return
        verb = {"GET": "get" if route.name else ("watch" if query.get("watch") in ("true", "1") else "list"),
                "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if route.name else "deletecollection"}[method]
        if route.name and method == "POST" and not route.sub:
            raise errors.method_not_allowed()
        attrs = Attributes(verb, route.group, route.plural, route.sub, route.namespace, route.name)
        self.api.count(verb, attrs.resource_path)
        self.api.authz.check(user, attrs)
        resource = route.resource
        if resource is None or (route.sub and route.sub not in resource.subresources) \
                or (route.namespace and not resource.namespaced):
            raise errors.path_not_found()
        store = self.api.store
        namespace = route.namespace or None
        if route.sub == "log":
            if method != "GET":
                raise errors.method_not_allowed()
            self._pod_log(namespace or "", route.name, query)
        elif route.sub == "token":
            if method != "POST":
                raise errors.method_not_allowed()
            self._token_request(namespace or "", route.name, body)
        elif verb == "get":
            self._send_json(200, store.get(resource, namespace, route.name))
        elif verb == "list":
            self._list(resource, namespace, query)
        elif verb == "watch":
            self._watch(resource, namespace, query)
        elif verb == "create":
            self._reject_dry_run(query)
            self._send_json(201, store.create(resource, namespace, body))
        elif verb == "update":
            self._reject_dry_run(query)
            self._send_json(200, store.update(resource, namespace, route.name, body, route.sub or None))
        elif verb == "patch":
            self._reject_dry_run(query)
            self._patch(resource, namespace, route, body)
        elif verb == "delete":
            self._reject_dry_run(query)
            policy, preconditions = self._delete_options(query, body)
            obj = store.delete(resource, namespace, route.name, policy, preconditions)
            # Like kube-apiserver: Pods, Services and ServiceAccounts (and deletions still pending on
            # finalizers) answer with the object, the rest with a Success Status; typed clients rely on it.
            returns_object = resource.kind in ("Pod", "Service", "ServiceAccount")
            self._send_json(200, obj if obj["metadata"].get("deletionTimestamp") or returns_object
                            else {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                  "details": {"name": route.name, "group": resource.group,
                                              "kind": resource.plural, "uid": obj["metadata"]["uid"]}})
        else:
            self._reject_dry_run(query)
            policy, _ = self._delete_options(query, body)
            match = selectors.matcher(query.get("labelSelector"), query.get("fieldSelector"))
            items, _ = store.list(resource, namespace, match)
            deleted = []
            for item in items:
                with contextlib.suppress(ApiError):
                    deleted.append(store.delete(resource, item["metadata"].get("namespace"),
                                                item["metadata"]["name"], policy))
            self._send_json(200, {"kind": f"{resource.kind}List", "apiVersion": resource.api_version,
                                  "metadata": {"resourceVersion": str(store.resource_version)}, "items": deleted})

    @staticmethod
    def _reject_dry_run(query: dict[str, str]) -> None:
        if query.get("dryRun"):
            raise errors.bad_request("dryRun: the test API server does not emulate server-side dry run; "
                                     "validate manifests locally instead")

    @staticmethod
    def _delete_options(query: dict[str, str], body: Any) -> tuple[str | None, dict[str, Any] | None]:
        options = body if isinstance(body, dict) else {}
        policy = query.get("propagationPolicy") or options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is True:
            policy = "Orphan"
        return policy, options.get("preconditions")

    def _list(self, resource: Resource, namespace: str | None, query: dict[str, str]) -> None:
        match = selectors.matcher(query.get("labelSelector"), query.get("fieldSelector"))
        items, rv = self.api.store.list(resource, namespace, match)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if query.get("continue"):
            try:
                after = json.loads(base64.urlsafe_b64decode(query["continue"]))
            except ValueError:
                raise errors.bad_request("continue: the continue token is malformed") from None
            items = [i for i in items
                     if [i["metadata"].get("namespace", ""), i["metadata"]["name"]] > after]
        limit = int(query.get("limit") or 0)
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps([last.get("namespace", ""), last["name"]]).encode()).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        self._send_json(200, {"kind": f"{resource.kind}List", "apiVersion": resource.api_version,
                              "metadata": meta, "items": items})

    def _patch(self, resource: Resource, namespace: str | None, route: _Route, body: Any) -> None:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        patcher = _PATCHERS.get(content_type)
        if patcher is None:
            raise errors.unsupported_media_type(content_type)
        if body is None:
            raise errors.bad_request("the patch body is empty")
        result = self.api.store.replace_with(resource, namespace, route.name, lambda old: patcher(old, body),
                                             route.sub or None)
        self._send_json(200, result)

    # --- watch --------------------------------------------------------------------------------
    def _watch(self, resource: Resource, namespace: str | None, query: dict[str, str]) -> None:
        store = self.api.store
        match = selectors.matcher(query.get("labelSelector"), query.get("fieldSelector"))
        rv_param = query.get("resourceVersion") or ""
        try:
            cursor = int(rv_param) if rv_param not in ("", "0") else None
        except ValueError:
            raise errors.bad_request(f'resourceVersion: Invalid value: "{rv_param}": must be an integer') from None
        timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        deadline = time.monotonic() + timeout
        epoch = self.api.watch_epoch
        self._start_stream("application/json")
        try:
            if cursor is None:
                items, cursor = store.list(resource, namespace, match)
                for item in items:
                    self._event("ADDED", item)
            last_sent = time.monotonic()
            while not self.api.stopping.is_set() and epoch == self.api.watch_epoch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    events = store.events_after(cursor, min(remaining, 0.25))
                except ApiError as exc:
                    self._chunk(json.dumps({"type": "ERROR", "object": exc.status()}).encode() + b"\n")
                    break
                for event in events:
                    cursor = event.rv
                    kind = _visible(event, resource, namespace, match)
                    if kind:
                        self._event(kind, event.obj)
                        last_sent = time.monotonic()
                if not events:
                    if self._client_gone():
                        return
                    if bookmarks and time.monotonic() - last_sent >= BOOKMARK_INTERVAL:
                        self._event("BOOKMARK", {"kind": resource.kind, "apiVersion": resource.api_version,
                                                 "metadata": {"resourceVersion": str(cursor)}})
                        last_sent = time.monotonic()
            if self.api.stopping.is_set():
                return
            self._end_stream()
        except OSError:
            self.close_connection = True

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        self._chunk(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

    # --- pods/log -----------------------------------------------------------------------------
    def _pod_log(self, namespace: str, name: str, query: dict[str, str]) -> None:
        store = self.api.store
        pod = store.get(by_kind("Pod"), namespace, name)
        containers = [c.get("name") for c in pod.get("spec", {}).get("containers", [])]
        container = query.get("container")
        if not container:
            if len(containers) != 1:
                raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                         f"[{' '.join(containers)}]")
            container = containers[0]
        if container not in containers:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        previous = query.get("previous") in ("true", "1")
        entry = store.logs.get((namespace, name, container))
        if previous:
            if entry is None or entry.get("previous") is None:
                raise errors.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
            self._send_text(200, _tail(entry["previous"] or "", query.get("tailLines")))
            return
        if entry is None:
            if pod.get("status", {}).get("phase", "Pending") == "Pending":
                waiting = "ContainerCreating"
                for status in pod.get("status", {}).get("containerStatuses") or []:
                    if status.get("name") == container and status.get("state", {}).get("waiting"):
                        waiting = status["state"]["waiting"].get("reason", waiting)
                raise errors.bad_request(f'container "{container}" in pod "{name}" is waiting to start: {waiting}')
            entry = {"current": "", "previous": None}
        text = _tail(entry["current"] or "", query.get("tailLines"))
        if query.get("follow") not in ("true", "1"):
            self._send_text(200, text)
            return
        self._follow_log(namespace, name, container, text, len(entry["current"] or ""))

    def _follow_log(self, namespace: str, name: str, container: str, first: str, offset: int) -> None:
        store = self.api.store
        self._start_stream("text/plain")
        try:
            if first:
                self._chunk(first.encode())
            while not self.api.stopping.is_set():
                with store.cond:
                    store.cond.wait(0.25)
                    entry = store.logs.get((namespace, name, container))
                    pod = store.find(by_kind("Pod"), namespace, name)
                current = (entry or {}).get("current") or ""
                if len(current) < offset:
                    offset = 0  # the container restarted; its new log starts over
                if len(current) > offset:
                    self._chunk(current[offset:].encode())
                    offset = len(current)
                if pod is None or pod.get("status", {}).get("phase") in ("Succeeded", "Failed") \
                        or self._client_gone():
                    break
            if not self.api.stopping.is_set():
                self._end_stream()
        except OSError:
            self.close_connection = True

    # --- tokens and reviews -------------------------------------------------------------------
    def _token_request(self, namespace: str, name: str, body: Any) -> None:
        sa = self.api.store.get(by_kind("ServiceAccount"), namespace, name)
        spec = dict((body or {}).get("spec") or {})
        spec.setdefault("audiences", ["https://kubernetes.default.svc"])
        spec.setdefault("expirationSeconds", 3600)
        token = self.api.authn.issue_service_account_token(namespace, name, sa["metadata"]["uid"])
        expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + int(spec["expirationSeconds"])))
        self._send_json(201, {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                              "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now()},
                              "spec": spec, "status": {"token": token, "expirationTimestamp": expiry}})

    def _access_review(self, body: Any, user: User) -> None:
        self.api.count("create", "selfsubjectaccessreviews")
        spec = (body or {}).get("spec") or {}
        ra = spec.get("resourceAttributes")
        if ra:
            attrs = Attributes(ra.get("verb", ""), ra.get("group", ""), ra.get("resource", ""),
                               ra.get("subresource", ""), ra.get("namespace", ""), ra.get("name", ""))
        else:
            nra = spec.get("nonResourceAttributes") or {}
            attrs = Attributes(nra.get("verb", ""), "", "", path=nra.get("path", ""))
        allowed = self.api.authz.allowed(user, attrs)
        self._send_json(201, {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                              "metadata": {"creationTimestamp": None}, "spec": spec,
                              "status": {"allowed": allowed}})


def _tail(text: str, tail_lines: str | None) -> str:
    if not tail_lines:
        return text
    count = int(tail_lines)
    if count <= 0:
        return ""
    return "".join(text.splitlines(keepends=True)[-count:])


def _visible(event: Event, resource: Resource, namespace: str | None,
             match: Callable[[dict[str, Any]], bool]) -> str | None:
    """The event type this watcher sees: objects entering/leaving its selector are ADDED/DELETED."""
    if event.resource != resource:
        return None
    if namespace and event.obj["metadata"].get("namespace") != namespace:
        return None
    now_matches = match(event.obj)
    if event.type == "MODIFIED":
        was = event.old is not None and match(event.old)
        if was and now_matches:
            return "MODIFIED"
        if now_matches:
            return "ADDED"
        return "DELETED" if was else None
    return event.type if now_matches else None
