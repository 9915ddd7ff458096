"""Images made of the Paddle image plus one layer of ours (the notebook image, the installers
image): the cache by digest, the scratch directory, the build log and the archive are the same
for each; what differs is how the layer's root is filled and the image's config.

Tagged by the digest of their inputs, like the other images built here, so a changed input is a
new tag the node has never cached under an old content.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from .images import Image, images_dir
from .images import _tar_tree as tar_tree
from .images import _write_archive as write_archive

#: Fills the layer's root directory (first argument) using a scratch directory (second) and the
#: base's layers (third), logging to the build log (fourth); returns the image's config.
FillLayer = Callable[[Path, Path, list[Path], Path], Mapping[str, object]]


def layers_of(archive: Path, work: Path) -> list[Path]:
    """The layer tarballs of a docker-archive, lowest first, extracted into ``work``."""
    with tarfile.open(archive) as tar:
        manifest_file = tar.extractfile("manifest.json")
        assert manifest_file is not None, f"{archive} has no manifest.json"
        manifest = json.load(manifest_file)
        layers = []
        for index, member in enumerate(manifest[0]["Layers"]):
            target = work / f"layer-{index}.tar"
            source = tar.extractfile(member)
            assert source is not None, f"{archive} has no layer {member}"
            with source, target.open("wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            layers.append(target)
    return layers


def derived_image(base: Image, repository: str, digest: str, what: str, fill: FillLayer, *, log: bool = True) -> Image:
    """``<repository>:<digest>``: ``base``'s layers plus the one ``fill`` makes, built once into
    the images cache (``what`` says what the layer adds, in the build's messages)."""
    name = repository.rsplit("/", 1)[1]
    reference = f"{repository}:{digest}"
    target = images_dir() / f"{name}-{digest}.tar"
    if target.is_file():
        return Image(reference, target, digest)
    work = target.with_name(target.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log_path = images_dir() / f"build-{name.removeprefix('paddle-')}.log"
    log_path.write_text("")
    started = time.monotonic()
    if log:
        print(f"images: building {reference} (Paddle image + {what}); log: {log_path}", file=sys.stderr)
    try:
        layers = layers_of(base.archive, work)
        root = work / "layer-root"
        root.mkdir()
        config = fill(root, work, layers, log_path)
        layer = work / "layer.tar"
        tar_tree(root, layer)
        write_archive(reference, [*layers, layer], config, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if log:
        size = target.stat().st_size / 1e6
        print(f"images: built {reference} in {time.monotonic() - started:.0f} s ({size:.0f} MB)", file=sys.stderr)
    return Image(reference, target, digest)
