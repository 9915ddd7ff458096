# Plain JupyterHub + KubeSpawner for paddle-nbext: each user's notebook server is a pod in the
# cluster, with the user's home on a claim of its own and a ServiceAccount bound to the shipped
# notebook Role, so that `%%paddle_submit` runs distributed Paddle jobs as pods in that namespace.
#
# The same site as deploy/jupyterhub/values.yaml (Zero to JupyterHub), for a hub run without the
# chart; each setting names the chart value it stands for. Site-specific values come from the
# environment (PADDLE_NBEXT_HUB_*, below) so that this file can be used as it is; anything else
# (the authenticator, node pools, TLS, the database) goes into a file of your own named by
# PADDLE_NBEXT_HUB_EXTRA_CONFIG, loaded last (the chart's hub.extraConfig).
#
# Before starting the hub, in the notebooks' namespace:
#   kubectl -n <ns> apply -f deploy/rbac/notebook-role.yaml -f deploy/rbac/master-role.yaml
#   kubectl -n <ns> apply -f deploy/jupyterhub/paddle-nbext-site.yaml   # the job settings
# (With PADDLE_NBEXT_HUB_USER_NAMESPACES=1, below: the site ConfigMap in the hub's namespace and
#   kubectl apply -f deploy/rbac/hub-user-namespaces.yaml  # the hub's ClusterRole; the hub
# provisions each user's namespace itself.)
# Then: jupyterhub -f deploy/jupyterhub/jupyterhub_config.py
# The hub needs configurable-http-proxy (npm; deploy/jupyterhub/proxy/ pins one), a kubeconfig
# or in-cluster account allowed to manage pods, claims and events there, and a network path to
# the pods (run it in a pod, or on a node of the cluster).
#
# The suite runs this file as it is (tests/cluster/test_real_node_jupyterhub.py): the hub as a
# process beside the test control plane, spawning notebook pods on the real node.

import os

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file


def setting(name: str, default: str) -> str:
    """A site value from $PADDLE_NBEXT_HUB_<name>, else `default`."""
    return os.environ.get(f"PADDLE_NBEXT_HUB_{name}", default)


# --- the hub and its proxy (chart: proxy.service, hub.service) ----------------------------------
c.JupyterHub.bind_url = setting("PUBLIC_URL", "http://:8000")  # where users' browsers connect
c.JupyterHub.hub_bind_url = setting("HUB_BIND_URL", "http://0.0.0.0:8081")  # the hub's API
# How notebook pods reach the hub's API (chart: the `hub` Service); must be routable from pods.
if setting("HUB_CONNECT_URL", ""):
    c.JupyterHub.hub_connect_url = setting("HUB_CONNECT_URL", "")
c.ConfigurableHTTPProxy.command = [setting("PROXY", "configurable-http-proxy")]
c.JupyterHub.cleanup_servers = False  # a hub restart leaves the users' notebooks (and their jobs) running

# --- notebook pods (chart: singleuser.*) ---------------------------------------------------------
c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"
c.KubeSpawner.namespace = setting("NAMESPACE", "jupyter")  # the release namespace
c.KubeSpawner.image = setting("IMAGE", "paddle-notebook:latest")  # singleuser.image.name:tag
c.KubeSpawner.image_pull_policy = setting("IMAGE_PULL_POLICY", "IfNotPresent")  # singleuser.image.pullPolicy
c.KubeSpawner.uid = 1000  # singleuser.uid
c.KubeSpawner.gid = 100
c.KubeSpawner.fs_gid = 100  # singleuser.fsGid
# The account bound by deploy/rbac/notebook-role.yaml (singleuser.serviceAccountName): the
# notebook's server (paddle-nbext) creates the job's objects with its token.
c.KubeSpawner.service_account = "paddle-notebook"
c.KubeSpawner.automount_service_account_token = True
c.KubeSpawner.cmd = ["python3", "-m", "jupyterhub.singleuser"]  # singleuser.cmd
c.KubeSpawner.default_url = "/lab"  # singleuser.defaultUrl
c.KubeSpawner.cpu_guarantee = float(setting("CPU_GUARANTEE", "0.1"))  # singleuser.cpu.guarantee
c.KubeSpawner.mem_guarantee = setting("MEMORY_GUARANTEE", "512M")  # singleuser.memory.guarantee
c.KubeSpawner.mem_limit = setting("MEMORY_LIMIT", "2G")  # singleuser.memory.limit
c.KubeSpawner.start_timeout = int(setting("START_TIMEOUT", "300"))  # singleuser.startTimeout

# The home: one claim per user, `claim-{username}` (singleuser.storage.type "dynamic", the
# chart's default), mounted at the home path. paddle-nbext's home_volume "auto" reads this pod's
# spec and mounts the same claim into every job pod. For CephFS homes set
# PADDLE_NBEXT_HUB_HOME_STORAGE_CLASS=cephfs-home and PADDLE_NBEXT_HUB_HOME_ACCESS_MODE=ReadWriteMany,
# and provision each user once with deploy/cephfs/provision_home.py: their claim then binds to a
# static ceph-csi PersistentVolume of their own CephFS directory (admin guide: "CephFS homes").
# A claim binds only to a volume of the same class that offers every access mode it asks for:
# provision_home.py's volumes are ReadWriteMany only, so a ReadWriteOnce claim stays Pending.
c.KubeSpawner.pvc_name_template = "claim-{username}"
c.KubeSpawner.storage_pvc_ensure = True
c.KubeSpawner.storage_capacity = setting("HOME_SIZE", "10Gi")  # singleuser.storage.capacity
# Unset: the claims name no class, and the cluster's default class (if any) provisions them. Set
# to "" (PADDLE_NBEXT_HUB_HOME_STORAGE_CLASS=): claims of no class, which bind only to volumes of
# no class (`storageClassName: ""`, e.g. provision_home.py --storage-class "").
if "PADDLE_NBEXT_HUB_HOME_STORAGE_CLASS" in os.environ:
    c.KubeSpawner.storage_class = setting("HOME_STORAGE_CLASS", "")  # singleuser.storage.dynamic.storageClass
