"""Build the control plane's binaries from source at pinned versions, once, into a cache.

Each component is a Go module of our own under ``gomod/`` that requires the upstream module at
the pinned release (``go.mod`` and ``go.sum`` are committed, so every machine builds the same
sources).  The binaries land in ``<cache>/<component>-<version>-<digest>/`` where the digest
covers the module files: a changed pin builds anew, an unchanged one is reused at no cost.  The
cache lives outside the repository (``PADDLE_NBEXT_CONTROLPLANE_CACHE``, default
``~/.cache/paddle-nbext/controlplane``) and nothing built is committed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import ControlPlaneError

GOMOD = Path(__file__).resolve().parent / "gomod"

KUBERNETES_VERSION = "v1.37.2"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"

CACHE_ENV = "PADDLE_NBEXT_CONTROLPLANE_CACHE"


@dataclass(frozen=True)
class Component:
    """One Go module of ours and the commands it builds (``package`` -> binary name)."""

    module: str
    version: str
    packages: tuple[tuple[str, str], ...]
    ldflags: str

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


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "paddle-nbext" / "controlplane")


@functools.cache
def _go() -> str:
    """The Go command: on PATH, or where Go's own installer and Debian put it."""
    go = shutil.which("go") or next((g for g in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go") if os.access(g, os.X_OK)), None)
    if go is None:
        raise ControlPlaneError("building the control plane needs Go (the `go` command is not on PATH); install Go 1.26 or newer")
    return go


@functools.cache
def _go_version() -> str:
    return subprocess.run([_go(), "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()


def binary_dir(component: Component) -> Path:
    return cache_dir() / f"{component.module}-{component.version}-{component.digest()}"


def _built(component: Component) -> bool:
    folder = binary_dir(component)
    return all(os.access(folder / binary, os.X_OK) for _, binary in component.packages)


def find_binaries() -> dict[str, Path] | None:
    """Paths of every binary if all are built for today's pins, else None (nothing is built)."""
    try:
        if not all(_built(c) for c in COMPONENTS):
            return None
    except ControlPlaneError:
        return None
    return {binary: binary_dir(c) / binary for c in COMPONENTS for _, binary in c.packages}


def build(*, log: bool = True) -> dict[str, Path]:
    """Build what is missing (reusing the cache) and return every binary's path.

    Prints each component's build time, so the cold and warm costs are visible in CI's log."""
    for component in COMPONENTS:
        if _built(component):
            if log:
                print(f"controlplane: {component.module} {component.version} is built ({binary_dir(component)})", file=sys.stderr)
            continue
        _build(component, log=log)
    found = find_binaries()
    assert found is not None
    return found


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
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    with log_path.open("w") as out:
        # Listing every package in one `go build -o DIR` shares the compile of their common code.
        result = subprocess.run(
            [
                _go(),
                "build",
                "-trimpath",
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
