"""What every pod of a job wears besides its container: Pod Security's `restricted` shape and whom it
runs as, the node selector, tolerations (a lost node's among them), pull secrets, priority and service
account, and how one role's replicas spread over nodes.  Pure functions of the `ManifestSettings`,
used by manifests.py for the replicas' and the master's pods."""

from __future__ import annotations

import json
from typing import Any

from paddle_nbext.model.contract import ATTEMPT_LABEL, JOB_LABEL, ROLE_LABEL

from ..settings import ManifestSettings

#: What Pod Security's `restricted` profile asks of every container; Paddle (gloo, NCCL, the
#: pservers' RPC) needs no capability and no escalation.
RESTRICTED_CONTAINER: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
#: The master touches no file of the user's: it runs as nobody, whatever the image's user.
MASTER_IDENTITY = {"runAsUser": 65534, "runAsGroup": 65534}


def pod_security(settings: ManifestSettings, identity: dict[str, Any]) -> dict[str, Any]:
    """The pod's securityContext: `identity`, and under `restricted` a seccomp profile and
    runAsNonRoot when the uid is known not to be root (with the image's own user, root in Paddle's
    images, the pod could not start: the restricted profile is then the admin's to relax)."""
    context = dict(identity)
    if "fsGroup" in context:
        # With a CSI driver whose fsGroupPolicy is File (ceph-csi's) or any volume the kubelet
        # chowns, the default Always walks the whole home at every pod start, changing the group
        # of every file in it; OnRootMismatch does so only when the home's root is not the group's.
        context.setdefault("fsGroupChangePolicy", "OnRootMismatch")
    if settings.restricted:
        context.setdefault("seccompProfile", {"type": "RuntimeDefault"})
        uid = context.get("runAsUser")
        if isinstance(uid, int) and uid != 0:
            context.setdefault("runAsNonRoot", True)
    return context


def restrict(container: dict[str, Any], settings: ManifestSettings) -> dict[str, Any]:
    if settings.restricted:
        container["securityContext"] = json.loads(json.dumps(RESTRICTED_CONTAINER))
    return container


#: The taints the node lifecycle controller puts on a node that stopped responding; Kubernetes
#: gives every pod a 300 s toleration of each, so a pod on a dead node is evicted after 5 min.
NODE_LOST_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def node_lost_tolerations(settings: ManifestSettings) -> list[dict[str, Any]]:
    """How long the job's pods wait for a node that stopped responding (`node_lost_seconds`).
    A Paddle gang cannot go on without a lost member, so waiting Kubernetes' 300 s only delays
    the whole-job restart; a toleration the admin set for the same taint is kept instead."""
    if settings.node_lost_seconds is None:
        return []
    own = {t.get("key") for t in settings.tolerations if t.get("effect") in (None, "", "NoExecute")}
    return [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": settings.node_lost_seconds}
        for key in NODE_LOST_TAINTS
        if key not in own
    ]


def pod_extras(settings: ManifestSettings, service_account: str) -> dict[str, Any]:
    extras: dict[str, Any] = {"enableServiceLinks": False}
    if settings.node_selector:
        extras["nodeSelector"] = dict(settings.node_selector)
    tolerations = [dict(t) for t in settings.tolerations] + node_lost_tolerations(settings)
    if tolerations:
        extras["tolerations"] = tolerations
    if settings.image_pull_secrets:
        extras["imagePullSecrets"] = [{"name": name} for name in settings.image_pull_secrets]
    if settings.priority_class_name:
        extras["priorityClassName"] = settings.priority_class_name
    security = pod_security(settings, settings.pod_security_context)
    if security:
        extras["securityContext"] = security
    if service_account:
        extras["serviceAccountName"] = service_account
        extras["automountServiceAccountToken"] = True
    else:
        extras["automountServiceAccountToken"] = False  # replicas need no API access
    return extras


def spread(settings: ManifestSettings, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The topology spread of one role's replicas (`replica_spread`): this job's pods of this role,
    of the same attempt only (a restart's new pods are not pushed away by the old ones still
    stopping), at most one more in any domain of `spread_topology_key` than in another."""
    if settings.replica_spread == "scheduler":
        return []
    selector = {key: labels[key] for key in (JOB_LABEL, ROLE_LABEL)}
    return [
        {
            "maxSkew": 1,
            "topologyKey": settings.spread_topology_key,
            "whenUnsatisfiable": "DoNotSchedule" if settings.replica_spread == "spread" else "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector},
            "matchLabelKeys": [ATTEMPT_LABEL],
            # A node that died (tainted unreachable / not-ready) is no domain to balance against:
            # with the default (Ignore) a restart after a node loss could never place its replicas
            # on the survivors under "spread".
            "nodeTaintsPolicy": "Honor",
        }
    ]