c.KubeSpawner.storage_access_modes = [setting("HOME_ACCESS_MODE", "ReadWriteOnce")]  # .dynamic.storageAccessModes
# The job settings every notebook of the site shares (the chart's singleuser.extraFiles): the
# ConfigMap of deploy/jupyterhub/paddle-nbext-site.yaml, one server config file.
c.KubeSpawner.volumes = [
    {"name": "home", "persistentVolumeClaim": {"claimName": "{pvc_name}"}},
    {"name": "paddle-nbext-site", "configMap": {"name": "paddle-nbext-site", "optional": True}},
]
c.KubeSpawner.volume_mounts = [
    {"name": "home", "mountPath": "/home/jovyan"},
    {"name": "paddle-nbext-site", "mountPath": "/etc/jupyter/jupyter_server_config.d", "readOnly": True},
]

# --- one namespace per user (chart: hub.config.KubeSpawner.enable_user_namespaces) ---------------
# PADDLE_NBEXT_HUB_USER_NAMESPACES=1: each user's notebook pod, home claim and jobs live in a
# namespace of their own (PADDLE_NBEXT_HUB_USER_NAMESPACE_TEMPLATE, default "paddle-{username}"),
# so the API server itself keeps one user's token away from another's jobs, pods, logs and home
# (admin guide: "Where jobs run"). KubeSpawner creates the namespace (labelled for the admission
# policy of deploy/policy/, inert where it is not installed); the hook below puts what the
# notebook needs into it before the pod starts: the ServiceAccount, the shipped Roles of
# deploy/rbac/ (PADDLE_NBEXT_HUB_RBAC_DIR) and a copy of the paddle-nbext-site ConfigMap of the
# hub's namespace (NAMESPACE above). The hub then needs the ClusterRole of
# deploy/rbac/hub-user-namespaces.yaml instead of a Role in one namespace.
USER_NAMESPACES = setting("USER_NAMESPACES", "") in ("1", "true", "yes")
if USER_NAMESPACES:
    import yaml

    c.KubeSpawner.enable_user_namespaces = True
    c.KubeSpawner.user_namespace_template = setting("USER_NAMESPACE_TEMPLATE", "paddle-{username}")
    c.KubeSpawner.user_namespace_labels = {"paddle-nbext/jobs-policy": "enforced"}
    RBAC_DIR = setting("RBAC_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rbac"))
    NOTEBOOK_RBAC = []
    for name in ("notebook-role.yaml", "master-role.yaml"):
        with open(os.path.join(RBAC_DIR, name)) as stream:
            NOTEBOOK_RBAC += [doc for doc in yaml.safe_load_all(stream) if doc]

    async def provision_user_namespace(spawner, pod):
        """KubeSpawner's modify_pod_hook, run once the user's namespace exists and before the
        notebook pod is made: the notebook's account, the shipped Roles and the site settings in
        that namespace (made, or replaced by the shipped ones)."""
        from kubernetes_asyncio.client.rest import ApiException
        from kubespawner.clients import shared_client

        namespace = spawner.namespace
        core, rbac = spawner.api, shared_client("RbacAuthorizationV1Api")

        async def put(create, replace, body):
            try:
                await create(namespace, body)
            except ApiException as error:
                if error.status != 409:
                    raise
                if replace is not None:
                    await replace(body["metadata"]["name"], namespace, body)

        await put(core.create_namespaced_service_account, None, {"metadata": {"name": spawner.service_account}})
        for doc in NOTEBOOK_RBAC:
            body = {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
            if doc["kind"] == "ServiceAccount":
                if doc["metadata"]["name"] != spawner.service_account:  # the notebook's: made above
                    await put(core.create_namespaced_service_account, None, body)
            elif doc["kind"] == "Role":
                await put(rbac.create_namespaced_role, rbac.replace_namespaced_role, body)
            elif doc["kind"] == "RoleBinding":
                body["subjects"] = [{**subject, "namespace": namespace} for subject in doc["subjects"]]
                if doc["metadata"]["name"] == "paddle-nbext":  # the notebook's binding: KubeSpawner's account
                    body["subjects"] = [{"kind": "ServiceAccount", "name": spawner.service_account, "namespace": namespace}]
                await put(rbac.create_namespaced_role_binding, rbac.replace_namespaced_role_binding, body)
        try:
            site = await core.read_namespaced_config_map("paddle-nbext-site", setting("NAMESPACE", "jupyter"))
        except ApiException as error:
            if error.status != 404:
                raise
        else:
            body = {"metadata": {"name": "paddle-nbext-site", "labels": site.metadata.labels or {}}, "data": site.data or {}}
            await put(core.create_namespaced_config_map, core.replace_namespaced_config_map, body)
        return pod

    c.KubeSpawner.modify_pod_hook = provision_user_namespace

# --- the site's own additions (chart: hub.extraConfig) -------------------------------------------
if setting("EXTRA_CONFIG", ""):
    load_subconfig(setting("EXTRA_CONFIG", ""))  # noqa: F821 - provided by JupyterHub
