"""The connection to the API and every write through it: blocking client calls in threads, unreachable
API -> 503 with the cause, created objects rolled back whole, API warnings kept for GET /config.

A part of `KubernetesBackend` (backend.py); every other part that talks to the API does it here."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ...base import BackendForbidden, BackendUnavailable, InvalidRequest, JobExists
from ..settings import BackendSettings
from .api_names import CUSTOM_OBJECTS, WARNING_TEXT
from .cache import describe_failure
from .connection import Connection, connect
from .forbidden import denial_of


class KubernetesClient:
    """The connection to the API and every write through it."""

    def __init__(self, settings: BackendSettings, log: logging.Logger) -> None:
        self.settings = settings
        self.log = log
        self.connection: Connection | None = None
        self._connect_lock = asyncio.Lock()
        self._api_warnings: dict[str, str] = {}  # text -> "Kind name: text", newest last
        self.apis: dict[tuple[str, str], bool] = {}  # (group, version) -> served (JobSet, Kueue, Volcano)

    async def connect(self) -> Connection:
        """The connection, made at the first call (the settings' kubeconfig, else the service account)."""
        if self.connection is None:
            async with self._connect_lock:
                if self.connection is None:
                    settings = self.settings
                    try:
                        self.connection = await asyncio.to_thread(connect, settings.kubeconfig, settings.context, settings.namespace)
                    except Exception as error:  # noqa: BLE001 - ConfigException, file errors
                        raise BackendUnavailable(f"Kubernetes is not configured: {error}") from None
        return self.connection

    def host(self) -> str:
        """The API server's address, for sentences ("the Kubernetes API" before it is known)."""
        return self.connection.host if self.connection else "the Kubernetes API"

    def warnings(self) -> list[str]:
        """The API server's recent `Warning` headers, oldest first (for GET /config)."""
        return list(self._api_warnings.values())

    def close(self) -> None:
        """Blocking: close the connection's pool (server shutdown)."""
        if self.connection is not None:
            self.connection.api.close()
            self.connection = None

    def unavailable(self, doing: str, error: BaseException) -> BackendUnavailable:
        return BackendUnavailable(f"cannot {doing}: the Kubernetes API at {self.host()} is unreachable ({describe_failure(error)})")

    async def call(self, doing: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one blocking client call in a thread; unreachable API -> BackendUnavailable."""
        kwargs.setdefault("_request_timeout", 30)
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except ApiException:
            raise
        except (urllib3.exceptions.HTTPError, OSError) as error:  # refused, reset, TLS, DNS, timeouts
            raise self.unavailable(doing, error) from None
        except Exception as error:  # noqa: BLE001 - the client itself refused (a model's validation, a bad value)
            raise BackendUnavailable(
                f"cannot {doing}: the Kubernetes client refused the request ({type(error).__name__}: {error}); "
                "this comes from a value in the configuration (c.KubernetesBackend) or the job, not from the API"
            ) from None

    def verb_for(self, verb: str, kind: str) -> Any:
        """The client call `verb` ("create" or "delete") of `kind`, taking (namespace, body) or
        (name, namespace) as the typed APIs do; a JobSet or a PodGroup goes through the custom objects API."""
        if kind in CUSTOM_OBJECTS:
            assert self.connection is not None
            custom = client.CustomObjectsApi(self.connection.api)
            group, version, plural = CUSTOM_OBJECTS[kind]

            def create(namespace: str, body: dict[str, Any], **kwargs: Any) -> Any:
                return custom.create_namespaced_custom_object(group, version, namespace, plural, body, **kwargs)

            def delete(name: str, namespace: str, **kwargs: Any) -> Any:
                return custom.delete_namespaced_custom_object(group, version, namespace, plural, name, **kwargs)

            return create if verb == "create" else delete
        api, suffix = self.api_for(kind)
        return getattr(api, f"{verb}_namespaced_{suffix}")

    async def api_exists(self, connection: Connection, group_version: tuple[str, str]) -> bool | None:
        """Whether the API server serves `group_version` (discovery, once per connection; None
        when it could not be asked)."""
        if group_version not in self.apis:
            custom = client.CustomObjectsApi(connection.api)
            try:
                await self.call(
                    f"look for the {'/'.join(group_version)} API", custom.get_api_resources, *group_version, _preload_content=False
                )
                self.apis[group_version] = True
            except ApiException as error:
                if error.status != 404:
                    return None
                self.apis[group_version] = False
            except BackendUnavailable:
                return None
        return self.apis[group_version]

    def api_for(self, kind: str) -> tuple[Any, str]:
        assert self.connection is not None
        api = self.connection.api
        return {
            "ConfigMap": (client.CoreV1Api(api), "config_map"),
            "Service": (client.CoreV1Api(api), "service"),
            "ServiceAccount": (client.CoreV1Api(api), "service_account"),
            "Job": (client.BatchV1Api(api), "job"),
            "Role": (client.RbacAuthorizationV1Api(api), "role"),
            "RoleBinding": (client.RbacAuthorizationV1Api(api), "role_binding"),
        }[kind]

    async def create(self, manifest: dict[str, Any], created: list[dict[str, Any]], job: str) -> dict[str, Any]:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        namespace = manifest["metadata"]["namespace"]
        create = self.verb_for("create", kind)
        try:
            response = await self.call(f"create {kind} {name}", create, namespace, manifest, _preload_content=False)
        except ApiException as error:
            cause = describe_failure(error)
            if error.status == 409:
                if not created:
                    raise JobExists(
                        f"a job named '{job}' already exists in namespace {namespace}; choose another job_name", field="job_name"
                    ) from None
                raise JobExists(
                    f"creating {kind} {name} failed: it already exists ({cause}); nothing of job '{job}' was left behind", field="job_name"
                ) from None
            if error.status == 403 and "quota" in cause.lower():
                raise InvalidRequest(
                    f"creating {kind} {name} failed: the namespace quota does not allow it ({cause}); ask for less or free resources"
                ) from None
            if (denial := denial_of(error)) is not None:
                raise BackendForbidden(
                    f"creating {kind} {name} was forbidden by RBAC: {denial.sentence()}; nothing of job '{job}' was left behind"
                ) from None
            if error.status == 403:
                raise BackendUnavailable(
                    f"creating {kind} {name} was forbidden by RBAC ({cause}); the notebook's service account needs the Role in deploy/; nothing was left behind"
                ) from None
            if error.status in (400, 422):
                raise InvalidRequest(f"creating {kind} {name} failed: Kubernetes rejected it as invalid ({cause})") from None
            raise BackendUnavailable(f"creating {kind} {name} failed: {cause}") from None
        self._note_warnings(kind, name, response)
        body: dict[str, Any] = json.loads(response.data)
        created.append(body)
        return body

    def _note_warnings(self, kind: str, name: str, response: Any) -> None:
        """The API server's `Warning` headers (deprecated fields such as the in-tree cephfs
        volume, values it will refuse in a later release): logged, and kept for `GET /config`
        so that the admin sees them."""
        headers = getattr(response, "headers", None) or {}
        raw = headers.get("Warning") if hasattr(headers, "get") else None
        if not raw:
            return
        for text in WARNING_TEXT.findall(raw) or [raw]:
            message = f"{kind} {name}: {text}"
            if text not in self._api_warnings:
                self.log.warning("paddle-nbext: the Kubernetes API warns: %s", message)
            self._api_warnings[text] = message
            while len(self._api_warnings) > 20:
                self._api_warnings.pop(next(iter(self._api_warnings)))

    async def rollback(self, created: list[dict[str, Any]]) -> None:
        """Delete what this submit created, newest first (background cascade for Job pods)."""
        for obj in reversed(created):
            kind, name = obj["kind"], obj["metadata"]["name"]
            delete = self.verb_for("delete", kind)
            try:
                await asyncio.to_thread(
                    delete,
                    name,
                    obj["metadata"]["namespace"],
                    propagation_policy="Background",
                    _request_timeout=30,
                    _preload_content=False,
                )
            except ApiException as error:
                if error.status != 404:
                    self.log.error("paddle-nbext: could not roll back %s %s: %s", kind, name, describe_failure(error))
            except Exception as error:  # noqa: BLE001
                self.log.error("paddle-nbext: could not roll back %s %s: %s", kind, name, describe_failure(error))
