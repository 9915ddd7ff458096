"""buildah (Debian's daemonless image builder) as the suite runs it: a storage of its own in the
images cache, every command's output in a build log, and the few operations the images need.

- **overlay storage**: each build starts from its parent image without copying it (with the
  ``vfs`` driver, a one-line ``RUN`` over the 1 GB job image took 76 s, copying the parent's whole
  tree before and scanning it after; with ``overlay`` it took 2 s);
- **chroot isolation**: ``RUN`` needs no user namespaces and no runtime of its own;
- **a layer cache** (``--layers``): an instruction whose inputs are unchanged is not run again,
  so a new wheel of the project reinstalls only the project, not JupyterLab (the notebook
  Dockerfile installs the servers before it copies the wheel in);
- **no pulls**: ``FROM`` names only images already in the storage (no registry is reachable
  here); a missing one is an error, never a lookup;
- **the host's CA bundle over the image's while a RUN runs**: machines whose HTTPS goes through
  an intercepting proxy trust it only through the host's bundle, and pip in the image must reach
  the package index too; nothing of it stays in the image.

Each image built here carries a label with the digest of its inputs, so a later build can tell
whether the storage still holds the image an archive was made from.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import ControlPlaneError

STORAGE_DRIVER = "overlay"
DIGEST_LABEL = "paddle-nbext.test/digest"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def buildah_command() -> str:
    found = shutil.which("buildah")
    if found is None:
        raise ControlPlaneError("building the suite's images needs `buildah` (Debian package buildah): apt-get install buildah")
    return found


@dataclass(frozen=True)
class Buildah:
    """buildah over the storage in ``home`` (its ``storage`` and ``run`` folders), logging to ``log``."""

    home: Path
    log: Path

    def _argv(self, args: Sequence[str]) -> list[str]:
        storage = ["--storage-driver", STORAGE_DRIVER, "--root", str(self.home / "storage"), "--runroot", str(self.home / "run")]
        return [buildah_command(), *storage, *args]

    def attempt(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        """``buildah args``, its output in the log (stdout also returned), whatever its exit code."""
        argv = self._argv(args)
        with self.log.open("a") as out:
            out.write(f"$ {' '.join(argv)}\n")
            out.flush()
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL, text=True, check=False)
            out.write(done.stdout)
        return done

    def run(self, args: Sequence[str], what: str) -> str:
        """``buildah args``, its output in the log; what it prints on stdout is returned."""
        done = self.attempt(args)
        if done.returncode != 0:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-20:]
            raise ControlPlaneError(f"{what} failed (buildah exit code {done.returncode}); log: {self.log}\n" + "\n".join(tail))
        return done.stdout

    def digest_of(self, reference: str) -> str | None:
        """The input digest ``reference`` was built from, or None when the storage lacks it."""
        argv = self._argv(["inspect", "--type", "image", reference])
        done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            return None
        labels = json.loads(done.stdout)["OCIv1"]["config"].get("Labels") or {}
        return str(labels[DIGEST_LABEL]) if DIGEST_LABEL in labels else None

    def commit_rootfs(self, rootfs: Path, reference: str, digest: str, env: Sequence[str], cmd: str) -> None:
        """``reference``: an image of one layer, the root filesystem tarball ``rootfs`` unpacked."""
        container = self.run(["from", "--quiet", "scratch"], "buildah from scratch").strip()
        try:
            self.run(["add", "--quiet", container, str(rootfs), "/"], f"unpacking {rootfs.name} into a new image")
            config = ["config", "--cmd", cmd, "--label", f"{DIGEST_LABEL}={digest}"]
            for variable in env:
                config += ["--env", variable]
            self.run([*config, container], f"the configuration of {reference}")
            self.run(["commit", "--quiet", container, reference], f"committing {reference}")
        finally:
            self.run(["rm", container], "removing the working container")

    def build(self, dockerfile: Path, context: Path, reference: str, digest: str, build_args: Mapping[str, str]) -> None:
        """``buildah bud`` of ``dockerfile`` in ``context``, tagged ``reference``, labelled ``digest``."""
        args = ["bud", "--layers", "--isolation", "chroot", "--pull=never", "--label", f"{DIGEST_LABEL}={digest}", "-t", reference]
        if HOST_CA_BUNDLE.is_file():
            args += ["--volume", f"{HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro"]
        for name, value in sorted(build_args.items()):
            args += ["--build-arg", f"{name}={value}"]
        self.run([*args, "-f", str(dockerfile), str(context)], f"building {reference} from {dockerfile}")

    def push(self, reference: str, archive: Path) -> None:
        """``reference`` as a docker-archive tarball (what ``ctr images import`` reads)."""
        self.run(["push", "--quiet", reference, f"docker-archive:{archive}:{reference}"], f"writing {reference} to {archive.name}")

    def load(self, archive: Path) -> None:
        """The image of a docker-archive tarball back into the storage (after the storage was lost)."""
        self.run(["pull", "--quiet", f"docker-archive:{archive}"], f"loading {archive.name}")

    def forget_others(self, repository: str, keep: str) -> None:
        """Images of ``repository`` other than ``keep`` removed, and then every untagged image no
        other image is built over (an older version's chain of layers), repeatedly, since removing
        one may leave its parent so: the storage holds the current version of each image and the
        layer cache of their builds, not one chain per change of their inputs."""
        listed = json.loads(self.run(["images", "--json"], "listing the images") or "[]")
        for image in listed:
            names = image.get("names") or []
            if any(name.rsplit(":", 1)[0] == repository for name in names) and keep not in names:
                self.attempt(["rmi", image["id"]])  # refused while an image is built over it: pruned later
        for _ in range(100):
            if not self.attempt(["rmi", "--prune"]).stdout.strip():
                break

    def exec_in(self, reference: str, argv: Sequence[str], user: str = "") -> subprocess.CompletedProcess[str]:
        """``argv`` run in a container of ``reference`` (as the image's user, or ``user``)."""
        container = self.run(["from", "--quiet", "--pull=never", reference], f"a container of {reference}").strip()
        try:
            run = ["run", "--isolation", "chroot", *(["--user", user] if user else []), container, "--", *argv]
            return subprocess.run(self._argv(run), capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
        finally:
            self.run(["rm", container], "removing the working container")
