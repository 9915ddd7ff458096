"""Names of what the kubernetes backend reads and writes: label selectors, API groups, object name
patterns."""

from __future__ import annotations

import re

from paddle_nbext.model.contract import MANAGED_BY_LABEL, MANAGER, ROLES

from ....runtime import replicas
from ..build import jobset as jobsets
from ..build import volcano

SELECTOR = f"{MANAGED_BY_LABEL}={MANAGER}"
HUB_SELECTOR = "app=jupyterhub,component=hub"  # Zero to JupyterHub's hub pod and ConfigMap
_ROLE = "|".join(ROLES)
JOB_OF_JOB = re.compile(rf"^(.+)-(?:{_ROLE})(?:-0)?$")  # <job>-<role>, JobSet's <job>-<role>-0
JOB_OF_POD = re.compile(rf"^(.+)-(?:{_ROLE})(?:-0)?-\d+-[a-z0-9]+$")  # <job>-<role>[-0]-<index>-<random>
#: The API groups a workload mode or a queue needs, (group, version).
JOBSET_API = (jobsets.GROUP, jobsets.VERSION)
KUEUE_API = ("kueue.x-k8s.io", "v1beta2")
PODGROUP_API = (volcano.GROUP, volcano.VERSION)
#: The kinds of a plan that are custom resources: (group, version, plural).
CUSTOM_OBJECTS = {"JobSet": (jobsets.GROUP, jobsets.VERSION, jobsets.PLURAL), volcano.KIND: (*PODGROUP_API, volcano.PLURAL)}
#: A pod's phases that end it (Kubernetes' words, not the job's `Phase`).
POD_ENDED = (replicas.POD_SUCCEEDED, replicas.POD_FAILED)
WARNING_TEXT = re.compile(r'\d{3} \S+ "((?:[^"\\]|\\.)*)"')  # RFC 7234: warn-code warn-agent "warn-text"
JOBS_DIR = ".paddle-jobs"
