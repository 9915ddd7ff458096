"""Images built from a Dockerfile with buildah over an image of the suite's, cached by digest.

What an admin runs (``buildah bud --build-arg BASE=... -f Dockerfile CONTEXT``), with the
suite's own base in ``BASE``: the shipped Dockerfiles (``deploy/images/``) and the suite's own
(the installers image).  The digest covers the inputs: the base's digest, every file of the build
context (the Dockerfile included) and the build arguments; an archive of that digest is reused
at no cost (no buildah runs), a changed input builds a new one.  Builds hold a lock on the images
cache: the cluster suite and the rest of the suite, run side by side, may both ask for an image.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .buildah import Buildah
from .images_cache import Image, archive_path, forget_older, images_dir


@dataclass(frozen=True)
class Recipe:
    """How an image is made: ``repository:tag``, from ``context`` (file name in the build context
    -> its source), with ``build_args``, over ``base``.  An empty ``tag`` tags it by its digest,
    so that a changed image is a new tag a node has never cached under an old content."""

    repository: str
    tag: str
    context: Mapping[str, Path]
    base: Image
    build_args: Mapping[str, str]
    #: Puts ``base`` into buildah's storage when it is not there; by default its archive is loaded.
    make_base: Callable[[Buildah], None] | None = None

    def digest(self) -> str:
        sha = hashlib.sha256(self.base.digest.encode())
        for name in sorted(self.context):
            sha.update(f"\0{name}\0".encode() + hashlib.sha256(self.context[name].read_bytes()).digest())
        for name, value in sorted(self.build_args.items()):
            sha.update(f"\0{name}={value}".encode())
        return sha.hexdigest()[:12]


def shipped_context(folder: Path) -> dict[str, Path]:
    """The build context a folder of ``deploy/images`` ships: its files, without dotfiles and
    without a wheel an admin may have left there (the suite puts in its own)."""
    return {p.name: p for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith(".") and p.suffix != ".whl"}


def buildah() -> Buildah:
    """buildah over the suite's own storage in the images cache."""
    return Buildah(images_dir() / "buildah", images_dir() / "buildah.log")


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """One build at a time in the images cache (two processes may want the same image)."""
    images_dir().mkdir(parents=True, exist_ok=True)
    with (images_dir() / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _base_in_storage(recipe: Recipe, builder: Buildah) -> None:
    """The recipe's base in buildah's storage as it was built (made again, or its archive loaded
    back, when the storage lost it or holds an older one)."""
    if builder.digest_of(recipe.base.reference) == recipe.base.digest:
        return
    if recipe.make_base is not None:
        recipe.make_base(builder)
    else:
        builder.load(recipe.base.archive)


def _build(recipe: Recipe, builder: Buildah, reference: str, digest: str, target: Path) -> None:
    """``buildah bud`` of the recipe, in a build context of its own files only."""
    _base_in_storage(recipe, builder)
    context = target.with_name(target.name + ".context")
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir()
    try:
        for name, source in recipe.context.items():
            shutil.copy2(source, context / name)
        builder.build(context / "Dockerfile", context, reference, digest, {"BASE": recipe.base.reference, **recipe.build_args})
    finally:
        shutil.rmtree(context, ignore_errors=True)


def dockerfile_image(recipe: Recipe, what: str, *, log: bool = True) -> Image:
    """The image of ``recipe``: its archive when built before, else built (``what`` names it in
    the build's messages) and written to the images cache."""
    digest = recipe.digest()
    reference = f"{recipe.repository}:{digest if recipe.tag == '' else recipe.tag}"
    target = archive_path(reference, digest)
    if target.is_file():
        return Image(reference, target, digest)
    with build_lock():
        if target.is_file():  # built by another process while this one waited
            return Image(reference, target, digest)
        builder = buildah()
        builder.home.mkdir(parents=True, exist_ok=True)
        builder.log.write_text("")
        started = time.monotonic()
        if log:
            print(f"images: building {reference} ({what}); log: {builder.log}", file=sys.stderr)
        if builder.digest_of(reference) != digest:  # else only the archive was lost: written again
            _build(recipe, builder, reference, digest, target)
        partial = target.with_name(target.name + ".partial")
        partial.unlink(missing_ok=True)  # left by a build that was stopped: buildah would add to it
        try:
            builder.push(reference, partial)
            partial.rename(target)
        finally:
            partial.unlink(missing_ok=True)
        forget_older(target)
        builder.forget_others(recipe.repository, reference)
    if log:
        size = target.stat().st_size / 1e6
        print(f"images: built {reference} in {time.monotonic() - started:.0f} s ({size:.0f} MB)", file=sys.stderr)
    return Image(reference, target, digest)


def in_storage(image: Image) -> Image:
    """``image`` (built here) in buildah's storage as its archive holds it, for ``buildah run``
    (loaded back from the archive when the storage lost it)."""
    builder = buildah()
    if builder.digest_of(image.reference) != image.digest:
        with build_lock():
            builder.load(image.archive)
    return image
