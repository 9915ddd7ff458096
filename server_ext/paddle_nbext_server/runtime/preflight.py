"""Paddle preflight: can this interpreter run a job of this mode? Answered before Paddle is imported.

PaddlePaddle's traps fail late and obscurely (docs/paddle-facts.md): parameter-server mode is gone
from the wheels after 3.0.x yet its Python paths remain, so a PS job on 3.1+ dies at run time with
an error that does not say why; protobuf 7 beside Paddle 3.0 makes fleet report a misleading
strategy error; and an interpreter without Paddle fails with a bare ImportError in user code.
The launcher asks `problem()` before it starts the user's command, and a replica that cannot
work ends at once with one sentence naming the installed versions and the fix. The local backend
runs `python preflight.py` with the interpreter its replicas use, to report the Paddle version and
the supported modes in `/config` and to refuse such a job at submit.

Versions come from the installed distributions' metadata (`importlib.metadata`), which costs
milliseconds and never imports Paddle. The check is of the interpreter that runs the launcher;
an entry point that starts another Python is that Python's business.

Standard library only: this file is shipped into job images with the launcher.
"""

from __future__ import annotations

import importlib.metadata
import json
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


def installed(distribution: str) -> str | None:
    """The installed version of `distribution`, or None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def paddle_version() -> tuple[str, str] | None:
    """(distribution, version) of the installed PaddlePaddle wheel, or None."""
    for distribution in PADDLE_DISTRIBUTIONS:
        version = installed(distribution)
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
