"""Where the suite's images are kept: docker-archive tarballs (what ``ctr images import`` reads)
in ``<cache>/images``, one per image, named by the digest of the image's inputs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .build import cache_dir


@dataclass(frozen=True)
class Image:
    """A built image: its reference, the archive ``ctr images import`` reads, the input digest."""

    reference: str
    archive: Path
    digest: str


def images_dir() -> Path:
    return cache_dir() / "images"


def archive_path(reference: str, digest: str) -> Path:
    """``<name>-<tag>-<digest>.tar``, or ``<name>-<digest>.tar`` for an image tagged by its digest."""
    name, tag = reference.rsplit("/", 1)[1].split(":")
    return images_dir() / (f"{name}-{digest}.tar" if tag == digest else f"{name}-{tag}-{digest}.tar")


def forget_older(current: Path) -> None:
    """Archives of the same image from earlier inputs (a changed pin or Dockerfile): removed, so
    the cache holds one ~1 GB archive per image, not one per change."""
    stem = current.name.rsplit("-", 1)[0]
    for old in current.parent.glob(f"{stem}-*{current.suffix}"):
        if old != current and old.name.rsplit("-", 1)[0] == stem:
            old.unlink(missing_ok=True)
