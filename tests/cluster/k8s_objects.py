"""Typed access to the Kubernetes client's objects, for the cluster suite.

The client's models declare every field Optional (``V1Pod.metadata`` is ``V1ObjectMeta | None``,
``V1Job.status`` is ``V1JobStatus | None``, ...), though the API server always fills in the ones
these tests read.  ``present`` says so where a test reads one: it asserts the field is there and
returns it with its type; ``meta`` and ``name_of`` do the same for an object's metadata and name.

Request bodies: the client's calls take its models (``create_namespaced_pod(ns, body: V1Pod)``)
and validate their arguments (pydantic's ``validate_call``), which is how a dict body used to
become a ``V1Pod``; the suite writes that step out, ``client.V1Pod.model_validate({...})``, so the
same model is sent and the call is typed.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from kubernetes.client import V1ObjectMeta

T = TypeVar("T")


class HasMetadata(Protocol):
    """Any object of the API (a pod, a Job, a ConfigMap, ...)."""

    @property
    def metadata(self) -> V1ObjectMeta | None: ...


def present(value: T | None, what: str = "the field") -> T:
    """``value``, which the API server always sets where the test reads it."""
    assert value is not None, f"the API server's object has no {what}"
    return value


def meta(obj: HasMetadata) -> V1ObjectMeta:
    """``obj.metadata``: every object the API server returns has it."""
    return present(obj.metadata, f"metadata ({type(obj).__name__})")


def name_of(obj: HasMetadata) -> str:
    """``obj.metadata.name``."""
    return present(meta(obj).name, f"metadata.name ({type(obj).__name__})")
