"""`job_list()`'s search box, phase filter and "delete ended" button, as the panel has them:
with hundreds of jobs a table needs a way to find one and to clear out the ended ones."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from ..model.contract import Phase, is_terminal
from ..model.status import JobStatus

#: The phase filter's choices: (label, value); '' shows every job.
PHASE_CHOICES: tuple[tuple[str, str], ...] = (
    ("All", ""),
    ("Active", "active"),
    ("Ended", "ended"),
    *((str(phase.value), str(phase.value)) for phase in Phase),
)


def job_matches(status: JobStatus, text: str, phase: str) -> bool:
    """Any part of the name in any case, and `phase` ('', 'active', 'ended' or a phase)."""
    needle = text.strip().lower()
    if needle and needle not in str(status.name).lower():
        return False
    if phase == "active":
        return not is_terminal(str(status.phase))
    if phase == "ended":
        return is_terminal(str(status.phase))
    return phase in ("", str(status.phase))


class FilterBar(widgets.HBox):
    """The search box, the phase filter and the "delete ended" button."""

    def __init__(self, changed: Callable[[], None], delete_ended: Callable[[], object]):
        self.search = widgets.Text(placeholder="search jobs", description="", layout={"width": "200px"})
        self.phase = widgets.Dropdown(options=PHASE_CHOICES, value="", layout={"width": "110px"})
        self.delete_ended_button = widgets.Button(
            description="delete ended…",
            icon="trash",
            button_style="danger",
            tooltip="delete the ended jobs shown (asks first)",
            layout={"width": "auto"},  # its words whole (130 px cut them to "delete ende…")
        )
        self.search.observe(lambda _change: changed(), names="value")
        self.phase.observe(lambda _change: changed(), names="value")
        self.delete_ended_button.on_click(lambda _b: delete_ended())
        super().__init__(children=(self.search, self.phase, self.delete_ended_button))
        self.add_class("paddle-job-filter")

    def matches(self, status: JobStatus) -> bool:
        return job_matches(status, str(self.search.value), str(self.phase.value))
