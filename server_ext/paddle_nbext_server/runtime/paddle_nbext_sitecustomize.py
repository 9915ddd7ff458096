"""Shipped as the bundle's `pylib/sitecustomize.py`: Python imports it at start-up in every
process of a replica (the launcher puts `pylib/` first on `PYTHONPATH`), on both backends and in
any image, so `paddle.Model.fit` reports its progress without a line of the user's code
(`paddle_nbext_hapi`).

It costs next to nothing where Paddle is not used: it only puts a finder on `sys.meta_path`
that answers for one module name, `paddle.hapi.model`; when Paddle imports that module, the
finder lets the normal import run and then attaches the hook.  Nothing happens outside a job
(no metrics file named), for a job that names its own `progress_pattern` (its printed lines are
read instead), or with `PADDLE_NBEXT_HAPI_HOOK=0`.

An image's own `sitecustomize` (Debian's Python has one) still runs: this one finds the next
`sitecustomize` on the path after its own directory and runs it, so nothing of the image's
start-up is lost.

Standard library only; never raises (a start-up hook must not stop a training from starting).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

#: The module whose loading attaches the hook.
TARGET = "paddle.hapi.model"
#: "0" turns the hook off (the launcher's environment, for benchmarks and debugging).
HOOK_VAR = "PADDLE_NBEXT_HAPI_HOOK"
_METRICS_FILE_VAR = "PADDLE_NBEXT_METRICS_FILE"  # paddle_nbext_report.FILE_VAR
_PATTERN_VAR = "PADDLE_NBEXT_PROGRESS_PATTERN"  # log_progress.PATTERN_VAR


class _AttachAfterLoad(importlib.abc.Loader):
    """Runs the real loader, then attaches the hook to the module it made."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        try:
            import paddle_nbext_hapi  # type: ignore[import-not-found,unused-ignore]

            paddle_nbext_hapi.attach(module)
        except Exception as error:
            print(f"paddle-nbext: Model.fit's progress is not reported by itself ({error})", file=sys.stderr)


class HapiFinder(importlib.abc.MetaPathFinder):
    """Answers for `TARGET` only: the spec the other finders give, with its loader wrapped."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        sys.meta_path.remove(self)  # once: later imports of it are plain
        try:
            spec = importlib.util.find_spec(fullname)
        except (ImportError, ValueError):
            return None
        if spec is None or spec.loader is None:
            return None
        spec.loader = _AttachAfterLoad(spec.loader)
        return spec


def wanted(env: os._Environ[str] | dict[str, str]) -> bool:
    """In a job (a metrics file named), not turned off, and no pattern of the job's own."""
    return bool(env.get(_METRICS_FILE_VAR, "").strip()) and env.get(HOOK_VAR, "1") != "0" and not env.get(_PATTERN_VAR, "").strip()


def _run_the_next_sitecustomize() -> None:
    """The image's own `sitecustomize`, the first on the path after this file's directory."""
    here = os.path.dirname(os.path.abspath(__file__))
    later = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", later)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def install() -> None:
    try:
        if wanted(os.environ) and not any(isinstance(finder, HapiFinder) for finder in sys.meta_path):
            sys.meta_path.insert(0, HapiFinder())
    except Exception:
        pass
    if __name__ == "sitecustomize":
        try:
            _run_the_next_sitecustomize()
        except Exception as error:
            print(f"paddle-nbext: the image's sitecustomize failed: {error}", file=sys.stderr)


install()
