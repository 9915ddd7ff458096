"""`paddle.Model.fit` and `evaluate` report their progress by themselves: step, total steps,
epoch, loss and every metric while training, and the evaluation's loss and metrics
(`eval_<name>`) at the training step it ran after, with no `report()` in the code.

How: every replica's Python imports the bundle's `pylib/sitecustomize.py`
(`paddle_nbext_sitecustomize`), which asks to be told when `paddle.hapi.model` is first
imported; then `attach` wraps that module's `config_callbacks`, the one place `fit`, `evaluate`
and `predict` build their callback list, to add a `ProgressCallback` after the user's callbacks
(theirs run first and unchanged; nothing is added outside a job).

Nothing is reported twice: the points go through `paddle_nbext_report.report_automatic`, which
writes nothing once the code has called `report()` itself (that call owns the curve from then
on), and a job that names its own `progress_pattern` is read from its printed lines instead
(the hook is not attached).

Standard library only at import; Paddle's classes are used only once Paddle itself loaded them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

if __package__:  # the installed package (tests import it from there)
    from . import paddle_nbext_report as report_module
else:  # a job's pylib/
    import paddle_nbext_report as report_module  # type: ignore[import-not-found,no-redef]

__all__ = ["ProgressCallback", "attach"]

#: Set on the wrapped `config_callbacks`, so attaching twice wraps once.
_MARK = "__paddle_nbext_progress__"
#: The last training step and total any `fit` of this process reached: a later `evaluate`
#: reports there (its own step count starts at 0, which would read as the job going back).
_trained: list[int | None] = [0, None]


def _number(value: object) -> float | None:
    """A logged value as a float: hapi logs the loss as a one-item list, metrics as floats."""
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            return None
        value = value[0]
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, RuntimeError):
        return None
    return number if number - number == 0.0 else None


def _values(logs: Mapping[str, Any] | None, names: list[str], prefix: str = "") -> dict[str, float]:
    values: dict[str, float] = {}
    for name in names:
        if logs is not None and name in logs and (number := _number(logs[name])) is not None:
            values[prefix + str(name)] = number
    return values


class ProgressCallback:
    """Reports `fit`'s batches and evaluations (a duck-typed hapi callback: `CallbackList` calls
    each method by name).  One instance per `fit`/`evaluate` call; the step is counted across
    epochs, so a curve runs on from epoch to epoch and the ETA is the whole fit's."""

    def __init__(self, report: Callable[[int, int | None, Mapping[str, object]], bool] = report_module.report_automatic) -> None:
        self.report = report
        self.model: Any = None
        self.params: dict[str, Any] = {}
        self.step = 0  # training batches done in this fit
        self.total: int | None = None
        self.epoch: int | None = None
        self.off = False  # the code reports itself

    # -------------------------------------------------------- what CallbackList calls
    def set_model(self, model: Any) -> None:
        self.model = model

    def set_params(self, params: Mapping[str, Any]) -> None:
        self.params = dict(params)

    def _send(self, values: Mapping[str, object]) -> None:
        if not self.off and not self.report(self.step, self.total, values):
            self.off = True

    def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        steps, epochs = self.params.get("steps"), self.params.get("epochs")
        self.total = steps * epochs if isinstance(steps, int) and isinstance(epochs, int) and steps > 0 else None

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        self.epoch = epoch + 1

    def on_train_batch_end(self, step: int, logs: Mapping[str, Any] | None = None) -> None:
        self.step += 1
        _trained[:] = [self.step, self.total]
        if self.off:
            return
        values = _values(logs, list(self.params.get("metrics") or []))
        if self.epoch is not None:
            values["epoch"] = float(self.epoch)
        self._send(values)

    def on_eval_end(self, logs: Mapping[str, Any] | None = None) -> None:
        names = [name for name in (logs or {}) if name not in ("step", "batch_size")]
        values = _values(logs, names, "eval_")
        if values:
            if not self.step:  # `evaluate` on its own: at the step training reached, if any
                self.step, self.total = _trained[0] or 0, _trained[1]
            self._send(values)

    def __getattr__(self, name: str) -> Callable[..., None]:
        """Every other hook (`on_train_batch_begin`, `on_predict_end`, ...) does nothing."""
        if name.startswith("on_"):
            return _nothing
        raise AttributeError(name)


def _nothing(*_args: object, **_kwargs: object) -> None:
    return None


def _params(callbacks: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What hapi gave its own callbacks (`epochs`, `steps`, `metrics`), else the call's words."""
    for callback in getattr(callbacks, "callbacks", []):
        params = getattr(callback, "params", None)
        if isinstance(params, dict) and params:
            return params
    return {name: kwargs.get(name) for name in ("epochs", "steps", "metrics")}


def attach(module: Any) -> None:
    """Wrap `module.config_callbacks` (`paddle.hapi.model`'s) to add a `ProgressCallback`; a
    Paddle without that function is left alone (said once)."""
    original = getattr(module, "config_callbacks", None)
    if original is None or getattr(original, _MARK, False):
        if original is None:
            print(
                "paddle-nbext: this Paddle's Model has no config_callbacks; Model.fit's progress is not reported by itself", file=sys.stderr
            )
        return

    def config_callbacks(*args: Any, **kwargs: Any) -> Any:
        callbacks = original(*args, **kwargs)
        try:
            ours = ProgressCallback()
            ours.set_model(kwargs.get("model"))
            ours.set_params(_params(callbacks, kwargs))
            callbacks.append(ours)
        except Exception:  # the user's training matters more than its curve
            pass
        return callbacks

    setattr(config_callbacks, _MARK, True)
    config_callbacks.__wrapped__ = original  # type: ignore[attr-defined]
    module.config_callbacks = config_callbacks
