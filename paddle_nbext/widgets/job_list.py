"""`job_list()`: an auto-refreshing table of your jobs with logs / cancel / delete buttons.

One `GET /jobs` per refresh interval (see `_poll` for why a thread does it); rows are reused by
job name so an unchanged job does not re-render.  Logs and cancel act at once and update their
row; delete first asks, in the row, what the panel's dialog asks (see `_delete_question`), and
then says what it freed.  The next refresh confirms.  Polling stops when the widget is closed or the frontend closes its comm.
"""

from __future__ import annotations

import html
import threading
import time
from typing import Any

import ipywidgets as widgets

from .. import display
from ..api import get_client
from ..client import Client, PaddleNbextError
from ..model.contract import Role, format_bytes
from ..model.status import JobStatus
from ..ranklog import failed_rank, rank_lines
from ..words import replica_name, replica_to_open, shown_phase
from ._delete_question import BulkDeleteQuestion, DeleteQuestion
from ._list_filter import FilterBar
from ._log_html import log_html, without_noise
from ._poll import Poller, comm_alive, watch_comm_close
from ._theme import error_html, stylesheet, themed


class _Row(widgets.VBox):
    """One job: its cells and buttons on a line, and under them the delete question while asked."""

    def __init__(self, owner: JobListWidget, status: JobStatus):
        self.name = str(status.name)
        self.cells = [widgets.HTML(layout={"width": width}) for width in ("220px", "100px", "260px", "60px")]
        self.logs_button = widgets.Button(
            description="logs",
            icon="file-text",
            layout={"width": "80px"},
            tooltip=f"show the log of {self.name}: its failed replica if it failed, else trainer 0",
        )
        # No "warning" style: ipywidgets' white on orange reads at 2.7:1 in the light theme.
        self.cancel_button = widgets.Button(description="cancel", icon="stop", layout={"width": "80px"}, tooltip=f"cancel {self.name}")
        self.delete_button = widgets.Button(description="delete", icon="trash", layout={"width": "80px"}, button_style="danger")
        self.logs_button.on_click(lambda _b: owner.show_logs(self.name))
        self.cancel_button.on_click(lambda _b: owner.cancel(self.name))
        self.delete_button.on_click(lambda _b: owner.ask_delete(self.name))
        self.line = widgets.HBox(children=(*self.cells, self.logs_button, self.cancel_button, self.delete_button))
        self.question: DeleteQuestion | None = None
        super().__init__(children=(self.line,))
        self.add_class("paddle-job-row")
        self.status = status
        self.update(status)

    def update(self, status: JobStatus) -> None:
        self.status = status
        values = (
            f"<code>{html.escape(self.name)}</code>",
            display.phase_badge(shown_phase(status)),
            html.escape(display.replica_counts(status)),
            display.age(status.created),
        )
        for cell, value in zip(self.cells, values, strict=True):
            if cell.value != value:
                cell.value = value
        self.cancel_button.disabled = status.terminal

    def ask(self, question: DeleteQuestion) -> None:
        """Show the delete question under the line; the delete button waits for its answer."""
        self.dismiss()
        self.question = question
        self.delete_button.disabled = True
        self.children = [self.line, question]

    def dismiss(self) -> None:
        """Take the question away (answered Keep, or the delete failed)."""
        if self.question is not None:
            self.question.close()
            self.question = None
        self.delete_button.disabled = False
        self.children = [self.line]


