"""Build the control plane's binaries from source at pinned versions, once, into a cache.

Each component is a Go module of our own under ``gomod/`` that requires the upstream module at
the pinned release (``go.mod`` and ``go.sum`` are committed, so every machine builds the same
sources).  The binaries land in ``<cache>/<component>-<version>-<digest>/`` where the digest
covers the module files: a changed pin builds anew, an unchanged one is reused at no cost.  The
cache lives outside the repository (``PADDLE_NBEXT_CONTROLPLANE_CACHE``, default
``~/.cache/paddle-nbext/controlplane``) and nothing built is committed.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import ControlPlaneError

GOMOD = Path(__file__).resolve().parent / "gomod"
# The one Go toolchain every build uses (GOTOOLCHAIN on each go command: any Go 1.21+ switches to
# it, fetched once into the module cache; `bash scripts/setup.sh` brings a Go and fetches it).
GO_TOOLCHAIN_FILE = Path(__file__).resolve().parents[3] / "scripts" / "go-toolchain.txt"
GO_TOOLCHAIN = GO_TOOLCHAIN_FILE.read_text().strip()

KUBERNETES_VERSION = "v1.37.2"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
JOBSET_VERSION = "v0.12.0"
KUEUE_VERSION = "v0.17.1"
VOLCANO_VERSION = "v1.14.0"  # volcano.sh/apis, whose types define Volcano v1.14's CRDs
COREDNS_VERSION = "v1.15.0"
PAUSE_VERSION = "3.10"  # our own pause program (gomod/pause), tagged like the upstream image it stands in for
METRICS_SERVER_VERSION = "v0.8.0"
CEPHCSI_VERSION = "v1.12-node"  # our CephFS CSI node plugin (gomod/cephcsi) on CSI spec 1.12, as Kubernetes pins it
HELM_VERSION = "v4.3.2"  # lints, renders and installs deploy/chart (tests/deploy, the cluster suite)

CACHE_ENV = "PADDLE_NBEXT_CONTROLPLANE_CACHE"
KUEUE_METRICS_CERTS_ENV = "PADDLE_NBEXT_KUEUE_METRICS_CERTS"
KUEUE_VISIBILITY_CERTS_ENV = "PADDLE_NBEXT_KUEUE_VISIBILITY_CERTS"
ASSETS = "assets"  # beside a component's binaries: the upstream files copied for it (`Component.assets`)


@dataclass(frozen=True)
class Component:
    """One Go module of ours and the commands it builds (``package`` -> binary name)."""

    module: str
    version: str
    packages: tuple[tuple[str, str], ...]
    ldflags: str
    # Build-time edits of the upstream sources, (module, file in it, text, replacement): applied
    # to a copy of that module made for the build, never to Go's module cache or to the repo.
    patches: tuple[tuple[str, str, str, str], ...] = ()
    # Files of the upstream module copied beside the binaries, (module, path in it): the CRDs and
    # webhook registrations the controller needs, so that starting it needs no Go module cache.
    assets: tuple[tuple[str, str], ...] = ()
    # CRDs generated beside the binaries, (module, API package): for an upstream whose Go module
    # ships only the API types, this component's `controller-gen` writes the CRDs from their
    # kubebuilder markers into ``assets/bases`` with `CRD_OPTIONS`, as the upstream project does.
    crds: tuple[tuple[str, str], ...] = ()

    @property
    def directory(self) -> Path:
        return GOMOD / self.module

    def digest(self) -> str:
        """What the build depends on: our module files and the Go toolchain's version."""
        sha = hashlib.sha256()
        for name in ("go.mod", "go.sum", "main.go", "tools.go"):
            path = self.directory / name
            if path.is_file():
                sha.update(name.encode() + b"\0" + path.read_bytes())
        if self.patches or self.assets:  # (components without them keep the digest they always had)
            sha.update(repr((self.patches, self.assets)).encode())
        if self.crds:
            sha.update(repr((self.crds, CRD_OPTIONS)).encode())
        sha.update(_go_version().encode())
        return sha.hexdigest()[:12]


