"""`helm` and `kubectl` as a cluster admin types them, for tests that check what those commands
answer (the admin guide's install, check and uninstall steps) rather than what a client library
returns.  Both run the pinned binaries of the control plane build against one admin kubeconfig;
Helm keeps its cache and settings in a folder of the test's own, never in the user's home."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from support.controlplane.build import find_binaries, helm_binary


class CommandFailed(Exception):
    """The command exited non-zero; the message is its own words (stderr, else stdout)."""


@dataclass(frozen=True)
class Answer:
    """What a command printed and how it exited."""

    code: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class ClusterCli:
    """helm and kubectl with one kubeconfig (the admin's, or a notebook's token); `home` holds
    Helm's cache and settings."""

    kubeconfig: str
    home: Path

    @classmethod
    def for_kubeconfig(cls, kubeconfig: str, home: Path) -> ClusterCli:
        home.mkdir(parents=True, exist_ok=True)
        return cls(kubeconfig, home)

    def _env(self) -> dict[str, str]:
        folders = {f"HELM_{kind}_HOME": str(self.home / kind.lower()) for kind in ("CACHE", "CONFIG", "DATA")}
        return {**os.environ, **folders, "KUBECONFIG": self.kubeconfig, "NO_COLOR": "1"}

    def run(self, program: str, *args: str, stdin: str | None = None) -> Answer:
        """Run `helm` or `kubectl` and return its answer, whatever the exit code."""
        binary = helm_binary() if program == "helm" else _kubectl()
        done = subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True, check=False, env=self._env())
        return Answer(done.returncode, done.stdout, done.stderr)

    def ok(self, program: str, *args: str, stdin: str | None = None) -> str:
        """Run the command, expecting success; its stdout."""
        answer = self.run(program, *args, stdin=stdin)
        if answer.code != 0:
            raise CommandFailed(f"{program} {' '.join(args)}: {answer.stderr.strip() or answer.stdout.strip()}")
        return answer.stdout

    def helm(self, *args: str) -> str:
        return self.ok("helm", *args)

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return self.ok("kubectl", *args, stdin=stdin)

    def release(self, name: str, namespace: str) -> dict[str, Any]:
        """`helm status -o json`: the release's revision (`version`) and `info.status`."""
        status: dict[str, Any] = json.loads(self.helm("status", name, "--namespace", namespace, "--output", "json"))
        return status

    def manifest(self, name: str, namespace: str) -> list[dict[str, Any]]:
        """The objects of the release's current revision (`helm get manifest`)."""
        return [doc for doc in yaml.safe_load_all(self.helm("get", "manifest", name, "--namespace", namespace)) if doc]

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """`kubectl get -o json` of one object; None when the API server has no such object."""
        where = ["--namespace", namespace] if namespace else []
        found = self.kubectl("get", kind, name, *where, "--ignore-not-found", "--output", "json")
        return json.loads(found) if found.strip() else None

    def can_i(self, user: str, verb: str, resource: str, namespace: str, *, subresource: str = "") -> bool:
        """`kubectl auth can-i ... --as=user`: yes (True) or no (False), as the API server answers."""
        extra = [f"--subresource={subresource}"] if subresource else []
        answer = self.run("kubectl", "auth", "can-i", verb, resource, *extra, "--namespace", namespace, f"--as={user}")
        said = answer.stdout.split()[:1]  # "no" may be followed by " - <reason>"
        if said not in (["yes"], ["no"]):
            raise CommandFailed(f"kubectl auth can-i {verb} {resource} --as={user}: {answer.stderr.strip() or answer.stdout.strip()}")
        return said == ["yes"]

    def review(self, user: str, verb: str, resource: str, namespace: str, *, subresource: str = "") -> bool:
        """The API server's own answer (a SubjectAccessReview) to whether `user` may `verb`
        `resource` ("jobs.batch", "pods.metrics.k8s.io"): unlike `kubectl auth can-i` it needs no
        discovery, so it answers for APIs this cluster does not serve (metrics, JobSet, Kueue)."""
        plural, _, group = resource.partition(".")
        attributes = {"namespace": namespace, "verb": verb, "group": group, "resource": plural, "subresource": subresource}
        spec: dict[str, Any] = {"user": user, "resourceAttributes": attributes}
        if user.startswith("system:serviceaccount:"):  # the groups the API server gives a service account's token
            spec["groups"] = ["system:serviceaccounts", f"system:serviceaccounts:{user.split(':')[2]}", "system:authenticated"]
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        answer = json.loads(self.kubectl("create", "-f", "-", "--output", "json", stdin=json.dumps(review)))
        return bool(answer["status"].get("allowed"))


def _kubectl() -> Path:
    binaries = find_binaries()
    if binaries is None or "kubectl" not in binaries:
        raise CommandFailed("kubectl is not built: run `bash scripts/controlplane.sh build`")
    return binaries["kubectl"]
