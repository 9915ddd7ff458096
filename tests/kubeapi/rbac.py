"""Bearer-token authentication and RBAC authorization, worded like kube-apiserver's.

Identities: the admin token (member of ``system:masters``, allowed everything) and tokens minted by
``serviceaccounts/token`` (TokenRequest) for ``system:serviceaccount:<ns>:<name>``; a token stops
working when its ServiceAccount is deleted, as bound tokens do. Authorization evaluates Roles and
ClusterRoles reached through RoleBindings and ClusterRoleBindings, with apiGroups, resources
(including ``pods/log``-style subresources and ``*``), verbs and resourceNames.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .resources import by_kind
from .store import Store


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    sa_namespace: str | None = None
    sa_name: str | None = None
    sa_uid: str | None = None


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do, in RBAC terms."""
    verb: str
    group: str
    resource: str  # plural; "" for non-resource URLs
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def resource_path(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass
class Authenticator:
    store: Store
    admin_token: str = field(default_factory=lambda: "admin-" + secrets.token_hex(16))
    _tokens: dict[str, User] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._tokens[self.admin_token] = User("kubernetes-admin", ("system:masters", "system:authenticated"))

    def issue_service_account_token(self, namespace: str, name: str, uid: str) -> str:
        token = "sa-" + secrets.token_hex(24)
        user = User(f"system:serviceaccount:{namespace}:{name}",
                    ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
                    namespace, name, uid)
        with self._lock:
            self._tokens[token] = user
        return token

    def authenticate(self, header: str | None) -> User:
        if not header or not header.startswith("Bearer "):
            raise errors.unauthorized()
        with self._lock:
            user = self._tokens.get(header[len("Bearer "):].strip())
        if user is None:
            raise errors.unauthorized()
        if user.sa_uid is not None:
            sa = self.store.find(by_kind("ServiceAccount"), user.sa_namespace, user.sa_name or "")
            if sa is None or sa["metadata"]["uid"] != user.sa_uid:
                raise errors.unauthorized()
        return user


def _rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource:
        return any(u == "*" or u == attrs.path or (u.endswith("*") and attrs.path.startswith(u[:-1]))
                   for u in rule.get("nonResourceURLs") or [])
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    resources = rule.get("resources") or []
    wanted = attrs.resource_path
    if not any(r == "*" or r == wanted or (attrs.subresource and r in (f"*/{attrs.subresource}",
                                                                       f"{attrs.resource}/*"))
               for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or (bool(attrs.name) and attrs.name in names)


def _subject_matches(subject: dict[str, Any], user: User, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        return (user.sa_name == subject.get("name")
                and user.sa_namespace == (subject.get("namespace") or binding_namespace))
    if kind == "User":
        return subject.get("name") == user.name
    if kind == "Group":
        return subject.get("name") in user.groups
    return False


class Authorizer:
    def __init__(self, store: Store) -> None:
        self._store = store

    def allowed(self, user: User, attrs: Attributes) -> bool:
        if "system:masters" in user.groups:
            return True
        if not attrs.resource and (attrs.path in ("/version", "/api", "/apis", "/healthz", "/readyz", "/livez")
                                   or attrs.path.startswith(("/api/", "/apis/"))):
            return True  # discovery is open to every authenticated user (system:discovery)
        if attrs.resource == "selfsubjectaccessreviews":
            return True  # system:basic-user
        bindings = []
        for binding in self._store.list(by_kind("ClusterRoleBinding"), None)[0]:
            bindings.append((binding, ""))
        if attrs.namespace:
            for binding in self._store.list(by_kind("RoleBinding"), attrs.namespace)[0]:
                bindings.append((binding, attrs.namespace))
        for binding, namespace in bindings:
            if not any(_subject_matches(s, user, namespace) for s in binding.get("subjects") or []):
                continue
            ref = binding.get("roleRef") or {}
            kind = by_kind(ref.get("kind", "Role")) if ref.get("kind") in ("Role", "ClusterRole") else None
            if kind is None:
                continue
            role = self._store.find(kind, namespace if ref["kind"] == "Role" else None, ref.get("name", ""))
            if role and any(_rule_allows(rule, attrs) for rule in role.get("rules") or []):
                return True
        return False

    def check(self, user: User, attrs: Attributes) -> None:
        if self.allowed(user, attrs):
            return
        what = errors.qualified(attrs.resource, attrs.group)
        subject = f'{what} "{attrs.name}"' if attrs.name else what
        if not attrs.resource:
            raise errors.ApiError(403, "Forbidden", f'forbidden: User "{user.name}" cannot {attrs.verb} path '
                                                    f'"{attrs.path}"', {})
        scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        raise errors.forbidden(f'{subject} is forbidden: User "{user.name}" cannot {attrs.verb} resource '
                               f'"{attrs.resource_path}" in API group "{attrs.group}" {scope}',
                               attrs.resource, attrs.group, attrs.name or None)