def _k8s_ldflags() -> str:
    """The version stamps Kubernetes' own build sets (otherwise the binaries call themselves
    v0.0.0-master and kubectl warns about skew)."""
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    stamps = {
        "gitVersion": KUBERNETES_VERSION,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{key}={value}" for key, value in stamps.items()]
    return " ".join(flags)


COMPONENTS: tuple[Component, ...] = (
    Component("etcd", ETCD_VERSION, ((".", "etcd"),), "-s -w"),
    Component(
        "kubernetes",
        KUBERNETES_VERSION,
        tuple(
            (f"k8s.io/kubernetes/cmd/{name}", name) for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
        ),
        _k8s_ldflags(),
    ),
    Component(
        "kwok", KWOK_VERSION, (("sigs.k8s.io/kwok/cmd/kwok", "kwok"),), f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={KWOK_VERSION}"
    ),
)

BINARIES = tuple(binary for component in COMPONENTS for _, binary in component.packages)

# The real node (``realnode.py``): its kubelet and kube-proxy from the same pinned Kubernetes in a
# module of their own (so the control plane's digest, and every warm cache of it, stays as it
# was), cluster DNS, the pause program of the sandbox image, the CephFS CSI node plugin and metrics-server.  containerd, runc and the CNI
# plugins are Debian bookworm's packages (``realnode.NODE_PACKAGES``).
NODE_COMPONENTS: tuple[Component, ...] = (
    Component(
        "node",
        KUBERNETES_VERSION,
        (("k8s.io/kubernetes/cmd/kubelet", "kubelet"), ("k8s.io/kubernetes/cmd/kube-proxy", "kube-proxy")),
        _k8s_ldflags(),
    ),
    Component("coredns", COREDNS_VERSION, ((".", "coredns"),), "-s -w"),
    Component("pause", PAUSE_VERSION, ((".", "pause"),), "-s -w"),
    # ceph-csi's CephFS node service stands in here (the Go module proxy refuses ceph-csi): see
    # gomod/cephcsi/main.go and csi_plugin.py.
    Component("cephcsi", CEPHCSI_VERSION, ((".", "cephcsi"),), "-s -w"),
    # The resource metrics API behind `kubectl top` and the usage read (metrics_server.py).
    Component("metrics-server", METRICS_SERVER_VERSION, (("sigs.k8s.io/metrics-server/cmd/metrics-server", "metrics-server"),), "-s -w"),
)

# The queueing controllers: built with the rest (so one `controlplane build` readies the whole
# suite) but started only for the tests that need a queued cluster.
QUEUE_COMPONENTS: tuple[Component, ...] = (
    Component(
        "jobset",
        JOBSET_VERSION,
        (("sigs.k8s.io/jobset", "jobset-controller"),),
        "-s -w",
        assets=(("sigs.k8s.io/jobset", "config/components/crd/bases"), ("sigs.k8s.io/jobset", "config/components/webhook/manifests.yaml")),
    ),
    Component(
        "kueue",
        KUEUE_VERSION,
        (("sigs.k8s.io/kueue/cmd/kueue", "kueue"),),
        "-s -w",
        assets=(("sigs.k8s.io/kueue", "config/components/crd/bases"), ("sigs.k8s.io/kueue", "config/components/webhook/manifests.yaml")),
        # Without its in-cluster certificate manager Kueue reads its metrics certificate from a
        # fixed /etc path, and its visibility API server's from a fixed /visibility; the test
        # control plane runs it as a local process, so both paths come from the environment
        # instead (queueing.py points them at serving pairs of the test CA).
        patches=(
            (
                "sigs.k8s.io/kueue",
                "cmd/kueue/main.go",
                'metricsCertPath := "/etc/kueue/metrics/certs"',
                f'metricsCertPath := os.Getenv("{KUEUE_METRICS_CERTS_ENV}")',
            ),
            ("sigs.k8s.io/kueue", "pkg/visibility/server.go", '\t"net"\n\t"strings"\n', '\t"net"\n\t"os"\n\t"strings"\n'),
            (
                "sigs.k8s.io/kueue",
                "pkg/visibility/server.go",
                'certDir = "/visibility"',
                f'certDir = os.Getenv("{KUEUE_VISIBILITY_CERTS_ENV}")',
            ),
        ),
    ),
)

QUEUE_BINARIES = tuple(binary for component in QUEUE_COMPONENTS for _, binary in component.packages)

# Volcano's PodGroup CRD for the gang-scheduling tests: no Volcano process runs (they check what
# the API server accepts and what the default scheduler leaves alone), so only the CRD is made,
# by controller-gen at the release Volcano's Makefile pins, from the pinned volcano.sh/apis.
CRD_OPTIONS = "crd:crdVersions=v1,generateEmbeddedObjectMeta=true"  # Volcano's Makefile's
GANG_COMPONENTS: tuple[Component, ...] = (
    Component(
        "volcano",
        VOLCANO_VERSION,
        (("sigs.k8s.io/controller-tools/cmd/controller-gen", "controller-gen"),),
        "-s -w",
        crds=(("volcano.sh/apis", "volcano.sh/apis/pkg/apis/scheduling/v1beta1"),),
    ),
)


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "paddle-nbext" / "controlplane")


