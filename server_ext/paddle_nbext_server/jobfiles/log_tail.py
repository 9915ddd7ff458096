"""Reading the end of a log file in bounded memory, for both backends' log routes.

A training log grows to gigabytes; `logs?tail=100` must cost what 100 lines cost, not what the
file does.  `read_tail` reads blocks backwards from the end until it holds more line ends than
lines were asked for, and never more than `MAX_TAIL_BYTES`; a whole-log read (no `tail`) keeps
the last `MAX_LOG_BYTES` and says in its first line how much was left out.  Blocking: run it in a
thread.
"""

from __future__ import annotations

import os
from typing import BinaryIO

#: Bytes read per step backwards.
BLOCK = 64 * 1024
#: The most a tail reads: lines this long are not lines any more (a progress bar without "\n").
MAX_TAIL_BYTES = 4 * 1024 * 1024
#: The most of a log one response carries; older output stays in the file.
MAX_LOG_BYTES = 64 * 1024 * 1024


def omitted_notice(skipped: int) -> bytes:
    """The first line of a log response that left the log's start out."""
    return f"[paddle-nbext] the first {skipped} bytes of this log are left out; the file holds them\n".encode()


def read_end(handle: BinaryIO, lines: int | None) -> tuple[bytes, int]:
    """(the log's end: its last `lines` lines, or all of it for None, within the limits above;
    the file's size when it was read).  Line ends are counted as "\\n"; the caller splits the
    text into lines as it always did, and gets at least `lines` of them."""
    size = handle.seek(0, os.SEEK_END)
    if lines is None:
        start = max(0, size - MAX_LOG_BYTES)
        handle.seek(start)
        data = handle.read(size - start)
        if start:
            cut = data.find(b"\n")
            data = omitted_notice(start + cut + 1) + data[cut + 1 :] if 0 <= cut else omitted_notice(start) + data
        return data, size
    if lines <= 0:
        return b"", size
    blocks: list[bytes] = []
    position, held, ends = size, 0, 0
    while position > 0 and ends <= lines and held < MAX_TAIL_BYTES:
        step = min(BLOCK, position, MAX_TAIL_BYTES - held)
        position -= step
        handle.seek(position)
        block = handle.read(step)
        blocks.append(block)
        held += len(block)
        ends += block.count(b"\n")
    data = b"".join(reversed(blocks))
    if position > 0:  # the first line read is cut: leave it out, unless it is all there is
        cut = data.find(b"\n")
        if 0 <= cut < len(data) - 1:
            data = data[cut + 1 :]
    return data, size
