"""`form()`: the resources form, built from the server's `GET /config`.

Every field is validated on each change with the shared job model (`JobSpec.check` with the
server's limits and defaults), so the message under a field is the one the server would return.
Submit stays disabled while anything is invalid; after a successful submit the form turns into
the live status view of the new job.
"""
from __future__ import annotations

import html
import os
from typing import Any

import ipywidgets as widgets

from .. import api
from ..client import ApiError, Client, PaddleNbextError
from ..spec import JobSpec, Limits
from .status import JobStatusView

_TEXT_FIELDS = ("job_name", "entry_point", "trainer_package", "pserver_cpu", "pserver_mem", "trainer_cpu", "trainer_mem", "timeout")
_INT_FIELDS = ("pservers", "trainers", "trainer_gpu", "max_restarts")
_LABELS = {
    "job_name": "Job name",
    "entry_point": "Entry point",
    "trainer_package": "Package dir",
    "image": "Image",
    "mode": "Mode",
    "pservers": "Pservers",
    "trainers": "Trainers",
    "pserver_cpu": "Pserver CPU",
    "pserver_mem": "Pserver memory",
    "trainer_cpu": "Trainer CPU",
    "trainer_mem": "Trainer memory",
    "trainer_gpu": "Trainer GPUs",
    "env": "Environment",
    "max_restarts": "Max restarts",
    "timeout": "Timeout",
}
_ORDER = ("job_name", "entry_point", "trainer_package", "image", "mode", "pservers", "pserver_cpu", "pserver_mem",
          "trainers", "trainer_cpu", "trainer_mem", "trainer_gpu", "env", "max_restarts", "timeout")  # fmt: skip
_STYLE = {"description_width": "120px"}
_LAYOUT = {"width": "420px"}


