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

With ``user_namespaces`` the same recipe runs with ``PADDLE_NBEXT_HUB_USER_NAMESPACES=1``: the hub
holds the ClusterRole of ``deploy/rbac/hub-user-namespaces.yaml``, KubeSpawner makes each user's
namespace ``paddle-<user>`` and home claim there (bound to the user's ``local`` volume, made for
it beforehand), and the recipe's hook provisions the notebook's account, the shipped Roles and the
site ConfigMap in it.  Such a hub listens on ports of its own, so that it can run beside the
shared-namespace one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
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
from kubernetes.client.exceptions import ApiException

from support import admin_guide
from support.controlplane.node_network import API_PORT, NODE_IP, inside
from support.controlplane.notebook_image import notebook_image
from support.controlplane.realnode import NODE_LABEL, pod_placement
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
#: The ports of a second hub beside the first (the user-namespaces one): public, hub API, proxy API.
OTHER_PORTS = (8200, 8281, 8201)  # (8181 is taken in the node: CoreDNS's ready port)
USER_NAMESPACE_TEMPLATE = "paddle-{username}"  # the recipe's default
HOME_CLASS = "pnb-hub-home"  # the storage class naming the users' prepared home volumes
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
    """A wheel of this clone (the panel built in), made by the admin guide's install step 1 as it
    is written (in the clone, into deploy/images/notebook), then kept in ``cache`` by
    `_package_digest`, so that it is made again only when the sources change."""
    digest = _package_digest()
    folder = cache / f"wheel-{digest}"
    found = sorted(folder.glob("paddle_nbext-*.whl"))
    if found:
        return found[0]
    with (cache / "wheel.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not folder.is_dir():
            _run_step_one(folder)
    return sorted(folder.glob("paddle_nbext-*.whl"))[0]


def _run_step_one(folder: Path) -> None:
    """Install step 1's commands in the clone with this interpreter as ``python``; the wheel they
    leave in the notebook image's folder is moved to ``folder``."""
    script = "set -euo pipefail\n" + "".join(block.text for block in admin_guide.step_blocks(1))
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "SOURCE_DATE_EPOCH": "315532800", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, env=env, check=False)
    built = sorted((REPO / "deploy" / "images" / "notebook").glob("paddle_nbext-*.whl"))
    if done.returncode != 0 or len(built) != 1:
        raise HubError(
            f"the admin guide's install step 1 (the wheel) failed (exit {done.returncode}, wheels {built}): {done.stderr[-2000:]}"
        )
    partial = Path(tempfile.mkdtemp(prefix="wheel-", dir=folder.parent))
    shutil.move(built[0], partial / built[0].name)
    partial.rename(folder)


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
    user_namespaces: bool = False  # PADDLE_NBEXT_HUB_USER_NAMESPACES=1: each user's notebook and jobs in paddle-<user>
    ports: tuple[int, int, int] = (PUBLIC_PORT, HUB_API_PORT, 8001)  # public, the hub's API, the proxy's API
    volumes: list[str] = field(default_factory=list)  # the user-namespace homes' volumes (the hub's own)

    @property
    def url(self) -> str:
        """Where browsers (and the suite) reach the hub's proxy."""
        return f"http://{NODE_IP}:{self.ports[0]}"

    def user_namespace(self, user: str) -> str:
        """Where `user`'s notebook pod, home claim and jobs live."""
        return USER_NAMESPACE_TEMPLATE.format(username=user) if self.user_namespaces else self.namespace

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
        self.site.import_image(built)
        self.image = built.reference
        self._apply_site_settings()
        for user in users:
            home = self.site.new_home(user)
            if self.user_namespaces:
                self._home_volume(self.user_namespace(user), f"claim-{user}", home)
            else:
                self.site.home_claim(self.api, self.namespace, f"claim-{user}", home)
            self.homes[user] = home
        self.hub_kubeconfig = self.through_the_node(hub_kubeconfig)

    def _home_volume(self, namespace: str, claim: str, home: Path) -> None:
        """A ``local`` volume of `home` on the node made for the claim KubeSpawner will create in the
        user's namespace (``claimRef``; its class is the recipe's HOME_STORAGE_CLASS), as an admin
        provisions a CephFS home statically before the user's first login."""
        selector = {"matchExpressions": [{"key": NODE_LABEL[0], "operator": "In", "values": [NODE_LABEL[1]]}]}
        volume = client.CoreV1Api(self.api).create_persistent_volume(
            client.V1PersistentVolume.model_validate(
                {
                    "metadata": {"generateName": "pnb-user-ns-home-", "labels": {"paddle-nbext/test": "true"}},
                    "spec": {
                        "capacity": {"storage": "10Gi"},
                        "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "storageClassName": HOME_CLASS,
                        "claimRef": {"namespace": namespace, "name": claim},
                        "local": {"path": str(home)},
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [selector]}},
                    },
                }
            )
        )
        assert volume.metadata is not None
        self.volumes.append(str(volume.metadata.name))

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

    def through_the_node(self, kubeconfig: str) -> Path:
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
    def start(self, command: str = "", values: dict[str, str] | None = None) -> HubSite:
        """Run the recipe with this site's values and additions: ``jupyterhub -f
        deploy/jupyterhub/jupyterhub_config.py``, or ``command`` (a shell command that runs it, as
        the admin guide's install step 7 writes it) with this interpreter's ``jupyterhub`` and the
        shell variables ``values``."""
        values = values or {}
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
                    f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{self.ports[2]}'",
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
            "PADDLE_NBEXT_HUB_PUBLIC_URL": self.url,
            "PADDLE_NBEXT_HUB_HUB_BIND_URL": f"http://{NODE_IP}:{self.ports[1]}",
            "PADDLE_NBEXT_HUB_HUB_CONNECT_URL": f"http://{NODE_IP}:{self.ports[1]}",
            "PADDLE_NBEXT_HUB_PROXY": str(PROXY),
            "PADDLE_NBEXT_HUB_NAMESPACE": self.namespace,
            "PADDLE_NBEXT_HUB_IMAGE": self.image,
            "PADDLE_NBEXT_HUB_IMAGE_PULL_POLICY": "Never",
            "PADDLE_NBEXT_HUB_HOME_SIZE": "1Gi",
            "PADDLE_NBEXT_HUB_EXTRA_CONFIG": str(extra),
            **values,
        }
        if self.user_namespaces:
            env.update(PADDLE_NBEXT_HUB_USER_NAMESPACES="1", PADDLE_NBEXT_HUB_HOME_STORAGE_CLASS=HOME_CLASS)
        hub = Path(sys.executable).with_name("jupyterhub")
        argv = [str(hub), "-f", str(RECIPE / "jupyterhub_config.py")]
        if command:
            env["PATH"] = f"{hub.parent}{os.pathsep}{env.get('PATH', '')}"
            argv = ["bash", "-c", command.strip()]  # one simple command: bash execs it, so signals reach the hub
        log = (self.workdir / "jupyterhub.log").open("wb")
        self.process = subprocess.Popen(
            inside(argv),
            cwd=REPO if command else self.workdir,
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
            return requests.get(f"{self.url}/hub/api/", timeout=5).status_code == 200
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

    def remove_user_namespaces(self) -> None:
        """The users' namespaces KubeSpawner made (with everything in them) and their home volumes."""
        core = client.CoreV1Api(self.api)
        if self.user_namespaces:
            for user in self.homes:
                with contextlib.suppress(ApiException, ValueError):
                    core.delete_namespace(self.user_namespace(user))
        for name in self.volumes:
            with contextlib.suppress(ApiException):
                core.delete_persistent_volume(name)
        self.volumes.clear()

    def log_tail(self, lines: int = 40) -> str:
        path = self.workdir / "jupyterhub.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    # --- the hub's REST API, as the suite's service -------------------------------------------------
    def hub_api(self, method: str, path: str, body: Any = None) -> Any:
        answer = requests.request(
            method, f"{self.url}/hub/api/{path}", json=body, headers={"Authorization": f"token {self.token}"}, timeout=60
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
        answer = requests.get(f"{self.url}/hub/api/users/{user}", headers={"Authorization": f"token {self.token}"}, timeout=30)
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
            answer = requests.get(f"{self.url}/hub/api/users/{user}", headers={"Authorization": f"token {self.token}"}, timeout=30)
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
            f"{self.url}/user/{user}/paddle/api/v1/{path.lstrip('/')}",
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


def grant_user_namespaces(api: client.ApiClient, namespace: str, account: str) -> Callable[[], None]:
    """deploy/rbac/hub-user-namespaces.yaml as an admin applies it, its subject edited to the hub's
    `account` in `namespace`; waits until it is in force and returns what removes it."""
    rbac = client.RbacAuthorizationV1Api(api)
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "rbac" / "hub-user-namespaces.yaml").read_text()) if d]
    for doc in docs:
        if doc["kind"] == "ClusterRole":
            with contextlib.suppress(ApiException):  # left by an earlier hub of the session
                rbac.delete_cluster_role(doc["metadata"]["name"])
            rbac.create_cluster_role(doc)
        else:
            doc["subjects"] = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
            with contextlib.suppress(ApiException):
                rbac.delete_cluster_role_binding(doc["metadata"]["name"])
            rbac.create_cluster_role_binding(doc)
    review = client.V1SubjectAccessReview.model_validate(
        {
            "spec": {
                "user": f"system:serviceaccount:{namespace}:{account}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
                "resourceAttributes": {"verb": "create", "resource": "namespaces"},
            }
        }
    )
    authorization = client.AuthorizationV1Api(api)

    def allowed() -> bool:
        status = authorization.create_subject_access_review(review).status
        assert status is not None  # the API server answers every review with a status
        return status.allowed

    deadline = time.monotonic() + 60
    while not allowed():
        if time.monotonic() > deadline:
            raise HubError(f"the ClusterRole of deploy/rbac/hub-user-namespaces.yaml was never in force for {account}")
        time.sleep(0.2)

    def revoke() -> None:
        for doc in docs:
            delete = rbac.delete_cluster_role if doc["kind"] == "ClusterRole" else rbac.delete_cluster_role_binding
            with contextlib.suppress(ApiException):
                delete(doc["metadata"]["name"])

    return revoke
