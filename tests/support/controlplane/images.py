"""The real node's container images, built here (no registry can be reached), cached by digest.

- ``registry.local/pause:3.10``: the sandbox image, one file (our static ``pause`` program),
  written as an archive directly;
- ``registry.local/paddle-job:3.0.0``: the job image a site builds from our Dockerfile
  (``deploy/images/job/Dockerfile``), built as the admin guide's install step 2 says (its folder,
  tag and build arguments read from the guide, ``support/admin_guide.py``) over the suite's base: a Debian bookworm
  minbase root filesystem made by ``mmdebstrap`` with python3, pip, libgomp1 and ca-certificates
  (what the Dockerfile otherwise installs from Debian itself), committed into buildah's storage.

Each image is a docker-archive tarball (what ``ctr images import`` reads) in
``<cache>/images/<name>-<tag>-<digest>.tar``; the digest covers what the image is made from (the
pause binary; the base's package list and the host's apt sources; the Dockerfile), so an
unchanged image is reused at no cost and a changed input builds a new one.  Debian packages come
from the host's own apt sources (the files are handed to mmdebstrap as they are), Paddle from
pip's usual index, fetched by pip in the image as the Dockerfile says.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path

from support import admin_guide

from .build import PAUSE_VERSION
from .buildah import Buildah
from .dockerfile_build import Recipe, dockerfile_image, shipped_context
from .errors import ControlPlaneError
from .images_cache import Image, archive_path, forget_older, images_dir

__all__ = ["PADDLE_IMAGE", "PAUSE_IMAGE", "Image", "base_image", "build_images", "paddle_image", "pause_image"]

REPO = Path(__file__).resolve().parents[3]
SUITE = "bookworm"
#: The base's Debian packages: what the job Dockerfile needs of a BASE (pip for its RUN; Paddle's
#: wheel loads libgomp at import; ca-certificates for HTTPS), so that it installs none itself.
DEBIAN_PACKAGES = ("python3", "python3-pip", "libgomp1", "ca-certificates")
MMDEBSTRAP_OPTIONS = (
    "--variant=minbase",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
)
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BASE_ENV = (PATH_ENV, "LANG=C.UTF-8")
BASE_REPOSITORY = "localhost/paddle-nbext-debian-base"
PAUSE_IMAGE = f"registry.local/pause:{PAUSE_VERSION}"
#: The registry the suite's images are named after ($REGISTRY in the admin guide's install).
REGISTRY = "registry.local"
#: The job image's build as the admin guide's install step 2 writes it; its BASE is the suite's.
JOB_BUILD = admin_guide.image_build("deploy/images/job", {"REGISTRY": REGISTRY, "BASE_IMAGE": BASE_REPOSITORY})
PADDLE_REPOSITORY, _, PADDLE_TAG = JOB_BUILD.tag.rpartition(":")
PADDLE_IMAGE = JOB_BUILD.tag
APT_SOURCES = (Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.sources")))


def _digest(*parts: bytes) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(len(part).to_bytes(8, "big") + part)
    return sha.hexdigest()[:12]


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            sha.update(chunk)
    return "sha256:" + sha.hexdigest()


def _write_archive(reference: str, layers: list[Path], config: Mapping[str, object], target: Path) -> None:
    """A docker-archive (``docker save`` layout) of ``layers`` (uncompressed tars, lowest first)."""
    diff_ids = [_file_digest(layer) for layer in layers]
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created_by": f"paddle-nbext test images: {layer.name}"} for layer in layers],
    }
    config_bytes = json.dumps(image_config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [reference], "Layers": [f"{d[7:]}/layer.tar" for d in diff_ids]}]
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    with tarfile.open(partial, "w") as tar:
        _add_bytes(tar, config_name, config_bytes)
        for layer, diff_id in zip(layers, diff_ids, strict=True):
            tar.add(layer, arcname=f"{diff_id[7:]}/layer.tar")
        _add_bytes(tar, "manifest.json", json.dumps(manifest).encode())
    partial.rename(target)
    forget_older(target)


def pause_image(pause_binary: Path, *, log: bool = True) -> Image:
    """The sandbox image: ``/pause`` alone, its entry point."""
    config = {"Entrypoint": ["/pause"], "Env": [PATH_ENV]}
    digest = _digest(pause_binary.read_bytes(), json.dumps(config).encode())
    target = archive_path(PAUSE_IMAGE, digest)
    if target.is_file():
        return Image(PAUSE_IMAGE, target, digest)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = target.with_name(target.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    layer = work / "pause.tar"
    with tarfile.open(layer, "w") as tar:
        info = tar.gettarinfo(str(pause_binary), arcname="pause")
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mode = 0o755
        info.mtime = 0
        with pause_binary.open("rb") as stream:
            tar.addfile(info, stream)
    _write_archive(PAUSE_IMAGE, [layer], config, target)
    shutil.rmtree(work, ignore_errors=True)
    if log:
        print(f"images: built {PAUSE_IMAGE} ({target})", file=sys.stderr)
    return Image(PAUSE_IMAGE, target, digest)


def _apt_sources() -> list[Path]:
    sources = [p for p in APT_SOURCES if p.is_file() and p.read_text().strip()]
    if not sources:
        raise ControlPlaneError("building the images' Debian base needs the host's apt sources (/etc/apt/sources.list*), none found")
    return sources


def _mmdebstrap(target: Path, sources: list[Path], log_path: Path) -> None:
    """The base's root filesystem as a tarball at ``target``."""
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise ControlPlaneError(
            "building the images' Debian base needs `mmdebstrap` (Debian package mmdebstrap): apt-get install mmdebstrap"
        )
    argv = [mmdebstrap, *MMDEBSTRAP_OPTIONS, f"--include={','.join(DEBIAN_PACKAGES)}", SUITE, str(target), *map(str, sources)]
    with log_path.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
        raise ControlPlaneError(
            f"mmdebstrap (the images' Debian base) failed (exit code {done.returncode}); log: {log_path}\n" + "\n".join(tail)
        )