class JobForm(widgets.VBox):
    """The form.  `inputs[field]` are the input widgets, `errors[field]` the messages under them,
    `totals` the resources line, `submit_button` the button (disabled while invalid)."""

    def __init__(self, client: Client | None = None, *, interval: float = 2.0, config: dict[str, Any] | None = None, **kwargs: Any):
        self.client = api.get_client(client)
        self.config = config if config is not None else self.client.config()
        self.interval = interval
        self.defaults: dict[str, Any] = dict(self.config.get("defaults") or {})
        self.limits = Limits.from_dict(self.config.get("limits") or {})
        self.job: api.Job | None = None
        self.status_view: JobStatusView | None = None
        self.inputs: dict[str, widgets.Widget] = {}
        self.errors: dict[str, widgets.HTML] = {}
        self._messages: dict[str, str] = {}
        rows = []
        for name in _ORDER:
            control = self._control(name)
            self.inputs[name] = control
            self.errors[name] = widgets.HTML(value="", layout={"margin": "0 0 0 125px"})
            self.errors[name].add_class("paddle-field-error")
            control.observe(self._changed, names="value")
            rows.extend((control, self.errors[name]))
        backend = self.config.get("backend") or {}
        self.header = widgets.HTML(
            value=f"<b>New Paddle job</b> · backend <code>{html.escape(str(backend.get('name', '?')))}</code>"
            + ("" if backend.get("ok", True) else f" <span style='color:#c53030'>{html.escape(str(backend.get('error') or 'unavailable'))}</span>")
        )
        self.totals = widgets.HTML(value="")
        self.totals.add_class("paddle-totals")
        self.form_error = widgets.HTML(value="")
        self.submit_button = widgets.Button(description="Submit", button_style="primary", icon="play")
        self.submit_button.on_click(lambda _button: self.submit())
        super().__init__(children=(self.header, *rows, self.totals, self.form_error, self.submit_button), **kwargs)
        self.add_class("paddle-job-form")
        self.validate()

    # ---- building
    def _default(self, name: str) -> Any:
        if name == "trainer_package":  # the kernel's cwd unless the server pins a package dir
            return self.defaults.get(name) or os.getcwd()
        if name in self.defaults and self.defaults[name] is not None:
            return self.defaults[name]
        if name == "entry_point":
            return "python train.py"
        if name == "image":
            return self.config.get("default_image") or ""
        default = JobSpec.__dataclass_fields__[name].default if name in JobSpec.__dataclass_fields__ else None
        return default if isinstance(default, (str, int)) else ""

    def _control(self, name: str) -> widgets.Widget:
        common = {"description": _LABELS[name], "style": _STYLE, "layout": _LAYOUT}
        value = self._default(name)
        if name == "mode":
            return widgets.Dropdown(options=["ps", "collective"], value=value or "ps", **common)
        if name == "image":
            images = [str(i) for i in (self.config.get("images") or [])]
            if images:
                return widgets.Dropdown(options=images, value=value if value in images else images[0], **common)
            return widgets.Text(value=str(value or ""), placeholder="server default", **common)
        if name in _INT_FIELDS:
            return widgets.IntText(value=int(value or 0), **common)
        if name == "env":
            env = value if isinstance(value, dict) else {}
            return widgets.Textarea(value="\n".join(f"{k}={v}" for k, v in env.items()), placeholder="NAME=value, one per line", **common)
        placeholder = {"job_name": "generated when empty", "timeout": "none (e.g. 30m, 2h)"}.get(name, "")
        return widgets.Text(value="" if value is None else str(value), placeholder=placeholder, **common)

    # ---- validation
    def data(self) -> dict[str, Any]:
        """The spec as typed: empty text means "server default"."""
        data: dict[str, Any] = {}
        for name, control in self.inputs.items():
            value = control.value
            if name == "env":
                lines = [line.strip() for line in str(value).splitlines() if line.strip()]
                data["env"] = lines
                continue
            if isinstance(value, str):
                value = value.strip()
                if value == "":
                    continue
            data[name] = value
        return data

    def _changed(self, change: dict[str, Any]) -> None:
        if change.get("owner") is self.inputs.get("mode"):
            self.inputs["pservers"].value = 0 if change["new"] == "collective" else max(1, int(self.inputs["pservers"].value or 0))
        self.validate()

    def validate(self) -> dict[str, str]:
        """Show every field's message (or clear it), update totals and the Submit button."""
        data = self.data()
        errors = JobSpec.check(data, defaults={k: v for k, v in self.defaults.items() if k in JobSpec.FIELDS}, limits=self.limits)
        for name in self.errors:
            self._show(name, errors.get(name, ""))
        if errors:
            self.totals.value = "<i>fix the fields above to see the totals</i>"
        else:
            spec = JobSpec.from_dict(data, defaults={k: v for k, v in self.defaults.items() if k in JobSpec.FIELDS}, limits=self.limits)
            self.totals.value = f"<b>Total:</b> {html.escape(spec.summary())}"
        self.form_error.value = ""
        self.submit_button.disabled = bool(errors)
        return errors

    @property
    def messages(self) -> dict[str, str]:
        """Plain-text message per field that currently shows one."""
        return dict(self._messages)

    def _show(self, name: str, message: str) -> None:
        if message:
            self._messages[name] = message
        else:
            self._messages.pop(name, None)
        self.errors[name].value = f"<span style='color:#c53030'>{html.escape(message)}</span>" if message else ""

    # ---- submitting
    def submit(self) -> api.Job | None:
        if self.validate():
            return None
        data = self.data()
        env = {}
        for line in data.pop("env", []):
            key, _, value = line.partition("=")
            env[key.strip()] = value
        if env:
            data["env"] = env
        self.submit_button.disabled = True
        try:
            job = api.submit(client=self.client, **data)
        except ApiError as error:
            if error.field in self.errors:
                self._show(error.field, error.message)
            else:
                self.form_error.value = f"<span style='color:#c53030'>{html.escape(str(error))}</span>"
            self.submit_button.disabled = False
            return None
        except PaddleNbextError as error:
            self.form_error.value = f"<span style='color:#c53030'>{html.escape(str(error))}</span>"
            self.submit_button.disabled = False
            return None
        self.job = job
        self.status_view = JobStatusView(job, interval=self.interval)
        self.children = (self.status_view,)
        return job

    def close(self) -> None:
        if self.status_view is not None:
            self.status_view.close()
        super().close()
