"""Render paddle-nbext's chart (deploy/chart) with the pinned Helm, and the deploy/ files made from it.

The chart is the one place the cluster objects are written.  The plain manifests of deploy/rbac,
deploy/policy and deploy/jupyterhub/paddle-nbext-site.yaml (for `kubectl apply` without Helm, and
read by the hub recipe, the backend's error messages and the cluster suite) are its templates
rendered with ``SHIPPED``'s values; ``test_shipped_manifests`` fails when they drift.  Regenerate
them after a chart change with::

    PYTHONPATH=tests .venv/bin/python -m deploy.chart
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from support.controlplane.build import helm_binary

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "chart"
RELEASE = "paddle-nbext"
NAMESPACE = "jupyter"  # the plain hub recipe's default namespace (PADDLE_NBEXT_HUB_NAMESPACE)

#: Every optional part on, so that each shipped file has its objects.
ALL_PARTS: dict[str, Any] = {
    "queues": {"enabled": True, "clusterQueueReader": True},
    "volcano": {"enabled": True},
    "userNamespaces": {"enabled": True},
}
#: shipped file -> (the template it is, the values it is rendered with)
SHIPPED: dict[str, tuple[str, dict[str, Any]]] = {
    "deploy/rbac/notebook-role.yaml": ("notebook-role.yaml", {}),
    "deploy/rbac/master-role.yaml": ("master-role.yaml", {}),
    "deploy/rbac/notebook-role-queues.yaml": ("notebook-role-queues.yaml", ALL_PARTS),
    "deploy/rbac/notebook-role-volcano.yaml": ("notebook-role-volcano.yaml", ALL_PARTS),
    "deploy/rbac/per-job-master-role.yaml": ("per-job-master-role.yaml", {"master": {"perJob": True}}),
    "deploy/rbac/queue-reader-clusterrole.yaml": ("queue-reader-clusterrole.yaml", ALL_PARTS),
    "deploy/rbac/hub-user-namespaces.yaml": ("hub-user-namespaces.yaml", ALL_PARTS),
    "deploy/policy/job-pods-policy.yaml": ("job-pods-policy.yaml", {}),
    "deploy/jupyterhub/paddle-nbext-site.yaml": ("site-config.yaml", {}),
}


class HelmFailed(Exception):
    """Helm refused: the message is its own words (stderr)."""


def helm(*args: str, stdin: str | None = None) -> str:
    """Run the pinned Helm (built into the control plane's cache when missing); its stdout."""
    done = subprocess.run([str(helm_binary()), *args], input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise HelmFailed(done.stderr.strip() or done.stdout.strip())
    return done.stdout


def template(values: dict[str, Any] | None = None, *, show_only: str | None = None, namespace: str = NAMESPACE) -> str:
    """`helm template` of the chart with `values` (given as a values file on stdin)."""
    args = ["template", RELEASE, str(CHART), "--namespace", namespace, "--values", "-"]
    if show_only:
        args += ["--show-only", f"templates/{show_only}"]
    return helm(*args, stdin=json.dumps(values or {}))


def objects(rendered: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of a render."""
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def by_kind_and_name(rendered: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects(rendered)}


def shipped_text(path: str) -> str:
    """What the shipped file `path` must hold: its template rendered, Helm's `# Source` lines out."""
    name, values = SHIPPED[path]
    rendered = template(values, show_only=name)
    lines = [line for line in rendered.splitlines() if not line.startswith("# Source: ")]
    while lines and lines[0] == "---":
        lines.pop(0)
    lines = [line for n, line in enumerate(lines) if line.strip() or not _before_separator(lines, n)]
    header = (
        f"# Generated from deploy/chart/templates/{name} (`helm template`, values in tests/deploy/chart.py):\n"
        "# edit the chart, then `PYTHONPATH=tests .venv/bin/python -m deploy.chart`. With Helm, install the\n"
        "# chart instead (deploy/chart/README.md).\n"
    )
    return header + "\n".join(lines).rstrip("\n") + "\n"


def _before_separator(lines: list[str], index: int) -> bool:
    """Whether only blank lines lie between line `index` and the next `---` (Helm leaves some)."""
    for line in lines[index + 1 :]:
        if line.strip():
            return line == "---"
    return True


def main() -> int:
    for path in SHIPPED:
        (REPO / path).write_text(shipped_text(path))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
