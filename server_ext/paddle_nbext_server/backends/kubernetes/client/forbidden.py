"""A 403 of the Kubernetes API's authorizer, in words: who may not do what, where, and the fix.

The API server words an RBAC refusal as ``configmaps is forbidden: User
"system:serviceaccount:ns:default" cannot list resource "configmaps" in API group "" in the
namespace "ns"``.  `denial_of` reads that into a `Denial`; `Denial.sentence()` says it as
``the notebook's ServiceAccount system:serviceaccount:ns:default may not list configmaps in
namespace ns (HTTP 403): ...`` followed by the Role file of deploy/rbac/ that grants it and the
command that applies it, and, for the namespace's ``default`` account (a hub config that names
no ServiceAccount for notebook pods), the hub setting that was forgotten.

Other 403s (a ResourceQuota, PodSecurity, an admission webhook) are not RBAC refusals: they
read as None here and keep the API's own words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

_REFUSAL = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"'
    r'(?: in the namespace "(?P<namespace>[^"]*)")?'
)
_SERVICE_ACCOUNT = "system:serviceaccount:"
NOTEBOOK_ROLE = "deploy/rbac/notebook-role.yaml"
#: Which shipped Role file grants a resource (by API group, then by resource); the rest: NOTEBOOK_ROLE.
ROLE_FILES_BY_GROUP = {
    "jobset.x-k8s.io": "deploy/rbac/notebook-role-queues.yaml",
    "kueue.x-k8s.io": "deploy/rbac/notebook-role-queues.yaml",
    "visibility.kueue.x-k8s.io": "deploy/rbac/notebook-role-queues.yaml",
    "scheduling.volcano.sh": "deploy/rbac/notebook-role-volcano.yaml",
}
ROLE_FILES_BY_RESOURCE = {
    "serviceaccounts": "deploy/rbac/per-job-master-role.yaml",
    "roles": "deploy/rbac/per-job-master-role.yaml",
    "rolebindings": "deploy/rbac/per-job-master-role.yaml",
}


@dataclass(frozen=True)
class Denial:
    """One RBAC refusal: `user` may not `verb` `resource` (of API `group`) in `namespace`."""

    user: str
    verb: str
    resource: str
    group: str
    namespace: str  # "" at the cluster scope

    @property
    def account(self) -> tuple[str, str] | None:
        """(namespace, name) when the user is a ServiceAccount."""
        if not self.user.startswith(_SERVICE_ACCOUNT):
            return None
        namespace, _, name = self.user[len(_SERVICE_ACCOUNT) :].partition(":")
        return (namespace, name) if name else None

    @property
    def what(self) -> str:
        """The resource as kubectl names it: `configmaps`, `jobs.batch`, `pods/log`."""
        resource, slash, sub = self.resource.partition("/")
        return f"{resource}.{self.group}{slash}{sub}" if self.group else self.resource

    @property
    def role_file(self) -> str:
        base = self.resource.partition("/")[0]
        return ROLE_FILES_BY_GROUP.get(self.group) or ROLE_FILES_BY_RESOURCE.get(base) or NOTEBOOK_ROLE

    def words(self) -> str:
        """`the notebook's ServiceAccount system:serviceaccount:ns:x may not list configmaps in namespace ns`."""
        who = f"the notebook's ServiceAccount {self.user}" if self.account else f"the user {self.user}"
        where = f"in namespace {self.namespace}" if self.namespace else "at the cluster scope"
        return f"{who} may not {self.verb} {self.what} {where}"

    def fix(self, role_files: Sequence[str] = ()) -> str:
        """What an admin does about it (`role_files`: those of several denials said at once)."""
        account = self.account
        files = list(role_files) or [self.role_file]
        namespace = self.namespace or (account[0] if account else "<namespace>")
        subject = f"ServiceAccount {account[1]}" if account else f"User {self.user}"
        fix = (
            f"the Role in {' and '.join(files)} grants it: kubectl -n {namespace} apply {' '.join(f'-f {f}' for f in files)}, "
            f"its RoleBinding's subject set to {subject}"
        )
        if account and account[1] == "default":
            fix += (
                f" — better: the notebook pod runs as the namespace's default ServiceAccount, so the hub's config names "
                "none for notebooks: set KubeSpawner's service_account (Zero to JupyterHub: singleuser.serviceAccountName) "
                f"to the account {self.role_file} binds (paddle-notebook) and restart the user's server"
            )
        return fix

    def sentence(self) -> str:
        return f"{self.words()} (HTTP 403): {self.fix()}"

    def to_dict(self) -> dict[str, Any]:
        """For `GET /config` (`backend.forbidden`)."""
        return {"user": self.user, "verb": self.verb, "resource": self.what, "namespace": self.namespace, "role_file": self.role_file}


def sentence_of(denials: Sequence[Denial]) -> str:
    """Several refusals of the same identity in one sentence (a cache that may list none of the
    job's kinds): `... may not list configmaps, jobs.batch and pods in namespace ns (HTTP 403): ...`."""
    first = denials[0]
    same = [d for d in denials if d.user == first.user and d.namespace == first.namespace]
    if len(same) == 1:
        return first.sentence()
    by_verb: dict[str, list[str]] = {}
    for denial in same:
        by_verb.setdefault(denial.verb, [])
        if denial.what not in by_verb[denial.verb]:
            by_verb[denial.verb].append(denial.what)
    what = _and([f"{verb} {_and(things)}" for verb, things in by_verb.items()])
    files = list(dict.fromkeys(d.role_file for d in same))
    words = first.words().replace(f"may not {first.verb} {first.what}", f"may not {what}", 1)
    return f"{words} (HTTP 403): {first.fix(files)}"


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def denial_of(error: BaseException) -> Denial | None:
    """The RBAC refusal `error` is, or None (another status, or a 403 of quota or admission)."""
    if not isinstance(error, ApiException) or error.status != 403:
        return None
    return denial_in(_message(error))


def denial_in(message: str) -> Denial | None:
    """The RBAC refusal in an API server's message (a Status' `message`), or None."""
    found = _REFUSAL.search(message or "")
    if found is None:
        return None
    return Denial(
        user=found["user"], verb=found["verb"], resource=found["resource"], group=found["group"], namespace=found["namespace"] or ""
    )


def _message(error: ApiException) -> str:
    try:
        body = json.loads(error.body or "{}")
    except (ValueError, TypeError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or error.reason or "")
