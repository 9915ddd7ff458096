"""Quota before submit: what a job needs against what the namespace's ResourceQuotas and the
ClusterQueue behind its Kueue LocalQueue have free, in numbers and in words.

Pure functions of the job's plan and of the quota objects as the API returns them (JSON), so
unit tests run them without a cluster; `quota_reads.py` does the reads.

The need is summed from the plan's own pod templates (every Job's or replicated Job's pods times
their containers' requests), not from the spec again: the master's small request, a GPU resource
name from config, an init container or a pod overhead added to the manifests one day are counted
the way the ResourceQuota admission and Kueue count them.

- ResourceQuota: `status.hard` minus `status.used` for the keys that bound what the pods request
  (`requests.cpu`/`cpu`, `requests.memory`/`memory`/`limits.memory` — memory limits equal
  requests —, `requests.<gpu>`); a quota whose scopes leave our pods out is skipped.
- ClusterQueue: per resource, the flavors of the resource group covering it: `nominalQuota` (plus
  `borrowingLimit` in a cohort; without one the cohort decides, so there is no upper bound we can
  know) minus the reserved usage (`status.flavorsReservation`, else `flavorsUsage`).  Kueue puts
  each role's pods (a pod set) on one flavor, so a role that needs more than the largest flavor
  has can never run either.  A resource the ClusterQueue does not cover is one it never admits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from paddle_nbext.model.contract import ROLE_LABEL, Role
from paddle_nbext.model.quantity import Quantity, QuantityError, format_bytes, format_cpu
from paddle_nbext.model.quota import QuotaBound, QuotaCheck, Verdict

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
#: What a ResourceQuota counts of the objects the plan creates (object count quotas), by kind.
#: In `jobset` mode the JobSet controller makes the child Jobs and the Service (`object_group`).
_OBJECT_COUNTS = {
    "Job": "count/jobs.batch",
    "ConfigMap": "count/configmaps",
    "Service": "count/services",
    "ServiceAccount": "count/serviceaccounts",
    "Role": "count/roles.rbac.authorization.k8s.io",
    "RoleBinding": "count/rolebindings.rbac.authorization.k8s.io",
    "JobSet": "count/jobsets.jobset.x-k8s.io",
}
#: How the counted things read in a sentence.
_COUNT_WORDS = {
    PODS: ("pod", "pods"),
    "count/jobs.batch": ("Job", "Jobs"),
    "count/configmaps": ("ConfigMap", "ConfigMaps"),
    "count/services": ("Service", "Services"),
    "count/serviceaccounts": ("ServiceAccount", "ServiceAccounts"),
    "count/roles.rbac.authorization.k8s.io": ("Role", "Roles"),
    "count/rolebindings.rbac.authorization.k8s.io": ("RoleBinding", "RoleBindings"),
    "count/jobsets.jobset.x-k8s.io": ("JobSet", "JobSets"),
}
#: ResourceQuota keys that bound a resource our pods request (memory limits equal the requests),
#: and the older names of the object counts.
_QUOTA_KEYS = {
    CPU: ("requests.cpu", "cpu"),
    MEMORY: ("requests.memory", "memory", "limits.memory"),
    PODS: ("pods", "count/pods"),
    "count/configmaps": ("count/configmaps", "configmaps"),
    "count/services": ("count/services", "services"),
}
#: Scopes our pods are always in / never in: they request CPU and memory (not BestEffort), set no
#: activeDeadlineSeconds on the pod (not Terminating) and no cross-namespace affinity.
_IN_SCOPE = {"NotBestEffort", "NotTerminating"}
_OUT_OF_SCOPE = {"BestEffort", "Terminating", "CrossNamespacePodAffinity"}
#: The job field that sets each role's amount of a resource (`<role>_<suffix>`).
_FIELD_SUFFIX = {CPU: "cpu", MEMORY: "mem"}


@dataclass(frozen=True)
class PodGroup:
    """The pods of one role (one Job or replicated Job): how many, and what each requests."""

    role: str
    pods: int
    each: dict[str, Quantity]

    def total(self, resource: str) -> Fraction:
        return self.each.get(resource, Quantity(Fraction(0))).value * self.pods


@dataclass(frozen=True)
class Bound:
    """What one quota object allows for one resource.  `limit` None: no upper bound is known
    (a ClusterQueue in a cohort without a borrowing limit).  `largest`/`largest_free`: the most
    one role's pods can get (one flavor of a ClusterQueue); None where any split is fine."""

    resource: str
    source: str
    limit: Fraction | None
    free: Fraction
    largest: Fraction | None = None
    largest_free: Fraction | None = None
    note: str = ""

    def public(self) -> QuotaBound:
        return QuotaBound(self.resource, self.source, None if self.limit is None else _quantity(self.limit), _quantity(self.free))


