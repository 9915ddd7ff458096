"""The real node's container images, built here (no registry can be reached), cached by digest.

- ``registry.local/pause:3.10``: the sandbox image, one file (our static ``pause`` program).
- ``registry.local/paddle:3.0.0-cpu``: a Paddle job image as a site would provide one: a Debian
  bookworm minbase root filesystem made by ``mmdebstrap`` with Python 3.11 and the libraries
  Paddle loads (``libgomp1``), and a second layer with ``paddlepaddle==3.0.0``, ``protobuf<7`` and
  ``setuptools`` (``import paddle`` needs it) installed by pip into Debian's own dist-packages.

Each image is a docker-archive tarball (what ``ctr images import`` reads) in
``<cache>/images/<name>-<tag>-<digest>.tar``; the digest covers what the image is made from
(this file, the package lists, the pause binary, the interpreter whose wheels are chosen), so an
unchanged image is reused at no cost and a changed input builds a new one.  Debian packages come
from the host's own apt sources (the files are handed to mmdebstrap as they are), wheels from
pip's usual index and cache.
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
from dataclasses import dataclass
from pathlib import Path

from .build import PAUSE_VERSION, cache_dir
from .errors import ControlPlaneError

SUITE = "bookworm"
#: Debian packages of the Paddle image (Paddle 3.0.0's wheel loads libgomp at import).
DEBIAN_PACKAGES = ("python3", "libgomp1", "ca-certificates")
#: What pip installs over them; protobuf 7 breaks parameter-server mode of Paddle 3.0.0.
PIP_REQUIREMENTS = ("paddlepaddle==3.0.0", "protobuf<7", "setuptools")
IMAGE_PYTHON = "3.11"  # bookworm's python3: the wheels pip picks must be for it
SITE_PACKAGES = "usr/lib/python3/dist-packages"  # where Debian's python3 finds packages

PAUSE_IMAGE = f"registry.local/pause:{PAUSE_VERSION}"
PADDLE_IMAGE = "registry.local/paddle:3.0.0-cpu"
DIGEST_LABEL = "paddle-nbext.test/digest"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
APT_SOURCES = (Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.sources")))


@dataclass(frozen=True)
class Image:
    """A built image: its reference, the archive ``ctr images import`` reads, the input digest."""

    reference: str
    archive: Path
    digest: str


def images_dir() -> Path:
    return cache_dir() / "images"


def _digest(*parts: bytes) -> str:
    sha = hashlib.sha256(Path(__file__).read_bytes())
    for part in parts:
        sha.update(len(part).to_bytes(8, "big") + part)
    return sha.hexdigest()[:12]


def _archive_path(reference: str, digest: str) -> Path:
    name, tag = reference.rsplit("/", 1)[1].split(":")
    return images_dir() / f"{name}-{tag}-{digest}.tar"


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
    _forget_older(target)


def _forget_older(current: Path) -> None:
    """Archives of the same image from earlier inputs (a changed pin or builder): removed, so the
    cache holds one ~1 GB archive per image, not one per change."""
    stem = current.name.rsplit("-", 1)[0]
    for old in current.parent.glob(f"{stem}-*.tar"):
        if old != current and old.name.rsplit("-", 1)[0] == stem:
            old.unlink(missing_ok=True)


def pause_image(pause_binary: Path, *, log: bool = True) -> Image:
    """The sandbox image: ``/pause`` alone, its entry point."""
    digest = _digest(pause_binary.read_bytes())
    target = _archive_path(PAUSE_IMAGE, digest)
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
    _write_archive(PAUSE_IMAGE, [layer], {"Entrypoint": ["/pause"], "Env": [PATH_ENV]}, target)
    shutil.rmtree(work, ignore_errors=True)
    if log:
        print(f"images: built {PAUSE_IMAGE} ({target})", file=sys.stderr)
    return Image(PAUSE_IMAGE, target, digest)


def _require(tool: str, package: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise ControlPlaneError(f"building the Paddle job image needs `{tool}` (Debian package {package}): apt-get install {package}")
    return found


def _run_logged(argv: list[str], log_path: Path, what: str, env: dict[str, str] | None = None) -> None:
    with log_path.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, check=False)
    if done.returncode != 0:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
        raise ControlPlaneError(f"{what} failed (exit code {done.returncode}); log: {log_path}\n" + "\n".join(tail))


def _tar_tree(root: Path, layer: Path) -> None:
    """``root``'s contents as a layer, owned by root, in a stable order."""
    with tarfile.open(layer, "w") as tar:
        for path in sorted(root.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(root)))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if info.isreg():
                with path.open("rb") as stream:
                    tar.addfile(info, stream)
            else:
                tar.addfile(info)


def paddle_image(*, log: bool = True) -> Image:
    """The Paddle job image (Debian minbase + Python 3.11 + paddlepaddle 3.0.0), built if missing."""
    sources = [p for p in APT_SOURCES if p.is_file() and p.read_text().strip()]
    digest = _digest(
        repr((SUITE, DEBIAN_PACKAGES, PIP_REQUIREMENTS, IMAGE_PYTHON, SITE_PACKAGES)).encode(),
        *(p.read_bytes() for p in sources),
    )
    target = _archive_path(PADDLE_IMAGE, digest)
    if target.is_file():
        return Image(PADDLE_IMAGE, target, digest)
    mmdebstrap = _require("mmdebstrap", "mmdebstrap")
    if not sources:
        raise ControlPlaneError("building the Paddle job image needs the host's Debian apt sources (/etc/apt/sources.list*), none found")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = target.with_name(target.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    log_path = images_dir() / "build-paddle.log"
    log_path.write_text("")
    started = time.monotonic()
    if log:
        print(f"images: building {PADDLE_IMAGE} (mmdebstrap {SUITE} + pip {' '.join(PIP_REQUIREMENTS)}); log: {log_path}", file=sys.stderr)
    try:
        base = work / "base.tar"
        _run_logged(
            [
                mmdebstrap,
                "--variant=minbase",
                f"--include={','.join(DEBIAN_PACKAGES)}",
                "--dpkgopt=path-exclude=/usr/share/man/*",
                "--dpkgopt=path-exclude=/usr/share/doc/*",
                "--dpkgopt=path-exclude=/usr/share/locale/*",
                SUITE,
                str(base),
                *map(str, sources),
            ],
            log_path,
            "mmdebstrap (the image's Debian root filesystem)",
        )
        site = work / "pip-root"
        _run_logged(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--only-binary=:all:",
                f"--python-version={IMAGE_PYTHON}",
                "--target",
                str(site / SITE_PACKAGES),
                *PIP_REQUIREMENTS,
            ],
            log_path,
            "pip install of Paddle into the image",
        )
        shutil.rmtree(site / SITE_PACKAGES / "bin", ignore_errors=True)  # console scripts for the host's interpreter
        python_layer = work / "python.tar"
        _tar_tree(site, python_layer)
        config = {"Env": [PATH_ENV, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"], "Cmd": ["python3"], "WorkingDir": "/"}
        _write_archive(PADDLE_IMAGE, [base, python_layer], config, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if log:
        size = target.stat().st_size / 1e6
        print(f"images: built {PADDLE_IMAGE} in {time.monotonic() - started:.0f} s ({size:.0f} MB)", file=sys.stderr)
    return Image(PADDLE_IMAGE, target, digest)


def build_images(pause_binary: Path, *, log: bool = True) -> list[Image]:
    """Both images, built where missing."""
    return [pause_image(pause_binary, log=log), paddle_image(log=log)]