class JobListWidget(widgets.VBox):
    """The table.  `rows` maps job name to its row; `refreshes` counts completed refreshes."""

    def __init__(self, client: Client | None = None, *, interval: float = 5.0, **kwargs: Any):
        self.client = get_client(client)
        self.interval = interval
        self.rows: dict[str, _Row] = {}
        self.refreshes = 0
        # The poller thread refreshes while button clicks arrive on the kernel's thread.
        self._rows_lock = threading.RLock()
        # Names deleted from here; a listing fetched just before the delete must not revive them.
        self._deleted: set[str] = set()
        self.header = widgets.HTML(value="<b>Paddle jobs</b>")
        self.table = widgets.VBox()
        self.logs = widgets.HTML(value="")
        #: The panel's "Hide Paddle noise", on by default; shown with a log.
        self.hide_noise = widgets.Checkbox(value=True, description="Hide Paddle noise", indent=False, layout=widgets.Layout(display="none"))
        self.hide_noise.observe(lambda _change: self._render_log(), names="value")
        self._log: tuple[str, str, str] | None = None  # (job, replica words, text) of the log shown
        self.error = widgets.HTML(value="")
        #: What the last delete did ("Deleted x, freeing 1.2Gi.").
        self.notice = widgets.HTML(value="")
        #: Search, phase filter and "delete ended…" (`_list_filter`); the bulk question under it.
        self.filter = FilterBar(self._refilter, self.ask_delete_ended)
        self.bulk_question = widgets.VBox()
        super().__init__(
            children=(
                stylesheet(),
                self.header,
                self.filter,
                self.bulk_question,
                self.error,
                self.notice,
                self.table,
                self.hide_noise,
                self.logs,
            ),
            **kwargs,
        )
        self.add_class("paddle-job-list")
        themed(self)
        self.refresh()
        self.poller = Poller(interval, self._tick, lambda: comm_alive(self), name="paddle-job-list")
        watch_comm_close(self, self.poller)
        self.poller.start()

    @property
    def polling(self) -> bool:
        return self.poller.running

    def _tick(self) -> bool:
        self.refresh()
        return True

    def refresh(self) -> None:
        """One `GET /jobs`; rows are added, updated and removed to match."""
        try:
            statuses = self.client.list_jobs()
        except PaddleNbextError as error:
            self.error.value = error_html(html.escape(str(error)))
            return
        self.error.value = ""
        with self._rows_lock:
            self._apply(statuses)

    def _apply(self, statuses: list[JobStatus]) -> None:
        listed = {status.name for status in statuses}
        self._deleted &= listed  # once the server no longer lists a name, forget it
        statuses = [status for status in statuses if status.name not in self._deleted]
        rows = []
        for status in statuses:
            row = self.rows.get(status.name)
            if row is None:
                row = _Row(self, status)
            else:
                row.update(status)
            rows.append(row)
        for name in set(self.rows) - {row.name for row in rows}:
            self.rows[name].close()  # deleted elsewhere (panel, CLI): its row leaves the table
        self.rows = {row.name: row for row in rows}
        self._show_matching()
        self.refreshes += 1
        running = sum(1 for s in statuses if not s.terminal)
        self.header.value = (
            f"<b>Paddle jobs</b> · {len(statuses)} job{'s' if len(statuses) != 1 else ''}, {running} active"
            f" · updated {time.strftime('%H:%M:%S')} (every {self.interval:g} s)"
        )

    def _show_matching(self) -> None:
        """The table shows the rows the filter matches, in the server's order."""
        shown = tuple(row for row in self.rows.values() if self.filter.matches(row.status))
        if shown != tuple(self.table.children):
            self.table.children = shown

    def _refilter(self) -> None:
        with self._rows_lock:
            self._show_matching()

    def ended_shown(self) -> list[str]:
        """The ended jobs the table shows (what "delete ended…" deletes)."""
        with self._rows_lock:
            return [row.name for row in self.table.children if isinstance(row, _Row) and row.status.terminal]

    def ask_delete_ended(self) -> BulkDeleteQuestion | None:
        """The "delete ended…" button: one question for the ended jobs shown, saying what it frees."""
        names = self.ended_shown()
        if not names:
            self.notice.value = "No ended job is shown: nothing to delete."
            return None
        freed: int | None = 0
        for name in names:
            try:
                size = self.client.checkpoints(name).get("job_size")
            except PaddleNbextError:
                size = None
            freed = freed + size if isinstance(freed, int) and isinstance(size, int) else None

        def dismiss() -> None:
            self.bulk_question.children = ()

        question = BulkDeleteQuestion(names, freed, answer=lambda: self._delete_many(names, freed), dismiss=dismiss)
        self.bulk_question.children = (question,)
        return question

    def _delete_many(self, names: list[str], freed: int | None) -> None:
        self.bulk_question.children = ()
        failed = []
        for name in names:
            try:
                self.client.delete(name)
            except PaddleNbextError as error:
                failed.append(f"{name} ({error})")
                continue
            with self._rows_lock:
                self._deleted.add(name)
                row = self.rows.pop(name, None)
                if row is not None:
                    row.close()
        with self._rows_lock:
            self._show_matching()
        done = len(names) - len(failed)
        text = (
            f"Deleted {done} job{'s' if done != 1 else ''}"
            + (f", freeing {format_bytes(freed)}" if freed is not None and not failed else "")
            + "."
        )
        self.notice.value = html.escape(text)
        if failed:
            self.error.value = error_html(html.escape("Could not delete: " + "; ".join(failed)))

    # ---- buttons
    def show_logs(self, name: str, role: str | None = None, index: int | None = None) -> str:
        """Show a replica's last lines; by default the one the panel opens on (a failed job's
        failed replica, and of a trainer of several ranks the failed rank's lines, else trainer 0)."""
        rank = None
        if role is None or index is None:
            row = self.rows.get(name)
            default_role, default_index = replica_to_open(row.status) if row else (Role.TRAINER.value, 0)
            if row and role is None and index is None and default_role == Role.TRAINER.value:
                rank = failed_rank(row.status.message, default_index)
            role = default_role if role is None else role
            index = default_index if index is None else index
        try:
            # One rank's last lines are among more of its trainer's (every rank writes there).
            text = self.client.logs(name, role=role, index=index, tail=200 if rank is None else 5000)
        except PaddleNbextError as error:
            self.error.value = error_html(html.escape(str(error)))
            return ""
        if rank is not None:
            text = "".join(rank_lines(text, rank).splitlines(keepends=True)[-200:])
        who = replica_name(role, index) + (f" · rank {rank}" if rank is not None else "")
        self._log = (name, who, text)
        self._render_log()
        return text

    def _render_log(self) -> None:
        if self._log is None:
            return
        name, who, text = self._log
        shown, hidden = without_noise(text) if self.hide_noise.value else (text, 0)
        self.hide_noise.layout.display = ""
        said = f", {hidden} Paddle noise line{'s' if hidden != 1 else ''} hidden" if hidden else ""
        self.logs.value = (
            f"<b>{html.escape(name)} · {html.escape(who)}</b> (last 200 lines{said})"
            f"<pre class='paddle-logs' style='max-height:300px;overflow:auto'>{log_html(shown) or '(no output yet)'}</pre>"
        )

    def cancel(self, name: str) -> None:
        try:
            status = self.client.cancel(name)
        except PaddleNbextError as error:
            self.error.value = error_html(html.escape(str(error)))
            return
        with self._rows_lock:
            if name in self.rows:
                self.rows[name].update(status)

    def ask_delete(self, name: str) -> DeleteQuestion | None:
        """The delete button: ask in the row first, saying what the delete frees (the job's
        checkpoints and size come from `GET /jobs/{name}/checkpoints`)."""
        with self._rows_lock:
            row = self.rows.get(name)
        if row is None:
            return None
        try:
            sizes: dict[str, Any] | None = self.client.checkpoints(name)
        except PaddleNbextError:
            sizes = None  # the question then says nothing of sizes, as the panel's does
        question = DeleteQuestion(
            name,
            sizes,
            running=not row.status.terminal,
            answer=lambda keep: self.delete(name, keep_checkpoints=keep, sizes=sizes),
            dismiss=row.dismiss,
        )
        row.ask(question)
        return question

    def delete(self, name: str, *, keep_checkpoints: bool = False, sizes: dict[str, Any] | None = None) -> None:
        """Delete at once (the question's answer; call it yourself to skip the question) and say
        what was freed."""
        try:
            kept = self.client.delete(name, keep_checkpoints=keep_checkpoints)
        except PaddleNbextError as error:
            self.error.value = error_html(html.escape(str(error)))
            with self._rows_lock:
                if name in self.rows:
                    self.rows[name].dismiss()
            return
        self.notice.value = html.escape(display.delete_text(name, sizes or {}, kept))
        with self._rows_lock:
            self._deleted.add(name)
            row = self.rows.pop(name, None)
            if row is not None:
                self.table.children = tuple(r for r in self.table.children if r is not row)
                row.dismiss()
                row.close()

    def close(self) -> None:
        self.poller.stop()
        with self._rows_lock:
            for row in self.rows.values():
                row.close()
        super().close()