@dataclass
class _Finding:
    """The worst thing one bound says about the job (for the verdict and the sentence)."""

    verdict: Verdict
    bound: Bound
    resource: str
    amount: Fraction  # what is needed against the bound (the job's total, or one role's)
    against: Fraction  # the limit (never) or what is free (waits)
    role: PodGroup | None = None  # set when one role's pods alone are what does not fit
    reasons: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------ the need


def _amounts(resources: Mapping[str, Any] | None) -> dict[str, Quantity]:
    requests = dict((resources or {}).get("requests") or {})
    # A limit without a request is also the request (Kubernetes defaults it so).
    for name, value in ((resources or {}).get("limits") or {}).items():
        requests.setdefault(name, value)
    found: dict[str, Quantity] = {}
    for name, value in requests.items():
        try:
            found[str(name)] = Quantity.parse(str(value))
        except QuantityError:
            continue  # the API server refuses such a manifest anyway
    return found


def _pod_request(pod_spec: Mapping[str, Any]) -> dict[str, Quantity]:
    """A pod's effective request: its containers' sum, or its largest init container when that
    is more, plus its overhead (the scheduler's, ResourceQuota's and Kueue's rule)."""
    total: dict[str, Quantity] = {}
    for container in pod_spec.get("containers") or []:
        for name, amount in _amounts(container.get("resources")).items():
            total[name] = total.get(name, Quantity(Fraction(0))) + amount
    for container in pod_spec.get("initContainers") or []:
        for name, amount in _amounts(container.get("resources")).items():
            if amount > total.get(name, Quantity(Fraction(0))):
                total[name] = amount
    for name, value in (pod_spec.get("overhead") or {}).items():
        total[str(name)] = total.get(str(name), Quantity(Fraction(0))) + Quantity.parse(str(value))
    return total


