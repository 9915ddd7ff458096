"""``controlplane build|up|down|status``: the control plane from a shell.

- ``build``  compile the pinned binaries into the cache (a no-op when they are there) and build
             the real node's images (``images``); prints each component's build time;
- ``images`` build every image the suite runs, alone: pause, the job image and the notebook
             image from our Dockerfiles (deploy/images), the installers image; reused while their
             inputs are unchanged; prints each one's build time;
- ``up``     start a control plane in ``--state-dir`` and leave it running; prints the admin
             kubeconfig's path and the start time (export it as PADDLE_NBEXT_TEST_KUBECONFIG to
             point the suite at this cluster, or use it with kubectl);
             ``up --real-node`` also joins the real node (kubelet, containerd, CoreDNS...);
- ``down``   stop what ``up`` started there (no process left, ports free; the real node's
             processes, mounts, cgroups and network namespace removed);
- ``status`` say whether one is running there.

Exit code 1 with a message naming what failed and its log file when anything goes wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import images, realnode
from .build import build, cache_dir
from .cluster import ControlPlane, port_open
from .errors import ControlPlaneError
from .installer_image import installers_image
from .notebook_image import notebook_image
from .processes import pid_alive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="controlplane", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("build", "images", "up", "down", "status"))
    parser.add_argument("--real-node", action="store_true", help="`up`: join the real node too")
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=cache_dir() / "run",
        help="where `up` keeps certificates, data, logs and kubeconfigs [%(default)s]",
    )
    args = parser.parse_args(argv)
    state_dir: Path = args.state_dir.resolve()
    try:
        if args.command == "build":
            started = time.monotonic()
            binaries = build()
            _build_images(binaries["pause"])
            print(f"controlplane: binaries and images ready in {time.monotonic() - started:.1f} s")
        elif args.command == "images":
            _build_images(build()["pause"], every=True)
        elif args.command == "up":
            if _running(state_dir):
                raise ControlPlaneError(f"a control plane is already running in {state_dir}; `controlplane down` stops it")
            build()
            plane = ControlPlane(state_dir).start()
            print(f"controlplane: up in {plane.startup_seconds:.1f} s at {plane.server}")
            if args.real_node:
                try:
                    node = realnode.RealNode(plane).start()
                except BaseException:
                    plane.stop()
                    raise
                plane.save_node_state(node.state())
                print(f"controlplane: real node {realnode.NODE_NAME} Ready in {node.startup_seconds:.1f} s; logs in {node.logs_dir}")
            print(f"controlplane: admin kubeconfig {plane.admin_kubeconfig}")
            print(f"controlplane: logs in {plane.logs_dir()}")
        elif args.command == "down":
            stopped = ControlPlane.stop_from_state(state_dir)
            print(f"controlplane: stopped {', '.join(stopped)}" if stopped else "controlplane: nothing was running")
        else:
            print(f"controlplane: running in {state_dir}" if _running(state_dir) else "controlplane: not running")
    except ControlPlaneError as error:
        print(f"controlplane: {error}", file=sys.stderr)
        return 1
    return 0


def _build_images(pause: Path, every: bool = False) -> None:
    """The node's images (pause, the job image); with ``every`` also the notebook image (from a
    wheel of this clone) and the installers image, which the tests otherwise build when first used."""
    started = time.monotonic()
    missing = realnode.missing_tools()
    if missing:
        raise ControlPlaneError(f"the real node's images and node need {', '.join(missing)}: `bash scripts/setup.sh` installs them")
    built = images.build_images(pause)
    if every:
        from support.hub_site import clone_wheel, hub_version  # the hub tests' own wheel of the clone

        wheels = cache_dir() / "hub"
        wheels.mkdir(parents=True, exist_ok=True)
        built += [notebook_image(clone_wheel(wheels), hub_version()), installers_image()]
    for image in built:
        print(f"controlplane: image {image.reference} ready ({image.archive})", file=sys.stderr)
    print(f"controlplane: images ready in {time.monotonic() - started:.1f} s", file=sys.stderr)


def _running(state_dir: Path) -> bool:
    path = state_dir / "state.json"
    if not path.is_file():
        return False
    state = json.loads(path.read_text())
    return any(pid_alive(pid) for pid in state["pids"].values() if pid) or any(port_open(port) for port in state["ports"].values())


if __name__ == "__main__":
    sys.exit(main())
