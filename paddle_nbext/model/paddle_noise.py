"""Paddle's noise in a replica's log, one set of rules for the runner, the panel and the widgets.

Standard library only: it is shipped beside `contract.py` in a job's runtime bundle (the runner's
`policy.py` imports it there), and the notebook's widgets import it from the package.
"""

from __future__ import annotations

import re

__all__ = ["NOISE_GLOG", "NOISE_LINES", "NOISE_WARNING", "RANK_PREFIX", "is_noise_line", "noise_mask"]

# Paddle's noise: what Paddle prints that is neither the user's output nor why a replica failed.
# Its C++ side logs through glog (`I1201 06:29:17.266114 569 server.cpp:1167] ...`) and, on a fatal
# signal, prints a C++ stack and a framed summary; after a Python exception it goes on with its
# shutdown lines; its Python side chatters while fleet sets up (parameter-server mode above all)
# and warns from its own code about gloo and ccache.  None of that is the error a user needs to
# read.  This is THE list: the runner's `failure_line` (runtime/policy.py) skips these lines to
# name a failure, the panel's "Hide Paddle noise" toggle hides them (labextension/src/generated/paddlenoise.ts
# is generated from these three names by `python -m paddle_nbext_server.codegen.noise_gen`, and a test
# fails while it differs), and so does `job_list()`'s log view (this module itself).
# So every pattern is written in the syntax Python's `re` and JavaScript's `RegExp` share, and is
# matched at the start of a line without its rank prefix (`[rank 1] `) and surrounding blanks.
# tests/vectors/paddle_noise.json holds real lines of Paddle 3.0.0 logs, parameter-server and
# collective, that must be hidden or kept; pytest and the panel's vitest suite both run it.

#: A glog line of Paddle's C++ side (INFO, WARNING, ERROR, FATAL).
NOISE_GLOG = r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+\S+:\d+\]"
#: Every other kind of line of Paddle's own that is noise.
NOISE_LINES: tuple[str, ...] = (
    # A fatal signal's report: rules and frames, the C++ stack, the summary; a stop from outside.
    r"^[-=*]{5,}",
    r"^\[TimeInfo: ",
    r"^\[SignalInfo: ",
    r"^C\+\+ Traceback",
    r"^Error Message Summary",
    r"^\d+\s+\S+.*\(\)$",
    r"^\d+ +\w+::.*\)(?: const)?$",
    r"^No stack trace in paddle",
    r"^FatalError: `Termination signal`",
    # Logging: glog's preamble and Paddle's Python loggers at INFO and DEBUG (their WARNING and
    # ERROR lines stay).
    r"^WARNING: Logging before",
    r"^INFO \d{4}-\d{2}-\d{2} ",
    r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}\] \[ *(?:DEBUG|INFO)\] ",
    # fleet's print()s while it sets up parameter-server training (the_one_ps, ps_optimizer...).
    r"^fl-ps > ",
    r"^is_heter_ps_mode\? ",
    r"^(?:valid_optimizer_list|meta_optimizer|graph_optimizer)= ",
    r"^paddle\.static\.default_startup_program: ",
    r"^idx, name, ctx: ",
    r"^(?:table_id|program_id|is_tensor_table|is_datanorm_table): \S+$",
    r"^adam_d2sum: ",
    r"^communicator config: \{",
    r"^create c2c connection done$",
    # The flags a collective job's Paddle reports as changed (inside `=====` rules).
    r"^FLAGS\(name='FLAGS_\w+', current_value=",
)
#: A warning raised in Paddle's own code (`.../site-packages/paddle/distributed/fleet/base/
#: role_maker.py:335: UserWarning: gloo is not initialized, ...`).  Python prints the warning's
#: source line after it, indented (`  warnings.warn(self._err_init)`): that line goes with it.
#: A warning of the user's code stays.
NOISE_WARNING = r"^\S*/(?:site|dist)-packages/paddle/\S+\.py:\d+: \w*Warning: "

_GLOG = re.compile(NOISE_GLOG)
_NOISE = re.compile("|".join(f"(?:{pattern})" for pattern in NOISE_LINES))
_WARNING = re.compile(NOISE_WARNING)
#: What each line of one rank carries in the log of a trainer of several (runtime/gang.py).
RANK_PREFIX = re.compile(r"^\[rank \d+\] ")


def is_noise_line(line: str) -> bool:
    """Whether `line`, read on its own, is Paddle's noise (any rank's): glog, a fatal signal's
    report, Paddle's setup chatter, a warning of Paddle's own code."""
    text = RANK_PREFIX.sub("", line, count=1).strip()
    return bool(text) and bool(_GLOG.match(text) or _NOISE.match(text) or _WARNING.match(text))


def noise_mask(lines: list[str]) -> list[bool]:
    """Which of a log's lines are Paddle's noise: those `is_noise_line` says, the indented source
    line Python prints after a warning of Paddle's own, and blank lines next to noise (a run of
    them right after or right before a noise line).  Each rank's lines (`[rank r] ...`) are read
    as a stream of their own.  The panel's NoiseFilter (labextension/src/logic/logtext.ts) hides
    exactly these lines."""
    after_noise: dict[str, bool] = {}
    after_warning: dict[str, bool] = {}
    blanks: dict[str, list[int]] = {}  # a stream's blank lines since its last line that said something
    mask = [False] * len(lines)
    for number, line in enumerate(lines):
        found = RANK_PREFIX.match(line)
        prefix = found[0] if found else ""
        body = line[len(prefix) :]
        text = body.strip()
        if not text:
            if after_noise.get(prefix, False):
                mask[number] = True
            else:  # decided by the next line of the stream
                blanks.setdefault(prefix, []).append(number)
            after_warning[prefix] = False
            continue
        hidden = (after_warning.get(prefix, False) and body.startswith((" ", "\t"))) or is_noise_line(text)
        for blank in blanks.pop(prefix, []):
            mask[blank] = hidden
        mask[number] = hidden
        after_warning[prefix] = hidden and _WARNING.match(text) is not None
        after_noise[prefix] = hidden
    return mask
