"""The files a job runs, as one bundle: the stdlib-only runtime (launcher, policy, in-cluster
master), the shared contract module they import, and `pylib/paddle_nbext_job.py`, the module
training code imports (`report()`, checkpoints), with its parts and the attempt fence; the
launcher puts only `pylib/` on the replica's `PYTHONPATH`, so the launcher's own files never
shadow a module of the user's.

Both backends ship exactly this bundle into a job at submit: the Kubernetes backend into one
immutable ConfigMap per bundle (`configmap_name`: the release and the digest of the files) that
every pod of every job of that release mounts, the local backend into the job's own directory.
A job therefore keeps running the runtime it was submitted with, even when the package is
upgraded under it, and the interpreter that runs it needs nothing but Python 3.10.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import paddle_nbext
import paddle_nbext.model.contract
import paddle_nbext.model.paddle_noise
import paddle_nbext.model.progress_pattern

from ..runtime import (
    cluster_master,
    endpoint_wait,
    env_build,
    env_index,
    env_requirements,
    env_status,
    environments,
    gang,
    health_rules,
    launch_env,
    launcher,
    log_progress,
    paddle_nbext_checkpoints,
    paddle_nbext_fence,
    paddle_nbext_hapi,
    paddle_nbext_job,
    paddle_nbext_report,
    paddle_nbext_sitecustomize,
    pod_views,
    policy,
    preflight,
    ranks,
    replica_files,
    replica_health,
    replica_log,
    replicas,
    store_relay,
    supervise,
)

#: The bundle's directory of modules for training code (on the replica's PYTHONPATH).
PYLIB = "pylib"
#: bundle file path (relative, "/"-separated) -> the module that is shipped under that name.
_MODULES = {
    "launcher.py": launcher,
    "launch_env.py": launch_env,
    "endpoint_wait.py": endpoint_wait,
    "replica_files.py": replica_files,
    "replica_log.py": replica_log,
    "policy.py": policy,
    "preflight.py": preflight,
    "supervise.py": supervise,
    "store_relay.py": store_relay,
    "ranks.py": ranks,
    "environments.py": environments,
    "env_requirements.py": env_requirements,
    "env_index.py": env_index,
    "env_build.py": env_build,
    "env_status.py": env_status,
    "gang.py": gang,
    "health_rules.py": health_rules,
    "replica_health.py": replica_health,
    "cluster_master.py": cluster_master,
    "replicas.py": replicas,
    "pod_views.py": pod_views,
    "contract.py": paddle_nbext.model.contract,
    "paddle_noise.py": paddle_nbext.model.paddle_noise,
    "progress_pattern.py": paddle_nbext.model.progress_pattern,
    "log_progress.py": log_progress,
    "paddle_nbext_fence.py": paddle_nbext_fence,
    "paddle_nbext_report.py": paddle_nbext_report,
    f"{PYLIB}/paddle_nbext_job.py": paddle_nbext_job,
    f"{PYLIB}/paddle_nbext_report.py": paddle_nbext_report,
    f"{PYLIB}/paddle_nbext_checkpoints.py": paddle_nbext_checkpoints,
    f"{PYLIB}/paddle_nbext_fence.py": paddle_nbext_fence,
    # `Model.fit` reports by itself: Python runs pylib/sitecustomize.py at start-up.
    f"{PYLIB}/sitecustomize.py": paddle_nbext_sitecustomize,
    f"{PYLIB}/paddle_nbext_hapi.py": paddle_nbext_hapi,
}
NAMES: tuple[str, ...] = tuple(_MODULES)


class RuntimeFilesMissing(OSError):
    """A runtime file cannot be read: the installation is damaged."""


def config_key(name: str) -> str:
    """The ConfigMap key of the bundle file `name` (keys cannot hold "/"; the mount's `path`
    puts the file back at `name`)."""
    return name.replace("/", ".")


def source_path(name: str) -> Path:
    """Where the installed copy of the bundle file `name` is."""
    module_file = _MODULES[name].__file__
    if module_file is None:  # pragma: no cover - only for namespace packages
        raise RuntimeFilesMissing(f"the job runtime file {name} has no source in this installation")
    return Path(module_file)


def read_bundle() -> dict[str, str]:
    """Every bundle file's text by name (blocking: call it in a thread from the event loop)."""
    files: dict[str, str] = {}
    for name in NAMES:
        path = source_path(name)
        try:
            files[name] = path.read_text(encoding="utf-8")
        except OSError as error:
            raise RuntimeFilesMissing(f"the job runtime file {path} is missing from this installation ({error})") from None
    return files


def write_bundle(directory: Path) -> Path:
    """Write the bundle into `directory` (created); returns the launcher's path there."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in read_bundle().items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return directory / "launcher.py"


def digest(bundle: dict[str, str]) -> str:
    """SHA-256 of the bundle's names and texts, hex."""
    hashed = hashlib.sha256()
    for name in sorted(bundle):
        hashed.update(name.encode() + b"\0" + bundle[name].encode() + b"\0")
    return hashed.hexdigest()


def configmap_name(bundle: dict[str, str]) -> str:
    """The ConfigMap that holds this bundle on Kubernetes: `paddle-nbext-runtime-<release>-<digest>`,
    so a release's jobs share one, and another bundle (another release, a patched file) gets
    its own."""
    release = re.sub(r"[^a-z0-9-]+", "-", paddle_nbext.__version__.lower()).strip("-")
    return f"paddle-nbext-runtime-{release}-{digest(bundle)[:12]}"