def base_image() -> Image:
    """The suite's BASE for the job Dockerfile, as it will be once made (``make_base`` makes it):
    named by the digest of its recipe and the host's apt sources.  Its ``archive`` is the root
    filesystem tarball mmdebstrap makes, not an image archive: no node runs it."""
    recipe = repr((SUITE, DEBIAN_PACKAGES, MMDEBSTRAP_OPTIONS, BASE_ENV)).encode()
    digest = _digest(recipe, *(p.read_bytes() for p in _apt_sources()))
    return Image(f"{BASE_REPOSITORY}:{digest}", images_dir() / f"debian-base-{digest}.tar", digest)


def make_base(base: Image, builder: Buildah, *, log: bool = True) -> None:
    """``base`` in buildah's storage: its root filesystem made by mmdebstrap once (the tarball kept
    in the cache), committed as a one-layer image (run under the images' build lock)."""
    if not base.archive.is_file():
        started = time.monotonic()
        if log:
            print(f"images: making the Debian base ({SUITE}: {', '.join(DEBIAN_PACKAGES)}); log: {builder.log}", file=sys.stderr)
        partial = base.archive.with_name(base.archive.name + f".partial-{os.getpid()}")
        try:
            _mmdebstrap(partial, _apt_sources(), builder.log)
            partial.rename(base.archive)
        finally:
            partial.unlink(missing_ok=True)
        forget_older(base.archive)
        if log:
            print(f"images: made the Debian base in {time.monotonic() - started:.0f} s", file=sys.stderr)
    builder.commit_rootfs(base.archive, base.reference, base.digest, BASE_ENV, "python3")
    builder.forget_others(BASE_REPOSITORY, base.reference)


def paddle_image(*, log: bool = True) -> Image:
    """The job image: ``deploy/images/job/Dockerfile`` over the suite's base."""
    base = base_image()
    args = {name: value for name, value in JOB_BUILD.build_args.items() if name != "BASE"}  # BASE: the recipe's base
    context = shipped_context(REPO / JOB_BUILD.folder)
    recipe = Recipe(PADDLE_REPOSITORY, PADDLE_TAG, context, base, args, lambda b: make_base(base, b, log=log))
    return dockerfile_image(recipe, "deploy/images/job/Dockerfile", log=log)


def build_images(pause_binary: Path, *, log: bool = True) -> list[Image]:
    """The node's images (the sandbox's and the job image), built where missing."""
    return [pause_image(pause_binary, log=log), paddle_image(log=log)]