@functools.cache
def _go() -> str:
    """The Go command that starts the pinned toolchain: on PATH, or where Go's own installer and
    Debian put it (Debian's newest /usr/lib/go-1.N first; scripts/setup_go.sh looks in the same places)."""
    debian = sorted(Path("/usr/lib").glob("go-1.*/bin/go"), key=lambda g: int(g.parts[-3].split(".")[1]), reverse=True)
    places = ("/usr/local/go/bin/go", *map(str, debian), "/usr/lib/go/bin/go")
    go = shutil.which("go") or next((g for g in places if os.access(g, os.X_OK)), None)
    if go is None:
        raise ControlPlaneError(
            f"building the control plane needs Go (no `go` on PATH): `bash scripts/setup.sh` brings Debian's and {GO_TOOLCHAIN} (as root)"
        )
    return go


def _go_env() -> dict[str, str]:
    """The environment of every go command: ours, with the pinned toolchain."""
    return {**os.environ, "GOTOOLCHAIN": GO_TOOLCHAIN}


@functools.cache
def _go_version() -> str:
    done = subprocess.run([_go(), "env", "GOVERSION"], env=_go_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ControlPlaneError(f"{_go()} cannot start Go {GO_TOOLCHAIN} (GOTOOLCHAIN): {done.stderr.strip()}")
    return done.stdout.strip()


def binary_dir(component: Component) -> Path:
    return cache_dir() / f"{component.module}-{component.version}-{component.digest()}"


def _built(component: Component) -> bool:
    folder = binary_dir(component)
    return all(os.access(folder / binary, os.X_OK) for _, binary in component.packages)


def find_binaries(components: tuple[Component, ...] = COMPONENTS) -> dict[str, Path] | None:
    """Paths of every binary of ``components`` (the core control plane unless told) if all are
    built for today's pins, else None (nothing is built)."""
    try:
        if not all(_built(c) for c in components):
            return None
    except ControlPlaneError:
        return None
    return {binary: binary_dir(c) / binary for c in components for _, binary in c.packages}


def find_node_binaries() -> dict[str, Path] | None:
    """Paths of the real nodes' binaries (kubelet, kube-proxy, CoreDNS, pause, the CSI plugin, metrics-server) if built, else None."""
    return find_binaries(NODE_COMPONENTS)


def find_queue_binaries() -> dict[str, Path] | None:
    """Paths of the JobSet and Kueue controllers if both are built for today's pins, else None."""
    return find_binaries(QUEUE_COMPONENTS)


# Helm, for the chart in deploy/chart: tests/deploy lints and renders it (building it through
# `helm_binary` when `controlplane build` has not yet), the cluster suite installs it.  Stamped
# with its release like Helm's own Makefile does, so `helm version` names the pin.
HELM_COMPONENTS: tuple[Component, ...] = (
    Component(
        "helm",
        HELM_VERSION,
        (("helm.sh/helm/v4/cmd/helm", "helm"),),
        "-s -w -X helm.sh/helm/v4/internal/version.version=" + HELM_VERSION + " -X helm.sh/helm/v4/internal/version.gitTreeState=clean",
    ),
)


def helm_binary() -> Path:
    """The pinned Helm, built into the cache first when it is not there (one go build, a few
    minutes cold; free when cached).  Raises ControlPlaneError when Go is missing."""
    return build(components=HELM_COMPONENTS, log=False)["helm"]


ALL_COMPONENTS = COMPONENTS + QUEUE_COMPONENTS + GANG_COMPONENTS + HELM_COMPONENTS + NODE_COMPONENTS


def build(*, log: bool = True, components: tuple[Component, ...] = ALL_COMPONENTS) -> dict[str, Path]:
    """Build what is missing (reusing the cache) and return every binary's path.

    Prints each component's build time, so the cold and warm costs are visible in CI's log."""
    for component in components:
        if not _built(component):
            with _build_lock(component):  # another process (tests/deploy beside `controlplane build`) may be at it
                if not _built(component):
                    _build(component, log=log)
                    continue
        if log:
            print(f"controlplane: {component.module} {component.version} is built ({binary_dir(component)})", file=sys.stderr)
    found = find_binaries(components)
    assert found is not None
    return found


@contextlib.contextmanager
def _build_lock(component: Component) -> Iterator[None]:
    """One build of a component at a time across processes: a second builder waits, then finds
    the binaries there (two would each compile for minutes on a 2-core machine)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with (cache_dir() / f"build-{component.module}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _module_dir(component: Component, module: str, env: dict[str, str]) -> Path:
    """Where the Go module cache holds `module` at the version our go.mod pins."""
    found = subprocess.run(
        [_go(), "mod", "download", "-json", module], cwd=component.directory, env=env, capture_output=True, text=True, check=False
    )
    directory = json.loads(found.stdout or "{}").get("Dir")
    if found.returncode != 0 or not directory:
        raise ControlPlaneError(f"building {component.module}: cannot find module {module}: {found.stderr.strip() or found.stdout.strip()}")
    return Path(directory)


def _copy_assets(component: Component, staging: Path, env: dict[str, str]) -> None:
    target = staging / ASSETS
    for module, name in component.assets:
        source = _module_dir(component, module, env) / name
        if source.is_dir():
            shutil.copytree(source, target / source.name, dirs_exist_ok=True)
        elif source.is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target / source.name)
        else:
            raise ControlPlaneError(f"building {component.module}: {module} has no {name}")
        for copied in (target / source.name).rglob("*") if source.is_dir() else [target / source.name]:
            copied.chmod(0o755 if copied.is_dir() else 0o644)  # the module cache's files are read-only


def _generate_crds(component: Component, staging: Path, env: dict[str, str]) -> None:
    """Run the just-built controller-gen over each API package (resolved by our go.mod, from the
    module cache) into ``assets/bases``; the Go command must be on its PATH (go/packages)."""
    if not component.crds:
        return
    tool = staging / "controller-gen"
    path_env = {**env, "PATH": f"{Path(_go()).parent}{os.pathsep}{env.get('PATH', '')}"}
    for module, package in component.crds:
        _module_dir(component, module, env)  # a clear error when the pinned module is not there
        done = subprocess.run(
            [str(tool), CRD_OPTIONS, f"paths={package}", f"output:crd:artifacts:config={staging / ASSETS / 'bases'}"],
            cwd=component.directory,
            env=path_env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise ControlPlaneError(
                f"building {component.module}: controller-gen could not make the CRDs of {package}: {done.stderr.strip()}"
            )


def _patched_modfile(component: Component, staging: Path, env: dict[str, str]) -> Path | None:
    """For a component with patches: a copy of each patched module in ``staging`` with the edits
    applied, and a go.mod (ours plus a `replace` of that module by the copy) to build with.  Go
    allows no overlay of files in its module cache, and the cache itself stays untouched.  A patch
    whose text is not found fails the build (a new release moved it: update the patch)."""
    if not component.patches:
        return None
    replaces: dict[str, Path] = {}
    for module, name, text, replacement in component.patches:
        if module not in replaces:
            copy = staging / "src" / module.replace("/", "_")
            shutil.copytree(_module_dir(component, module, env), copy)
            for path in [copy, *copy.rglob("*")]:
                path.chmod(0o755 if path.is_dir() else 0o644)  # the module cache's files are read-only
            replaces[module] = copy
        source = replaces[module] / name
        original = source.read_text() if source.is_file() else ""
        if text not in original:
            raise ControlPlaneError(f"building {component.module}: {module}/{name} does not contain {text!r}; update the patch in build.py")
        source.write_text(original.replace(text, replacement))
    modfile = staging / "build.mod"
    lines = [(component.directory / "go.mod").read_text(), *(f"replace {module} => {copy}" for module, copy in replaces.items())]
    modfile.write_text("\n".join(lines) + "\n")
    shutil.copyfile(component.directory / "go.sum", staging / "build.sum")
    return modfile


def _build(component: Component, *, log: bool) -> None:
    final = binary_dir(component)
    staging = final.with_name(final.name + f".partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log_path = cache_dir() / f"build-{component.module}.log"
    started = time.monotonic()
    if log:
        print(
            f"controlplane: building {component.module} {component.version} "
            f"({', '.join(b for _, b in component.packages)}); log: {log_path}",
            file=sys.stderr,
        )
    env = {**_go_env(), "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    modfile = _patched_modfile(component, staging, env)
    with log_path.open("w") as out:
        # Listing every package in one `go build -o DIR` shares the compile of their common code.
        result = subprocess.run(
            [
                _go(),
                "build",
                "-trimpath",
                *([f"-modfile={modfile}"] if modfile else []),
                "-ldflags",
                component.ldflags,
                "-o",
                str(staging) + os.sep,
                *[package for package, _ in component.packages],
            ],
            cwd=component.directory,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
        raise ControlPlaneError(
            f"building {component.module} {component.version} failed (go build exit code "
            f"{result.returncode}); full log: {log_path}\n" + "\n".join(tail)
        )
    _copy_assets(component, staging, env)
    _generate_crds(component, staging, env)
    for leftover in ("src", "build.mod", "build.sum"):
        shutil.rmtree(staging / leftover, ignore_errors=True) if (staging / leftover).is_dir() else (staging / leftover).unlink(
            missing_ok=True
        )
    for package, binary in component.packages:
        # `go build -o DIR` names each binary after its package path's last element ("." is our
        # module, whose path ends in the component's name).
        produced = staging / (Path(package).name if package != "." else component.module)
        if produced != staging / binary:
            produced.rename(staging / binary)
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    if log:
        print(f"controlplane: built {component.module} in {time.monotonic() - started:.0f} s", file=sys.stderr)
