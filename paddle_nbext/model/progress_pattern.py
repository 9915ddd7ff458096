"""A job's own pattern for its printed progress lines (the `progress_pattern` field): what makes
one acceptable, shared by the spec's rules (a 400 naming the field before anything is written)
and the launcher that matches the replica's output with it (`runtime/log_progress.py`).

A pattern is a Python regular expression matched against each line (`re.search`) with named
groups: `step` (required), `total`, `epoch`, `epochs`, `loss`, and any other name, which becomes
a metric of that name.  JavaScript's `(?<name>...)` is read as Python's `(?P<name>...)`, so a
pattern tried in a browser's console works too.

Why a pattern is refused beyond "does not compile": it runs on every line a replica prints, in
the launcher beside the training, so one that can take exponential time on a long line
(a quantified group that holds a quantifier itself, `(\\d+)+`) is refused, and so is one longer
than `MAX_LENGTH`.  The panel's validator (labextension/src/logic/validate/pattern.ts) makes
the same checks with the same words; tests/vectors holds the cases both agree on.

Standard library only: shipped into every job beside the launcher.
"""

from __future__ import annotations

import re

__all__ = ["EXAMPLE", "MAX_LENGTH", "compile_pattern", "normalize", "problem"]

#: Characters a pattern may have.
MAX_LENGTH = 500
EXAMPLE = r"step (?P<step>\d+)/(?P<total>\d+).*loss[:=] *(?P<loss>[-+.0-9e]+)"
#: JavaScript's named group `(?<name>` (not a look-behind, `(?<=` or `(?<!`).
_JS_GROUP = re.compile(r"\(\?<(?=[A-Za-z_])")
_UNBOUNDED = frozenset("+*")


def normalize(text: str) -> str:
    """`text` with JavaScript-style named groups written the Python way."""
    return _JS_GROUP.sub("(?P<", text)


def _nested_quantifier(text: str) -> bool:
    """True when a group that holds an unbounded quantifier (`+`, `*`, `{n,}`) is itself
    quantified by one: the shape that backtracks exponentially (`(a+)+`, `(?:\\w*x)*`)."""
    stack: list[bool] = []  # per open group: holds an unbounded quantifier
    escaped = in_class = False
    index = 0
    while index < len(text):
        char = text[index]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(":
            stack.append(False)
        elif char == ")" and stack:
            inner = stack.pop()
            following = text[index + 1 : index + 2]
            if inner and (following in _UNBOUNDED or text.startswith("{", index + 1) and _open_range(text, index + 1)):
                return True
            if stack and inner:
                stack[-1] = True
        elif (char in _UNBOUNDED or char == "{" and _open_range(text, index)) and stack:
            stack[-1] = True
        index += 1
    return False


def _open_range(text: str, start: int) -> bool:
    """True when `text[start:]` begins with an unbounded repeat `{n,}`."""
    match = re.match(r"\{[0-9]*,\}", text[start:])
    return match is not None


def problem(text: str) -> str | None:
    """What is wrong with `text` as a progress pattern, in words that say the fix; None if fine."""
    if len(text) > MAX_LENGTH:
        return f"is {len(text)} characters long; a progress pattern is at most {MAX_LENGTH}"
    if "\n" in text or "\r" in text or "\x00" in text:
        return "must be one line: it is matched against each printed line"
    try:
        compiled = re.compile(normalize(text))
    except re.error:
        return f"is not a valid regular expression; check its brackets and escapes, e.g. '{EXAMPLE}'"
    if "step" not in compiled.groupindex:
        return f"needs a named group 'step' for the step number, e.g. '{EXAMPLE}'"
    if _nested_quantifier(text):
        return "has a repeated group that repeats inside ('(\\d+)+'), which can take forever on a long line; repeat only one of them"
    return None


def compile_pattern(text: str) -> re.Pattern[str]:
    """The compiled pattern (ValueError with `problem`'s words when it is not acceptable)."""
    wrong = problem(text)
    if wrong is not None:
        raise ValueError(wrong)
    return re.compile(normalize(text))
