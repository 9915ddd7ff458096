"""The resource types the emulator serves, and the discovery documents that describe them.

One table drives URL routing, discovery (``/api/v1``, ``/apis/...``) and the RBAC resource names,
so a kind added here is served consistently everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


RESOURCES: tuple[Resource, ...] = (
    Resource("", "v1", "namespaces", "namespace", "Namespace", False, ("status",), ("ns",)),
    Resource("", "v1", "configmaps", "configmap", "ConfigMap", True, (), ("cm",)),
    Resource("", "v1", "secrets", "secret", "Secret", True),
    Resource("", "v1", "services", "service", "Service", True, ("status",), ("svc",)),
    Resource("", "v1", "pods", "pod", "Pod", True, ("status", "log"), ("po",)),
    Resource("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", True, ("token",), ("sa",)),
    Resource("batch", "v1", "jobs", "job", "Job", True, ("status",)),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", True),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", True),
    Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", False),
    Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
             "ClusterRoleBinding", False),
)

_BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_KIND = {r.kind: r for r in RESOURCES}

# SelfSubjectAccessReview lets a client ask "may I?" without trying; served by the server module.
REVIEW_GROUP = "authorization.k8s.io"


def lookup(group: str, version: str, plural: str) -> Resource | None:
    return _BY_PATH.get((group, version, plural))


def by_kind(kind: str) -> Resource:
    return _BY_KIND[kind]


def groups() -> list[tuple[str, str]]:
    """(group, version) pairs served under ``/apis``."""
    seen: list[tuple[str, str]] = []
    for r in RESOURCES:
        if r.group and (r.group, r.version) not in seen:
            seen.append((r.group, r.version))
    seen.append((REVIEW_GROUP, "v1"))
    return seen


def version_doc() -> dict[str, Any]:
    return {"major": "1", "minor": "30", "gitVersion": "v1.30.0-paddle-nbext-emulator", "gitCommit": "emulator",
            "gitTreeState": "clean", "buildDate": "2024-01-01T00:00:00Z", "goVersion": "go1.22",
            "compiler": "gc", "platform": "linux/amd64"}


def api_versions_doc(address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}


def api_group_list_doc() -> dict[str, Any]:
    items = []
    for group, version in groups():
        gv = {"groupVersion": f"{group}/{version}", "version": version}
        items.append({"name": group, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": items}


def api_group_doc(group: str) -> dict[str, Any] | None:
    for g, version in groups():
        if g == group:
            gv = {"groupVersion": f"{g}/{version}", "version": version}
            return {"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": [gv], "preferredVersion": gv}
    return None


def resource_list_doc(group: str, version: str) -> dict[str, Any] | None:
    if (group, version) not in groups() and not (group == "" and version == "v1"):
        return None
    entries: list[dict[str, Any]] = []
    for r in RESOURCES:
        if r.group != group or r.version != version:
            continue
        entries.append({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
                        "verbs": VERBS, "shortNames": list(r.short_names)})
        for sub in r.subresources:
            kind, verbs = {"status": (r.kind, ["get", "patch", "update"]), "log": ("Pod", ["get"]),
                           "token": ("TokenRequest", ["create"])}[sub]
            entry = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced, "kind": kind,
                     "verbs": verbs}
            if sub == "token":
                entry.update(group="authentication.k8s.io", version="v1")
            entries.append(entry)
    if group == REVIEW_GROUP:
        entries.append({"name": "selfsubjectaccessreviews", "singularName": "", "namespaced": False,
                        "kind": "SelfSubjectAccessReview", "verbs": ["create"]})
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}
