"""Paddle preflight: can this interpreter run a job of this mode? Answered before Paddle is imported.

PaddlePaddle's traps fail late and obscurely (docs/paddle-facts.md): parameter-server mode is gone
from the wheels after 3.0.x yet its Python paths remain, so a PS job on 3.1+ dies at run time with
an error that does not say why; protobuf 7 beside Paddle 3.0 makes fleet report a misleading
strategy error; and an interpreter without Paddle fails with a bare ImportError in user code.
The launcher asks `problem()` before it starts the user's command, and a replica that cannot
work ends at once with one sentence naming the installed versions and the fix. The local backend
runs `python preflight.py` with the interpreter its replicas use, to report the Paddle version and
the supported modes in `/config` and to refuse such a job at submit.

Versions come from the installed distributions' metadata and never import Paddle: the `Version`
of the first `<name>-<version>.dist-info` directory of the distribution on `sys.path` (one listing
per path entry and a few lines of its METADATA, what `importlib.metadata` answers), falling back
to `importlib.metadata` itself when a path entry holds two of them or none is found.  Every
replica's launcher asks before its entry point starts, and importing `importlib.metadata` alone
took longer than the whole check (~40 ms of each replica's start on a busy 2-core machine). The check is of the interpreter that runs the launcher;
an entry point that starts another Python is that Python's business.

Standard library only: this file is shipped into job images with the launcher.
"""

from __future__ import annotations

import json
import os
import re
import sys

if __package__:  # imported from the installed package (the server, the local backend)
    from paddle_nbext.model import contract
else:  # a plain script: in a job's bundle, the contract shipped beside it (even where the image
    # has some other paddle-nbext installed); run from a source tree, the installed one
    try:
        import contract  # type: ignore[import-not-found,no-redef]
    except ImportError:
        from paddle_nbext.model import contract

Mode = contract.Mode

#: The distributions that provide `import paddle` (CPU and GPU wheels).
PADDLE_DISTRIBUTIONS = ("paddlepaddle", "paddlepaddle-gpu")
#: The last release line whose wheels carry the parameter-server runtime.
LAST_PS_LINE = (3, 0)
#: protobuf from this major on breaks Paddle 3.0's DistributedStrategy.
PROTOBUF_BREAKS_PADDLE_3_0 = 7
INSTALL_HINT = 'pip install "paddlepaddle==3.0.0" "protobuf<7"'


#: A metadata directory's name: the (escaped) distribution name, its version, an egg's Python tag.
_METADATA_DIR = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*?)-(?P<version>[^-]+?)(?:-py\d[\d.]*)?\.(?:dist|egg)-info$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _metadata_version(directory: str) -> str | None:
    """The `Version:` header of a dist-info's METADATA (an egg-info's PKG-INFO), None when unreadable."""
    for file in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(directory, file), encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if not line.strip():
                        break  # the headers end at the first empty line
                    key, _, value = line.partition(":")
                    if key.strip().lower() == "version":
                        return value.strip()
        except OSError:
            continue
    return None


def _listed_version(distribution: str) -> str | None:
    """`distribution`'s version from the first `sys.path` entry holding its metadata directory;
    None when none holds one, or the first holds two (then `importlib.metadata` decides)."""
    wanted = _canonical(distribution)
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        found = [name for name in names if (match := _METADATA_DIR.match(name)) and _canonical(match["name"]) == wanted]
        if len(found) == 1:
            return _metadata_version(os.path.join(entry or ".", found[0]))
        if found:
            return None
    return None


def _looked_up_version(distribution: str) -> str | None:
    """`importlib.metadata`'s answer (zipped or egg entries, other finders): imported only here,
    as importing it costs more than the listing."""
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed(distribution: str) -> str | None:
    """The installed version of `distribution`, or None when it is not installed."""
    return _listed_version(distribution) or _looked_up_version(distribution)


def paddle_version() -> tuple[str, str] | None:
    """(distribution, version) of the installed PaddlePaddle wheel, or None."""
    for distribution in PADDLE_DISTRIBUTIONS:  # the listing first: a GPU wheel needs no fallback
        version = _listed_version(distribution)
        if version is not None:
            return distribution, version
    for distribution in PADDLE_DISTRIBUTIONS:
        version = _looked_up_version(distribution)
        if version is not None:
            return distribution, version
    return None


def release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string: `3.0.0` -> (3, 0, 0), `3.1.1.post2` -> (3, 1, 1)."""
    match = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def supported_modes(version: str) -> tuple[str, ...]:
    """The modes a Paddle `version` can run: collective always, ps only up to the 3.0 line."""
    if release(version)[:2] <= LAST_PS_LINE:
        return (Mode.PS.value, Mode.COLLECTIVE.value)
    return (Mode.COLLECTIVE.value,)


def problem(mode: str) -> str | None:
    """One sentence saying why a `mode` job cannot run in this interpreter, or None if it can."""
    found = paddle_version()
    if found is None:
        return (
            f"PaddlePaddle is not installed for {sys.executable}: install it there "
            f"({INSTALL_HINT}), or choose an image or interpreter that has it."
        )
    distribution, version = found
    if mode == Mode.PS and Mode.PS.value not in supported_modes(version):
        return (
            f"parameter-server mode needs PaddlePaddle 3.0.x, but {distribution} {version} is installed "
            f"(PaddlePaddle removed parameter-server mode in 3.1): submit with mode=collective, "
            f"or run on {INSTALL_HINT}."
        )
    protobuf = installed("protobuf")
    if release(version)[:2] == (3, 0) and protobuf and release(protobuf)[:1] >= (PROTOBUF_BREAKS_PADDLE_3_0,):
        return f'{distribution} {version} does not work with protobuf {protobuf} (it needs protobuf<7): install "protobuf<7" beside it.'
    return None


def facts() -> dict[str, object]:
    """What `/config` reports about this interpreter's Paddle (the JSON `main()` prints)."""
    found = paddle_version()
    return {
        "python": sys.executable,
        "paddle": found[1] if found else None,
        "distribution": found[0] if found else None,
        "protobuf": installed("protobuf"),
        "modes": [mode for mode in (Mode.PS.value, Mode.COLLECTIVE.value) if problem(mode) is None],
        "problems": {mode.value: problem(mode.value) for mode in Mode if problem(mode.value)},
    }


def main() -> int:
    print(json.dumps(facts()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
