"""A replica's log as `job_list()` shows it: escaped, with the traceback that failed the replica
marked, as the panel marks it (`labextension/src/logic/logtext.ts: lastTraceback`), so a failed job's
log is read from its error rather than searched for it.  The mark is a tint of the theme's own
background under the theme's text colour, readable in JupyterLab's light and dark themes.
Paddle's own noise (its glog lines, setup chatter, shutdown lines) is hidden by the same rules
the panel's "Hide Paddle noise" and the runner's failure line use (`model.paddle_noise`)."""

from __future__ import annotations

import html
import re

from ..model.paddle_noise import noise_mask

_HEADER = "Traceback (most recent call last):"
#: glog lines of Paddle's C++ side, which may come between a traceback and its exception line.
_GLOG = re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+\S+:\d+\]")
_MARK_STYLE = (
    "display:block;background:color-mix(in srgb, var(--jp-error-color1, #d32f2f) 14%, var(--jp-layout-color1, #fff));"
    "color:var(--jp-ui-font-color0, #000);border-left:3px solid var(--jp-error-color1, #d32f2f);padding-left:4px"
)


def last_traceback(text: str) -> tuple[int, int] | None:
    """Offsets of the last traceback: its header line through the exception line (the first
    unindented line after it that is not a glog line), or None."""
    lines = text.splitlines(keepends=True)
    offsets, at = [], 0
    for line in lines:
        offsets.append(at)
        at += len(line)
    headers = [n for n, line in enumerate(lines) if line.strip() == _HEADER]
    if not headers:
        return None
    first = headers[-1]
    for n in range(first + 1, len(lines)):
        line = lines[n].rstrip("\n")
        if line.strip() and not line[:1].isspace() and not _GLOG.match(line):
            return offsets[first], offsets[n] + len(line)
    return offsets[first], len(text)


def log_html(text: str) -> str:
    """The log's text for a `<pre>`, escaped, its last traceback in a `<mark>`."""
    span = last_traceback(text)
    if span is None:
        return html.escape(text)
    start, end = span
    return (
        html.escape(text[:start])
        + f"<mark class='paddle-traceback' style='{_MARK_STYLE}'>{html.escape(text[start:end])}</mark>"
        + html.escape(text[end:])
    )


def without_noise(text: str) -> tuple[str, int]:
    """The log without Paddle's noise lines, and how many were hidden (the traceback's own
    lines are never noise: a glog line inside it goes, its frames and exception line stay)."""
    lines = text.splitlines(keepends=True)
    mask = noise_mask([line.rstrip("\n") for line in lines])
    kept = [line for line, noise in zip(lines, mask, strict=True) if not noise]
    return "".join(kept), len(lines) - len(kept)
