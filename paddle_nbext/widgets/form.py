"""`form()`: the resources form, built from the job field table and the server's `GET /config`.

Rows, labels, hints, order and sections ("Code", "Replicas", ...) come from the table
(`paddle_nbext.model.spec.JOB_FIELDS`); a row that means nothing in the chosen mode (pserver
resources in collective mode) or on this server's backend (the image on the local backend) is
hidden.  Every field is validated on each change with the shared job model (`JobSpec.check` with
the server's limits and defaults), so the message under a field is the one the server would
return.  Submit stays disabled while anything is invalid; after a successful submit the form
turns into the live status view of the new job.

On a backend that checks quota (`backend.quota_check` in `GET /config`: Kubernetes), "Check
resources" asks the server for a dry run and shows its quota sentence ("This job needs 8 CPU,
32Gi, 4 GPUs; free now: ... — it will wait"): orange when the job will wait, red with Submit
disabled when it can never run (the server would refuse it).  It is a button, not a check on
every keystroke: each check reads the namespace's quota objects through the API.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from .. import api
from ..client import ApiError, Client, PaddleNbextError
from ..model.contract import Mode
from ..model.fields import GROUPS, JobField
from ..model.quota import QuotaCheck, Verdict
from ..model.spec import JOB_FIELDS, JobSpec, Limits
from ..model.status import SubmitPlan
from ._code_checks import code_problems, default_entry, package_dir
from ._theme import ERROR_COLOUR, MUTED_COLOUR, WARN_COLOUR, error_html, stylesheet, themed
from .status import JobStatusView

_STYLE = {"description_width": "150px"}
#: The quota sentence's colour per verdict: waits is a warning, never an error.
_VERDICT_COLOURS = {Verdict.WAITS: WARN_COLOUR, Verdict.NEVER: ERROR_COLOUR, Verdict.UNKNOWN: MUTED_COLOUR}
_LAYOUT = {"width": "450px"}
_SHOWN, _HIDDEN = "flex", "none"


class JobForm(widgets.VBox):
    """The form.  `inputs[field]` are the input widgets, `errors[field]` the messages under them,
    `rows[field]` the box holding both (hidden when the field does not apply), `totals` the
    resources line, `submit_button` the button (disabled while invalid); `quota` the quota
    sentence of the last "Check resources" (`check_button`), cleared by any edit."""

    def __init__(self, client: Client | None = None, *, interval: float = 2.0, config: dict[str, Any] | None = None, **kwargs: Any):
        self.client = api.get_client(client)
        self.config = config if config is not None else self.client.config()
        self.interval = interval
        self.defaults: dict[str, Any] = dict(self.config.get("defaults") or {})
        #: The home the server resolves packages in (the kernel's own, as on JupyterHub).
        self.home = Path.home()
        self.limits = Limits.from_dict(self.config.get("limits") or {})
        backend = self.config.get("backend") or {}
        self.backend_name: str | None = backend.get("name")
        self.job: api.Job | None = None
        self.status_view: JobStatusView | None = None
        self.inputs: dict[str, widgets.Widget] = {}
        self.errors: dict[str, widgets.HTML] = {}
        self.rows: dict[str, widgets.VBox] = {}
        self._messages: dict[str, str] = {}
        self.quota_check: QuotaCheck | None = None
        sections: list[widgets.Widget] = []
        for group in GROUPS:
            members = [row for row in JOB_FIELDS if row.info.group == group]
            if not members:
                continue
            sections.append(widgets.HTML(value=f"<b>{html.escape(group)}</b>"))
            for row in members:
                sections.append(self._row(row))
        self.header = widgets.HTML(
            value=f"<b>New Paddle job</b> · backend <code>{html.escape(str(backend.get('name', '?')))}</code>"
            + ("" if backend.get("ok", True) else " " + error_html(html.escape(str(backend.get("error") or "unavailable"))))
            + _paddle_note(backend.get("paddle"))
        )
        self.totals = widgets.HTML(value="")
        self.totals.add_class("paddle-totals")
        self.form_error = widgets.HTML(value="")
        self.submit_button = widgets.Button(description="Submit", button_style="primary", icon="play")
        self.submit_button.on_click(lambda _button: self.submit())
        self.quota = widgets.HTML(value="")
        self.quota.add_class("paddle-quota")
        self.check_button = widgets.Button(
            description="Check resources", icon="search", tooltip="What the cluster's quota has free for this job (a dry run)"
        )
        self.check_button.on_click(lambda _button: self.check_resources())
        self.check_button.layout.display = _SHOWN if backend.get("quota_check") else _HIDDEN
        actions = widgets.HBox(children=(self.submit_button, self.check_button))
        super().__init__(children=(stylesheet(), self.header, *sections, self.totals, self.quota, self.form_error, actions), **kwargs)
        self.add_class("paddle-job-form")
        themed(self)
        self._show_rows()
        self.validate()

    # ---- building
    def _cwd_package(self) -> str:
        """The kernel's folder as the package, unless it is the home: the whole home is never
        offered (a notebook opened at the root would copy all of it into every job)."""
        cwd = Path.cwd()
        return "" if cwd.resolve() == self.home.resolve() else str(cwd)

    def _default(self, row: JobField) -> Any:
        name = row.name
        if name == "trainer_package":  # the kernel's cwd unless the server pins a package dir
            return self.defaults.get(name) or self._cwd_package()
        if name in self.defaults and self.defaults[name] is not None:
            return self.defaults[name]
        if row.kind == "command":  # a command that can start, or none (see _code_checks)
            package = self.defaults.get("trainer_package") or self._cwd_package()
            return default_entry(package_dir(str(package), self.home)) if package else ""
        if row.kind == "image":
            return self.config.get("default_image") or ""
        return row.default

    def _row(self, row: JobField) -> widgets.VBox:
        control = self._control(row)
        error = widgets.HTML(value="", layout={"margin": "0 0 0 155px"})
        error.add_class("paddle-field-error")
        control.observe(self._changed, names="value")
        self.inputs[row.name] = control
        self.errors[row.name] = error
        self.rows[row.name] = widgets.VBox(children=(control, error))
        return self.rows[row.name]

    def _control(self, row: JobField) -> widgets.Widget:
        info = row.info
        common = {"description": info.label, "description_allow_html": False, "tooltip": info.help, "style": _STYLE, "layout": _LAYOUT}
        value = self._default(row)
        if row.kind == "choice":
            options = list(info.choices)
            return widgets.Dropdown(options=options, value=value if value in options else options[0], **common)
        if row.kind == "image":
            images = [str(i) for i in (self.config.get("images") or [])]
            if images:
                return widgets.Dropdown(options=images, value=value if value in images else images[0], **common)
            return widgets.Text(value=str(value or ""), placeholder=info.placeholder, **common)
        if row.kind == "count":
            return widgets.IntText(value=int(value or 0), **common)
        if row.kind == "switch":
            return widgets.Checkbox(value=bool(value), indent=True, **common)
        if row.kind == "env":
            env = value if isinstance(value, dict) else {}
            return widgets.Textarea(value="\n".join(f"{k}={v}" for k, v in env.items()), placeholder=info.placeholder, **common)
        return widgets.Text(value="" if value is None else str(value), placeholder=info.placeholder, **common)

    def _show_rows(self) -> None:
        """Hide the rows that do not apply to the chosen mode or to this server's backend."""
        mode = str(self.inputs["mode"].value)
        for row in JOB_FIELDS:
            shown = row.applies_to(mode) and row.used_by(self.backend_name)
            self.rows[row.name].layout.display = _SHOWN if shown else _HIDDEN

    # ---- validation
    def data(self) -> dict[str, Any]:
        """The spec as typed: empty text means "server default"; rows hidden for the mode are left
        out (their replica counts are sent as 0), rows this backend does not use too."""
        data: dict[str, Any] = {}
        mode = str(self.inputs["mode"].value)
        for row in JOB_FIELDS:
            value = self.inputs[row.name].value
            if not row.used_by(self.backend_name) or (row.kind != "count" and not row.applies_to(mode)):
                continue
            if row.kind == "env":
                data[row.name] = [line.strip() for line in str(value).splitlines() if line.strip()]
                continue
            if isinstance(value, str):
                value = value.strip()
                if value == "":
                    continue
            data[row.name] = value
        return data

    def _changed(self, change: dict[str, Any]) -> None:
        if change.get("owner") is self.inputs.get("mode"):
            mode = str(change["new"])
            for row in JOB_FIELDS:  # a replica count of a role the mode lacks is 0, else at least 1
                if row.kind == "count" and set(row.info.modes) != set(Mode):
                    control = self.inputs[row.name]
                    control.value = (control.value or max(1, int(row.default or 0))) if row.applies_to(mode) else 0
            self._show_rows()
        self.validate()

    def validate(self) -> dict[str, str]:
        """Show every field's message (or clear it), update totals and the Submit button."""
        data = self.data()
        errors = JobSpec.check(data, defaults={k: v for k, v in self.defaults.items() if k in JobSpec.FIELDS}, limits=self.limits)
        # The server's own message first; an empty package is fine when the server pins one.
        errors = {**code_problems(data, self.home, empty_is_home=not self.defaults.get("trainer_package")), **errors}
        for name in self.errors:
            self._show(name, errors.get(name, ""))
        if errors:
            self.totals.value = "<i>fix the fields above to see the totals</i>"
        else:
            spec = JobSpec.from_dict(data, defaults={k: v for k, v in self.defaults.items() if k in JobSpec.FIELDS}, limits=self.limits)
            self.totals.value = f"<b>Total:</b> {html.escape(spec.summary())}"
        self.form_error.value = ""
        self.quota.value = ""  # said of other values
        self.quota_check = None
        self.submit_button.disabled = bool(errors)
        self.check_button.disabled = bool(errors)
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
        self.errors[name].value = error_html(html.escape(message)) if message else ""

    # ---- quota before submit
    def check_resources(self) -> QuotaCheck | None:
        """Ask the server's dry run what the quota says about the job as typed; show its sentence."""
        if self.validate():
            return None
        try:
            plan: SubmitPlan = api.submit(client=self.client, dry_run=True, **self._payload())
        except ApiError as error:
            if error.field in self.errors:
                self._show(error.field, error.message)
            else:
                self.form_error.value = error_html(html.escape(str(error)))
            return None
        except PaddleNbextError as error:
            self.form_error.value = error_html(html.escape(str(error)))
            return None
        self.quota_check = plan.quota
        if plan.quota is None:
            self.quota.value = "<i>this backend does not check quota</i>"
            return None
        colour = _VERDICT_COLOURS.get(plan.quota.verdict, "inherit")
        self.quota.value = f"<span style='color:{colour}'>{html.escape(plan.quota.words)}</span>"
        self.submit_button.disabled = plan.quota.verdict == Verdict.NEVER
        return plan.quota

    # ---- submitting
    def _payload(self) -> dict[str, Any]:
        """The spec to send: `data()` with the env lines as a mapping."""
        data = self.data()
        env = {}
        for line in data.pop("env", []):
            key, _, value = line.partition("=")
            env[key.strip()] = value
        if env:
            data["env"] = env
        return data

    def submit(self) -> api.Job | None:
        if self.validate():
            return None
        data = self._payload()
        self.submit_button.disabled = True
        try:
            job: api.Job = api.submit(client=self.client, dry_run=False, **data)
        except ApiError as error:
            if error.field in self.errors:
                self._show(error.field, error.message)
            else:
                self.form_error.value = error_html(html.escape(str(error)))
            self.submit_button.disabled = False
            return None
        except PaddleNbextError as error:
            self.form_error.value = error_html(html.escape(str(error)))
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


def _paddle_note(paddle: object) -> str:
    """What the server's Paddle can run (local backend), in its own sentence; red when a mode is out."""
    if not isinstance(paddle, dict) or not paddle.get("summary"):
        return ""
    limited = paddle.get("error") or "ps" not in (paddle.get("modes") or ())
    colour = ERROR_COLOUR if limited else "inherit"
    return f"<br><span class='paddle-env' style='color:{colour}'>{html.escape(str(paddle['summary']))}</span>"
