"""Where the Kubernetes API is and which namespace to use.

Order: an explicitly configured kubeconfig (`c.KubernetesBackend.kubeconfig`, `.context`) wins,
because someone set it on purpose; otherwise the in-cluster service account (the normal case in a
JupyterHub notebook pod); otherwise the default kubeconfig (`$KUBECONFIG`, `~/.kube/config`).
Namespace: configured, else the service account's namespace file, else the kubeconfig
context's namespace, else `default`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kubernetes import client, config

SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


@dataclass
class Connection:
    api: client.ApiClient
    namespace: str
    source: str  # "in-cluster" or "kubeconfig <path> (context <name>)", for GET /config
    host: str
    in_cluster: bool = False  # the server runs in a pod (the notebook's), through its service account


def connect(kubeconfig: str = "", context: str = "", namespace: str = "") -> Connection:
    """Blocking (reads files): call from a thread.  Raises `config.ConfigException` with the
    client's own explanation when nothing usable is configured."""
    configuration = client.Configuration()
    in_cluster = not kubeconfig and bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(SA_NAMESPACE_FILE)
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)
        source = "in-cluster service account"
        if not namespace:
            with open(SA_NAMESPACE_FILE, encoding="utf-8") as handle:
                namespace = handle.read().strip()
    else:
        path = kubeconfig or None
        config.load_kube_config(config_file=path, context=context or None, client_configuration=configuration)
        _, active = config.list_kube_config_contexts(config_file=path)
        chosen = context or (active or {}).get("name", "")
        if not namespace:
            contexts, _ = config.list_kube_config_contexts(config_file=path)
            for item in contexts:
                if item.get("name") == chosen:
                    namespace = (item.get("context") or {}).get("namespace", "")
        source = f"kubeconfig {kubeconfig or os.environ.get('KUBECONFIG') or '~/.kube/config'} (context {chosen})"
    configuration.retries = 1  # fail fast when the API is down; callers report 503 with the cause
    return Connection(client.ApiClient(configuration), namespace or "default", source, configuration.host, in_cluster)
