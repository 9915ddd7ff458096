"""Kubeconfig files for the control plane's own clients (controllers, the real node's
components, the queueing controllers): one client certificate each, the cluster CA, a server."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml


def write_client_kubeconfig(path: Path, *, name: str, server: str, ca_cert: Path, cert: Path, key: Path) -> Path:
    """A kubeconfig at ``path`` (mode 600) in which ``name`` authenticates with ``cert``/``key``."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "clusters": [
            {
                "name": "controlplane",
                "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca_cert.read_bytes()).decode()},
            }
        ],
        "users": [{"name": name, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": name, "context": {"cluster": "controlplane", "user": name}}],
    }
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path
