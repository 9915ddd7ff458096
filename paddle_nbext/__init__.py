"""paddle-nbext, kernel side: run distributed PaddlePaddle jobs from a notebook.

    %load_ext paddle_nbext          # %%paddle_submit, %paddle_jobs, %paddle_logs, ...
    import paddle_nbext as pn
    job = pn.submit("python train.py", trainers=2, trainer_cpu="2")
    pn.form(); pn.job_list()

Imports are lazy (PEP 562 `__getattr__`): `import paddle_nbext` loads neither requests, ipywidgets
nor IPython's magic machinery, and never the server side, so it stays cheap in every kernel.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.3.0"

_LAZY = {
    # Python API
    "submit": "api",
    "jobs": "api",
    "Job": "api",
    "JobList": "api",
    "PaddleJob": "api",
    "dist_train": "api",
    "connect": "api",
    "get_client": "api",
    "environments": "api",
    "prune_environments": "api",
    "remove_environment": "api",
    "notifications": "api",
    "set_notifications": "api",
    "compare": "comparison",
    # client and errors
    "Client": "client",
    "PaddleNbextError": "client",
    "ApiError": "client",
    "ExtensionMissing": "client",
    "ServerUnreachable": "client",
    "ServerNotFound": "client",
    # job model
    "JobSpec": "model.spec",
    "SpecError": "model.spec",
    "Limits": "model.spec",
    # widgets (ipywidgets is imported only when one of these is used)
    "form": "widgets",
    "job_list": "widgets",
}

__all__ = ["__version__", "load_ipython_extension", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'paddle_nbext' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext paddle_nbext`: register the magics (nothing else is imported yet)."""
    from .magics import load_ipython_extension as load

    load(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt sidebar panel."""
    return [{"src": "labextension", "dest": "paddle-nbext-labextension"}]
