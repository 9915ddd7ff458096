"""The question `job_list()` asks before a delete: a delete removes the job's record, logs,
package snapshot and checkpoints for good, so one click must not do it (the panel asks too, in
the same words).  The question says how much the delete frees and, when the job has
checkpoints, offers to keep them; its buttons take the place of the row's until answered.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets

from ..model.contract import format_bytes

#: What each answer does: delete (keeping the checkpoints or not), or nothing.
Answer = Callable[[bool], None]


def delete_question_text(name: str, sizes: Mapping[str, Any] | None, running: bool) -> str:
    """The question in words, as the panel's dialog puts it: what is removed, what that frees,
    and where kept checkpoints would go."""
    parts = [f"Delete job {name}?"]
    if running:
        parts.append("The job is stopped first.")
    parts.append("Its record, logs, package snapshot and checkpoints are removed. This cannot be undone.")
    if sizes is not None and isinstance(sizes.get("job_size"), int):
        parts.append(f"This frees {format_bytes(sizes['job_size'])}.")
    checkpoints = (sizes or {}).get("checkpoints") or []
    if checkpoints:
        size = format_bytes(int((sizes or {}).get("size") or 0))
        parts.append(f'"Delete, keep checkpoints" moves its {len(checkpoints)} checkpoints ({size}) to ~/paddle-checkpoints/ first.')
    return " ".join(parts)


class DeleteQuestion(widgets.VBox):
    """The question and its answers: Keep (nothing happens), Delete, and — for a job with
    checkpoints — Delete, keep checkpoints.  `answer(keep_checkpoints)` runs on a delete."""

    def __init__(self, name: str, sizes: Mapping[str, Any] | None, running: bool, answer: Answer, dismiss: Callable[[], None]):
        self.text = widgets.HTML(
            value=f"<span class='paddle-delete-question'>{html.escape(delete_question_text(name, sizes, running))}</span>"
        )
        self.keep_button = widgets.Button(description="Keep", tooltip=f"do not delete {name}", layout={"width": "auto"})
        self.delete_button = widgets.Button(
            description="Delete", button_style="danger", tooltip=f"delete {name}, its logs and checkpoints", layout={"width": "auto"}
        )
        self.keep_button.on_click(lambda _b: dismiss())
        self.delete_button.on_click(lambda _b: answer(False))
        buttons: list[widgets.Button] = [self.keep_button]
        self.keep_checkpoints_button: widgets.Button | None = None
        if (sizes or {}).get("checkpoints"):
            self.keep_checkpoints_button = widgets.Button(
                description="Delete, keep checkpoints",
                tooltip="move the checkpoints to ~/paddle-checkpoints/, then delete the job",
                layout={"width": "auto"},
            )
            self.keep_checkpoints_button.on_click(lambda _b: answer(True))
            buttons.append(self.keep_checkpoints_button)
        buttons.append(self.delete_button)
        super().__init__(children=(self.text, widgets.HBox(children=buttons)))
        self.add_class("paddle-delete-question")


def bulk_question_text(names: list[str], freed: int | None) -> str:
    """The one question for several jobs: how many, which, what goes and what it frees."""
    listed = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
    count = "1 ended job" if len(names) == 1 else f"{len(names)} ended jobs"
    text = f"Delete {count}? {listed}. Their records, logs, package snapshots and checkpoints are removed. This cannot be undone."
    return text + (f" This frees {format_bytes(freed)}." if freed is not None else "")


class BulkDeleteQuestion(widgets.VBox):
    """Keep (nothing happens) or Delete N jobs (`answer()`)."""

    def __init__(self, names: list[str], freed: int | None, answer: Callable[[], None], dismiss: Callable[[], None]):
        self.text = widgets.HTML(value=f"<span class='paddle-delete-question'>{html.escape(bulk_question_text(names, freed))}</span>")
        self.keep_button = widgets.Button(description="Keep", tooltip="delete nothing", layout={"width": "auto"})
        self.delete_button = widgets.Button(
            description="Delete 1 job" if len(names) == 1 else f"Delete {len(names)} jobs", button_style="danger", layout={"width": "auto"}
        )
        self.keep_button.on_click(lambda _b: dismiss())
        self.delete_button.on_click(lambda _b: answer())
        super().__init__(children=(self.text, widgets.HBox(children=(self.keep_button, self.delete_button))))
        self.add_class("paddle-delete-question")