def _group(job_spec: Mapping[str, Any], copies: int) -> PodGroup:
    template = job_spec.get("template") or {}
    role = str(((template.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL) or "")
    parallelism = job_spec.get("parallelism")
    pods = (1 if parallelism is None else int(parallelism)) * copies
    each = {**_pod_request(template.get("spec") or {}), PODS: Quantity(Fraction(1))}  # a `pods` quota counts each
    return PodGroup(role=role, pods=pods, each=each)


def object_group(plan: Iterable[Mapping[str, Any]]) -> PodGroup:
    """The objects the job creates that object count quotas count (`count/jobs.batch`, ...), as a
    group of one with no role: nothing a user sets changes them."""
    counts: dict[str, int] = {}
    for manifest in plan:
        kind = str(manifest.get("kind") or "")
        if kind in _OBJECT_COUNTS:
            counts[_OBJECT_COUNTS[kind]] = counts.get(_OBJECT_COUNTS[kind], 0) + 1
        if kind == "JobSet":  # its controller makes a Job per replicated Job copy, and the Service
            children = sum(int(r.get("replicas", 1)) for r in (manifest.get("spec") or {}).get("replicatedJobs") or [])
            counts[_OBJECT_COUNTS["Job"]] = counts.get(_OBJECT_COUNTS["Job"], 0) + children
            counts[_OBJECT_COUNTS["Service"]] = counts.get(_OBJECT_COUNTS["Service"], 0) + 1
    return PodGroup(role="", pods=1, each={key: Quantity(Fraction(n)) for key, n in counts.items()})


def pod_groups(plan: Iterable[Mapping[str, Any]]) -> list[PodGroup]:
    """The job's pods per role, from its plan: native Jobs (`jobs` mode) or a JobSet's
    replicated Jobs (`jobset` mode), and its counted objects (`object_group`).  A role with no
    pods (pservers in collective mode) is left out."""
    manifests = list(plan)
    groups: list[PodGroup] = []
    for manifest in manifests:
        if manifest.get("kind") == "Job":
            groups.append(_group(manifest.get("spec") or {}, 1))
        elif manifest.get("kind") == "JobSet":
            for replicated in (manifest.get("spec") or {}).get("replicatedJobs") or []:
                copies = int(replicated.get("replicas", 1))
                groups.append(_group((replicated.get("template") or {}).get("spec") or {}, copies))
    groups = [group for group in groups if group.pods > 0]
    objects = object_group(manifests)
    return groups + ([objects] if objects.each else [])


def counted(resource: str) -> bool:
    """Pods and objects, counted one by one (not requested amounts)."""
    return resource in _COUNT_WORDS


def job_need(groups: Iterable[PodGroup]) -> dict[str, Fraction]:
    """The job's total request per resource."""
    need: dict[str, Fraction] = {}
    for group in groups:
        for name in group.each:
            need[name] = need.get(name, Fraction(0)) + group.total(name)
    return {name: amount for name, amount in need.items() if amount > 0}


# ---------------------------------------------------------------------------- ResourceQuotas


def _quota_keys(resource: str) -> tuple[str, ...]:
    return _QUOTA_KEYS.get(resource, (resource,) if counted(resource) else (f"requests.{resource}",))


def _scope_applies(scope: str, operator: str, values: list[str], priority_class: str) -> bool | None:
    """Whether a quota scope selects our pods; None for a scope this module does not know."""
    inverted = operator == "DoesNotExist"  # `Exists` (or a plain scope) selects, `DoesNotExist` the rest
    if scope in _IN_SCOPE:
        return not inverted
    if scope in _OUT_OF_SCOPE:
        return inverted
    if scope == "PriorityClass":
        if operator == "In":
            return priority_class in values
        if operator == "NotIn":
            return priority_class not in values
        if operator == "DoesNotExist":
            return not priority_class
        return bool(priority_class)  # Exists, or the plain `scopes: [PriorityClass]`
    return None


def quota_applies(quota: Mapping[str, Any], priority_class: str) -> bool | None:
    """Whether the ResourceQuota counts our pods (all scopes must select them); None when one of
    its scopes is unknown here."""
    spec = quota.get("spec") or {}
    selectors: list[tuple[str, str, list[str]]] = [(str(scope), "", []) for scope in spec.get("scopes") or []]
    for expression in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        selectors.append(
            (str(expression.get("scopeName")), str(expression.get("operator") or ""), [str(v) for v in expression.get("values") or []])
        )
    answers = [_scope_applies(scope, operator, values, priority_class) for scope, operator, values in selectors]
    if any(answer is False for answer in answers):
        return False
    return None if any(answer is None for answer in answers) else True


def resource_quota_bounds(
    quotas: Iterable[Mapping[str, Any]], resources: Iterable[str], priority_class: str = ""
) -> tuple[list[Bound], list[str]]:
    """Bounds from the namespace's ResourceQuotas on `resources`, and notes on quotas skipped."""
    bounds: list[Bound] = []
    notes: list[str] = []
    wanted = list(resources)
    for quota in quotas:
        name = str((quota.get("metadata") or {}).get("name") or "?")
        applies = quota_applies(quota, priority_class)
        if applies is None:
            notes.append(f"ResourceQuota {name} has a scope this check does not know; it was not counted")
            continue
        if not applies:
            continue
        status = quota.get("status") or {}
        hard = status.get("hard") or (quota.get("spec") or {}).get("hard") or {}
        used = status.get("used") or {}
        for resource in wanted:
            for key in _quota_keys(resource):
                if key not in hard:
                    continue
                limit = Quantity.parse(str(hard[key])).value
                taken = Quantity.parse(str(used.get(key, "0"))).value
                bounds.append(Bound(resource, f"ResourceQuota {name}", limit, max(Fraction(0), limit - taken)))
    return bounds, notes


# ------------------------------------------------------------------------------ ClusterQueue


def _usage(cluster_queue: Mapping[str, Any]) -> dict[tuple[str, str], Fraction]:
    status = cluster_queue.get("status") or {}
    flavors = status.get("flavorsReservation") or status.get("flavorsUsage") or []
    used: dict[tuple[str, str], Fraction] = {}
    for flavor in flavors:
        for resource in flavor.get("resources") or []:
            used[(str(flavor.get("name")), str(resource.get("name")))] = Quantity.parse(str(resource.get("total") or "0")).value
    return used


def cluster_queue_bounds(cluster_queue: Mapping[str, Any], resources: Iterable[str]) -> list[Bound]:
    """Bounds from the ClusterQueue on `resources` (see the module docstring)."""
    name = str((cluster_queue.get("metadata") or {}).get("name") or "?")
    spec = cluster_queue.get("spec") or {}
    cohort = str(spec.get("cohortName") or spec.get("cohort") or "")  # v1beta2 / v1beta1
    used = _usage(cluster_queue)
    source = f"ClusterQueue {name}"
    bounds: list[Bound] = []
    for resource in resources:
        group = next((g for g in spec.get("resourceGroups") or [] if resource in (g.get("coveredResources") or [])), None)
        if group is None and counted(resource):
            continue  # Kueue counts pods only where a queue covers them, and never objects
        if group is None:
            bounds.append(Bound(resource, source, Fraction(0), Fraction(0), note=f"it does not cover {resource}"))
            continue
        capacities: list[Fraction | None] = []
        frees: list[Fraction] = []
        for flavor in group.get("flavors") or []:
            entry = next((r for r in flavor.get("resources") or [] if r.get("name") == resource), None)
            if entry is None:
                continue
            nominal = Quantity.parse(str(entry.get("nominalQuota") or "0")).value
            borrowing = entry.get("borrowingLimit")
            if not cohort:
                capacities.append(nominal)
            elif borrowing is not None:
                capacities.append(nominal + Quantity.parse(str(borrowing)).value)
            else:
                capacities.append(None)
            frees.append(max(Fraction(0), nominal - used.get((str(flavor.get("name")), resource), Fraction(0))))
        known = [c for c in capacities if c is not None]
        unbounded = len(known) < len(capacities)
        note = f"it may borrow from cohort {cohort}" if cohort else ""
        bounds.append(
            Bound(
                resource,
                source,
                None if unbounded else sum(known, Fraction(0)),
                sum(frees, Fraction(0)),
                largest=None if unbounded else max(known, default=Fraction(0)),
                largest_free=max(frees, default=Fraction(0)),
                note=note,
            )
        )
    return bounds


# ------------------------------------------------------------------------------- the verdict


def _quantity(amount: Fraction) -> str:
    return Quantity(amount).canonical()


def amount_words(resource: str, amount: Fraction, gpu_resource: str) -> str:
    """`8 CPU`, `32Gi`, `4 GPUs`, `2 example.com/fpga`, `5 pods`, `3 Jobs`."""
    if resource in _COUNT_WORDS:
        one, many = _COUNT_WORDS[resource]
        return f"{format_cpu(amount)} {one if amount == 1 else many}"
    if resource == CPU:
        return f"{format_cpu(amount)} CPU"
    if resource == MEMORY:
        return format_bytes(amount)
    count = format_cpu(amount)  # whole devices print as integers
    if resource == gpu_resource:
        return f"{count} GPU{'' if amount == 1 else 's'}"
    return f"{count} {resource}"


def _order(resources: Iterable[str], gpu_resource: str) -> list[str]:
    rank = {CPU: 0, MEMORY: 1, gpu_resource: 2, PODS: 4}
    return sorted(resources, key=lambda r: (rank.get(r, 5 if counted(r) else 3), r))


def _blame(groups: list[PodGroup], resource: str, limit: Fraction, role: PodGroup | None) -> str | None:
    """The job field to change: the per-replica amount when one replica of the biggest role is
    already too much (with the rest of the job), else that role's replica count."""
    if counted(resource) and resource != PODS:
        return None  # the job's own objects: nothing the user sets
    suffix = _FIELD_SUFFIX.get(resource, "gpu")
    replicas = [g for g in groups if g.role in (Role.PSERVER, Role.TRAINER) and g.total(resource) > 0]
    if role is not None and role in replicas:
        biggest, rest = role, Fraction(0)
    elif replicas:
        biggest = max(replicas, key=lambda g: g.total(resource))
        rest = sum((g.total(resource) for g in groups if g is not biggest), Fraction(0))
    else:
        return None  # only the master needs it: nothing the user sets
    one = biggest.each[resource].value + rest
    return f"{biggest.role}_{suffix}" if one > limit and resource != PODS else f"{biggest.role}s"


def _findings(groups: list[PodGroup], need: dict[str, Fraction], bounds: list[Bound]) -> list[_Finding]:
    found: list[_Finding] = []
    for bound in bounds:
        total = need.get(bound.resource, Fraction(0))
        if total <= 0:
            continue
        if bound.limit is not None and total > bound.limit:
            found.append(_Finding(Verdict.NEVER, bound, bound.resource, total, bound.limit))
            continue
        biggest = max(groups, key=lambda g: g.total(bound.resource))
        if bound.largest is not None and biggest.total(bound.resource) > bound.largest:
            found.append(_Finding(Verdict.NEVER, bound, bound.resource, biggest.total(bound.resource), bound.largest, role=biggest))
            continue
        if total > bound.free:
            found.append(_Finding(Verdict.WAITS, bound, bound.resource, total, bound.free))
        elif bound.largest_free is not None and biggest.total(bound.resource) > bound.largest_free:
            found.append(_Finding(Verdict.WAITS, bound, bound.resource, biggest.total(bound.resource), bound.largest_free, role=biggest))
    return found


def judge(groups: list[PodGroup], bounds: list[Bound], unknown: list[str], gpu_resource: str) -> QuotaCheck:
    """The verdict and the sentence, e.g. "This job needs 8 CPU, 32Gi, 4 GPUs; free now: 16 CPU,
    64Gi, 2 GPUs — it will wait (short of 2 GPUs in ClusterQueue team-a)."."""
    relevant = [b for b in bounds if job_need(groups).get(b.resource, Fraction(0)) > 0]
    # Counted things (pods, Jobs, ...) are said only where a quota bounds them.
    bounded = {b.resource for b in relevant}
    need = {r: amount for r, amount in job_need(groups).items() if not counted(r) or r in bounded}
    needed = ", ".join(amount_words(r, need[r], gpu_resource) for r in _order(need, gpu_resource))
    public_need = {r: _quantity(need[r]) for r in _order(need, gpu_resource)}
    not_checked = f" Not checked: {'; '.join(unknown)}." if unknown else ""
    if not relevant:
        if unknown:
            words = f"This job needs {needed}; quota unknown ({'; '.join(unknown)})."
            return QuotaCheck(Verdict.UNKNOWN, words, public_need, [], None, list(unknown))
        return QuotaCheck(Verdict.FITS, f"This job needs {needed}; no ResourceQuota or queue limits it.", public_need, [], None, [])
    free: dict[str, Fraction] = {}
    for bound in relevant:
        free[bound.resource] = min(free.get(bound.resource, bound.free), bound.free)
    free_words = ", ".join(amount_words(r, free[r], gpu_resource) for r in _order(free, gpu_resource))
    findings = _findings(groups, need, relevant)
    never = [f for f in findings if f.verdict == Verdict.NEVER]
    waits = [f for f in findings if f.verdict == Verdict.WAITS]
    field_name: str | None = None
    if never:
        worst = never[0]
        field_name = _blame(groups, worst.resource, worst.against, worst.role)
        what = f"its {worst.role.role}s need" if worst.role is not None else "it needs"
        where = (
            f"{worst.bound.source} has at most {amount_words(worst.resource, worst.against, gpu_resource)}"
            + (" in one flavor" if worst.role is not None else "")
            + (f" ({worst.bound.note})" if worst.bound.note and worst.bound.limit == 0 else "")
        )
        advice = f"; ask for fewer {field_name}" if field_name and field_name.endswith("s") else ""
        advice = advice or (f"; ask for less {field_name}" if field_name else "")
        ending = f"it can never run: {what} {amount_words(worst.resource, worst.amount, gpu_resource)}, but {where}{advice}"
        verdict = Verdict.NEVER
    elif waits:
        parts = []
        for finding in waits:
            short = amount_words(finding.resource, finding.amount - finding.against, gpu_resource)
            parts.append(f"short of {short} in {finding.bound.source}" + (f"; {finding.bound.note}" if finding.bound.note else ""))
        ending = f"it will wait ({'; '.join(dict.fromkeys(parts))})"
        verdict = Verdict.WAITS
    else:
        ending = "it fits"
        verdict = Verdict.FITS
    words = f"This job needs {needed}; free now: {free_words} — {ending}.{not_checked}"
    return QuotaCheck(verdict, words, public_need, [b.public() for b in relevant], field_name, list(unknown))
