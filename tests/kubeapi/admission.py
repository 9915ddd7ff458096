"""Per-kind defaulting and validation applied on create/update, as the apiserver's registry does.

Only what clients observe and the backend depends on: names, labels, ConfigMap size, the fields a
Pod or Job must have, the Job selector/labels the real registry adds, terminal pod phases being final.
Validation failures are 422 ``Invalid`` with the field path in the message.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from .errors import invalid
from .resources import Resource

_LABEL_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
CONFIGMAP_LIMIT = 1024 * 1024
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def random_suffix(length: int = 5) -> str:
    """The apiserver's generateName alphabet (no vowels, no look-alike digits)."""
    return "".join(random.choice(_ALPHABET) for _ in range(length))


def _check_name(resource: Resource, name: str) -> str | None:
    if resource.kind in ("Namespace",) or resource.kind == "Service":
        pattern, limit, what = (_DNS1035, 63, "RFC 1035 label") if resource.kind == "Service" \
            else (_LABEL_NAME, 63, "RFC 1123 label")
    else:
        pattern, limit, what = _SUBDOMAIN, 253, "RFC 1123 subdomain"
    if resource.kind.endswith("Role") or resource.kind.endswith("RoleBinding"):
        return None if name and "/" not in name and "%" not in name else f'Invalid value: "{name}": may not contain "/" or "%"'
    if not pattern.match(name) or len(name) > limit:
        return (f'Invalid value: "{name}": a lowercase {what} must consist of lower case alphanumeric characters '
                f"or '-' and be at most {limit} characters")
    return None


def _check_labels(labels: Any, field: str) -> list[tuple[str, str]]:
    causes = []
    if labels is None:
        return causes
    if not isinstance(labels, dict):
        return [(field, "Invalid value: must be a map of strings")]
    for key, value in labels.items():
        name = key.rsplit("/", 1)[-1]
        if not _QUALIFIED.match(name) or len(name) > 63:
            causes.append((field, f'Invalid value: "{key}": name part must consist of alphanumeric characters, '
                                  "'-', '_' or '.', and be at most 63 characters"))
        if not isinstance(value, str) or not _LABEL_VALUE.match(value) or len(value) > 63:
            causes.append((field, f'Invalid value: "{value}": a valid label must be an empty string or consist of '
                                  "alphanumeric characters, '-', '_' or '.', and be at most 63 characters"))
    return causes


def _check_pod_spec(spec: Any, field: str) -> list[tuple[str, str]]:
    if not isinstance(spec, dict):
        return [(field, "Required value")]
    containers = spec.get("containers")
    if not containers:
        return [(f"{field}.containers", "Required value")]
    causes = []
    for n, container in enumerate(containers):
        if not container.get("name"):
            causes.append((f"{field}.containers[{n}].name", "Required value"))
        if not container.get("image"):
            causes.append((f"{field}.containers[{n}].image", "Required value"))
    return causes


def validate(resource: Resource, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """Raise 422 Invalid for objects a real apiserver would reject in ways the backend can hit."""
    meta = obj["metadata"]
    causes: list[tuple[str, str]] = []
    if problem := _check_name(resource, meta["name"]):
        causes.append(("metadata.name", problem))
    causes += _check_labels(meta.get("labels"), "metadata.labels")
    if meta.get("annotations") is not None and not isinstance(meta.get("annotations"), dict):
        causes.append(("metadata.annotations", "Invalid value: must be a map of strings"))
    if resource.kind == "ConfigMap":
        size = sum(len(k) + len(str(v).encode()) for part in ("data", "binaryData")
                   for k, v in (obj.get(part) or {}).items())
        if size > CONFIGMAP_LIMIT:
            causes.append(("[]", f"Too long: must have at most {CONFIGMAP_LIMIT} bytes"))
    elif resource.kind == "Pod":
        causes += _check_pod_spec(obj.get("spec"), "spec")
        if old is not None:
            old_phase = old.get("status", {}).get("phase")
            new_phase = obj.get("status", {}).get("phase")
            if old_phase in ("Succeeded", "Failed") and new_phase != old_phase:
                causes.append(("status.phase", f'Forbidden: may not be transitioned to non-terminal state'))
    elif resource.kind == "Job":
        spec = obj.get("spec") or {}
        template = spec.get("template") or {}
        causes += _check_pod_spec(template.get("spec"), "spec.template.spec")
        policy = (template.get("spec") or {}).get("restartPolicy")
        if policy not in ("Never", "OnFailure"):
            causes.append(("spec.template.spec.restartPolicy",
                           f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"'))
        if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
            causes.append(("spec.completions", "Required value: when completion mode is Indexed"))
        causes += _check_labels((template.get("metadata") or {}).get("labels"), "spec.template.metadata.labels")
    elif resource.kind == "Service":
        for n, port in enumerate((obj.get("spec") or {}).get("ports") or []):
            if not isinstance(port.get("port"), int):
                causes.append((f"spec.ports[{n}].port", "Required value"))
    if causes:
        raise invalid(resource.kind, resource.group, meta["name"], causes)


def default_on_create(resource: Resource, obj: dict[str, Any]) -> None:
    """Defaults and server-owned fields the registry sets when an object is created."""
    kind = resource.kind
    if kind == "Namespace":
        obj.setdefault("metadata", {}).setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
    elif kind == "Pod":
        spec = obj.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("schedulerName", "default-scheduler")
        for container in spec.get("containers", []):
            container.setdefault("imagePullPolicy", "Always" if str(container.get("image", "")).endswith(":latest")
                                 or ":" not in str(container.get("image", "")) else "IfNotPresent")
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    elif kind == "Job":
        spec = obj.setdefault("spec", {})
        uid = obj["metadata"]["uid"]
        name = obj["metadata"]["name"]
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("parallelism", 1)
        if spec["completionMode"] == "NonIndexed":
            spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        if not spec.get("manualSelector"):
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
            labels = template_meta.setdefault("labels", {})
            labels.update({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                           "controller-uid": uid, "job-name": name})
        obj["status"] = {}
    elif kind == "Service":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        if spec.get("clusterIP") in (None, ""):
            spec["clusterIP"] = f"10.96.{random.randint(0, 255)}.{random.randint(1, 254)}"
        spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        obj["status"] = {"loadBalancer": {}}
    elif kind == "Secret":
        obj.setdefault("type", "Opaque")


def spec_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether ``generation`` moves: any change outside metadata and status."""
    def body(o: dict[str, Any]) -> str:
        return json.dumps({k: v for k, v in o.items() if k not in ("metadata", "status")}, sort_keys=True)
    return body(old) != body(new)
