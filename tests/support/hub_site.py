"""A real JupyterHub beside the test control plane, run from the shipped recipe.

``HubSite.start`` runs ``jupyterhub -f deploy/jupyterhub/jupyterhub_config.py`` — the file a site
uses, as it is — with the site's values in ``PADDLE_NBEXT_HUB_*`` and the site's own additions in
an extra config file (a test authenticator and its users, a service token for the suite, the
real node's placement), the way an admin fills in the recipe.  The hub and its
configurable-http-proxy (``deploy/jupyterhub/proxy``, from npm) run in the real node's network
namespace: notebook pods reach the hub's API at the node's address, the hub and the proxy reach
the pods' addresses, and the suite (or a browser) on the host reaches the proxy at
``http://<node address>:8000``.  KubeSpawner talks to the API server through the node's relay
with a ServiceAccount token of the hub's own (a Role over pods, claims and events in the
notebooks' namespace).

Each user's notebook is a pod on the real node from the notebook image built here
(``controlplane/notebook_image.py``), uid 1000 / fsGroup 100, ServiceAccount ``paddle-notebook``
bound to the shipped Role, the home claim ``claim-<user>`` bound to a ``local`` volume of a
directory the suite can read, and the job settings of ``deploy/jupyterhub/paddle-nbext-site.yaml``.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml
from kubernetes import client

from support.controlplane.node_network import API_PORT, NODE_IP, inside
from support.controlplane.notebook_image import notebook_image
from support.controlplane.realnode import pod_placement
from support.realnode_site import RealNodeSite

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "deploy" / "jupyterhub"
PROXY = RECIPE / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
PUBLIC_PORT = 8000
HUB_API_PORT = 8081
PUBLIC_URL = f"http://{NODE_IP}:{PUBLIC_PORT}"
SERVICE = "paddle-nbext-test"
PASSWORD = "paddle-nbext-test-password"  # the test authenticator's one password
#: KubeSpawner's calls in the notebooks' namespace (its documented needs, nothing more).
HUB_ROLE = {
    "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "delete"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "list", "watch", "create"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    ]
}
START_WAIT = 300.0  # a first notebook pod: the image's import into the node's containerd, the pod's start


class HubError(RuntimeError):
    pass


def _package_digest() -> str:
    """The sources a wheel of the clone is made of: a wheel (and so a notebook image) is rebuilt
    only when they change."""
    sha = hashlib.sha256()
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "paddle_nbext", "server_ext", "labextension/src", "pyproject.toml", "setup.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in sorted(listed):
        path = REPO / name
        if path.is_file():
            sha.update(name.encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()[:12]


def clone_wheel(cache: Path) -> Path:
    """A wheel of this clone (the panel built in), cached by `_package_digest`."""
    digest = _package_digest()
    folder = cache / f"wheel-{digest}"
    found = sorted(folder.glob("paddle_nbext-*.whl"))
    if found:
        return found[0]
    partial = Path(tempfile.mkdtemp(prefix="wheel-", dir=cache))
    env = {**os.environ, "SOURCE_DATE_EPOCH": "315532800"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q", "-w", str(partial), str(REPO)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise HubError(f"building the wheel of the clone failed: {done.stderr[-2000:]}")
    partial.rename(folder)
    return sorted(folder.glob("paddle_nbext-*.whl"))[0]


def hub_version() -> str:
    import jupyterhub

    return str(jupyterhub.__version__)


@dataclass
class HubSite:
    site: RealNodeSite
    api: client.ApiClient
    namespace: str
    workdir: Path
    image: str = ""
    token: str = field(default_factory=lambda: secrets.token_hex(24))
    homes: dict[str, Path] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    hub_kubeconfig: Path | None = None  # KubeSpawner's credentials, addressed to the node's API relay

    # --- the site ---------------------------------------------------------------------------------
    def prepare(self, hub_kubeconfig: str, users: list[str]) -> None:
        """Build and load the notebook image; apply the recipe's site settings; give each user a
        home claim on the real node."""
        if self.site.node is None:
            raise HubError("the JupyterHub tests need the suite's own real node (the hub runs in its network namespace)")
        if not PROXY.exists():
            raise HubError(f"configurable-http-proxy is missing: (cd {PROXY.parents[2]} && npm ci) — scripts/setup.sh does it")
        cache = self.site.node.root.parent / "hub"
        cache.mkdir(parents=True, exist_ok=True)
        built = notebook_image(clone_wheel(cache), hub_version())
        self.site.node.import_image(built)
        self.image = built.reference
        self._apply_site_settings()
        for user in users:
            home = self.site.new_home(user)
            self.site.home_claim(self.api, self.namespace, f"claim-{user}", home)
            self.homes[user] = home
        self.hub_kubeconfig = self._through_the_node(hub_kubeconfig)

    def _apply_site_settings(self) -> None:
        """deploy/jupyterhub/paddle-nbext-site.yaml with this site's values: the job image the
        node has, and the placement that sends job pods to the real node."""
        manifest = yaml.safe_load((RECIPE / "paddle-nbext-site.yaml").read_text())
        key = next(iter(manifest["data"]))
        settings = json.loads(manifest["data"][key])
        settings["KubernetesBackend"].update(
            default_image=self.site.image,
            image_pull_policy=self.site.pull_policy,
            **self.site.placement(),
        )
        manifest["data"][key] = json.dumps(settings, indent=2)
        client.CoreV1Api(self.api).create_namespaced_config_map(self.namespace, manifest)

    def _through_the_node(self, kubeconfig: str) -> Path:
        """The same credentials, addressed to the API server's relay at the node (the hub runs in
        the node's network namespace, where the host's loopback is not)."""
        doc = yaml.safe_load(Path(kubeconfig).read_text())
        for entry in doc["clusters"]:
            entry["cluster"]["server"] = f"https://{NODE_IP}:{API_PORT}"
        path = self.workdir / "hub.kubeconfig"
        path.write_text(yaml.safe_dump(doc))
        path.chmod(0o600)
        return path

    # --- the hub ------------------------------------------------------------------------------------
    def start(self) -> HubSite:
        extra = self.workdir / "site_config.py"
        placement = pod_placement()
        extra.write_text(
            "\n".join(
                [
                    "# This site's additions to deploy/jupyterhub/jupyterhub_config.py (what hub.extraConfig holds).",
                    'c.JupyterHub.authenticator_class = "dummy"',
                    f"c.DummyAuthenticator.password = {PASSWORD!r}",
                    "c.Authenticator.allow_all = True",
                    f"c.JupyterHub.db_url = {'sqlite:///' + str(self.workdir / 'jupyterhub.sqlite')!r}",
                    f"c.JupyterHub.cookie_secret_file = {str(self.workdir / 'cookie_secret')!r}",
                    f"c.JupyterHub.pid_file = {str(self.workdir / 'jupyterhub.pid')!r}",
                    f"c.ConfigurableHTTPProxy.pid_file = {str(self.workdir / 'proxy.pid')!r}",
                    f"c.JupyterHub.services = [{{'name': {SERVICE!r}, 'api_token': {self.token!r}}}]",
                    "c.JupyterHub.load_roles = [{"
                    f"'name': {SERVICE!r}, 'services': [{SERVICE!r}], "
                    "'scopes': ['admin:users', 'admin:servers', 'tokens', 'list:users', 'read:users', 'access:servers']}]",
                    f"c.KubeSpawner.node_selector = {placement['node_selector']!r}",
                    f"c.KubeSpawner.tolerations = {placement['tolerations']!r}",
                    "c.KubeSpawner.http_timeout = 120",
                    "",
                ]
            )
        )
        env = {
            **os.environ,
            "KUBECONFIG": str(self.hub_kubeconfig),
            "PADDLE_NBEXT_HUB_PUBLIC_URL": PUBLIC_URL,
            "PADDLE_NBEXT_HUB_HUB_BIND_URL": f"http://{NODE_IP}:{HUB_API_PORT}",
            "PADDLE_NBEXT_HUB_HUB_CONNECT_URL": f"http://{NODE_IP}:{HUB_API_PORT}",
            "PADDLE_NBEXT_HUB_PROXY": str(PROXY),
            "PADDLE_NBEXT_HUB_NAMESPACE": self.namespace,
            "PADDLE_NBEXT_HUB_IMAGE": self.image,
            "PADDLE_NBEXT_HUB_IMAGE_PULL_POLICY": "Never",
            "PADDLE_NBEXT_HUB_HOME_SIZE": "1Gi",
            "PADDLE_NBEXT_HUB_EXTRA_CONFIG": str(extra),
        }
        hub = Path(sys.executable).with_name("jupyterhub")
        log = (self.workdir / "jupyterhub.log").open("wb")
        self.process = subprocess.Popen(
            inside([str(hub), "-f", str(RECIPE / "jupyterhub_config.py")]),
            cwd=self.workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.wait(self._answers, "the hub's API to answer through the proxy", 120)
        return self

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise HubError(f"jupyterhub exited with {self.process.returncode}:\n{self.log_tail()}")
        try:
            return requests.get(f"{PUBLIC_URL}/hub/api/", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def stop(self) -> None:
        if self.process is None:
            return
        for user in list(self.homes):
            try:
                self.hub_api("DELETE", f"users/{user}/server")
            except (HubError, requests.RequestException):
                pass
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait(10)
        self.process = None

    def log_tail(self, lines: int = 40) -> str:
        path = self.workdir / "jupyterhub.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    # --- the hub's REST API, as the suite's service -------------------------------------------------
    def hub_api(self, method: str, path: str, body: Any = None) -> Any:
        answer = requests.request(
            method, f"{PUBLIC_URL}/hub/api/{path}", json=body, headers={"Authorization": f"token {self.token}"}, timeout=60
        )
        if answer.status_code >= 400 and not (method == "DELETE" and answer.status_code == 404):
            raise HubError(f"{method} hub/api/{path}: {answer.status_code} {answer.text[:500]}")
        return answer.json() if answer.content else None

    def user_token(self, user: str) -> str:
        """A token of `user`'s, as the user gets one from the hub's token page."""
        self._ensure_user(user)
        return str(self.hub_api("POST", f"users/{user}/tokens", {"expires_in": 7200, "note": "paddle-nbext tests"})["token"])

    def _ensure_user(self, user: str) -> None:
        """The hub knows `user` (as after their first login)."""
        answer = requests.get(f"{PUBLIC_URL}/hub/api/users/{user}", headers={"Authorization": f"token {self.token}"}, timeout=30)
        if answer.status_code == 404:
            self.hub_api("POST", "users", {"usernames": [user]})

    def start_server(self, user: str) -> None:
        """Start `user`'s notebook pod and wait until the hub says it is ready."""
        self._ensure_user(user)
        if self._server(user).get("ready") is True:
            return  # running already (an earlier test of the module started it)
        self.hub_api("POST", f"users/{user}/server")
        self.wait(lambda: self._server(user).get("ready") is True, f"{user}'s notebook server to be ready", START_WAIT)

    def stop_server(self, user: str) -> None:
        self.hub_api("DELETE", f"users/{user}/server")
        self.wait(lambda: not self._server(user), f"{user}'s notebook server to stop", START_WAIT)

    def stop_servers(self) -> None:
        """Stop every user's notebook server that runs (a module's users leave the node to the next)."""
        for user in self.homes:
            answer = requests.get(f"{PUBLIC_URL}/hub/api/users/{user}", headers={"Authorization": f"token {self.token}"}, timeout=30)
            if answer.status_code == 200 and (answer.json().get("servers") or {}).get(""):
                self.stop_server(user)

    def _server(self, user: str) -> dict[str, Any]:
        info = self.hub_api("GET", f"users/{user}")
        servers = info.get("servers") or {}
        return dict(servers.get("") or {})

    def notebook(self, user: str, token: str, method: str, path: str, body: Any = None) -> requests.Response:
        """paddle-nbext's API in `user`'s notebook pod, through the hub's proxy, with `token`."""
        return requests.request(
            method,
            f"{PUBLIC_URL}/user/{user}/paddle/api/v1/{path.lstrip('/')}",
            json=body,
            headers={"Authorization": f"token {token}"},
            timeout=60,
        )

    def wait(self, check: Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise HubError(f"waited {timeout:.0f} s for {what}; the hub's log ends:\n{self.log_tail()}")
            time.sleep(0.5)
