"""Log reads cost what the answer costs, not what the file does (issue 16: `logs?tail=10` on a
300 MiB log read the whole file, +700 MiB of server memory).  The big logs are sparse files:
300 MiB on paper, a few kilobytes on disk, written in no time."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from paddle_nbext_server.backends.kubernetes.logs.replica_logs import read_text
from paddle_nbext_server.backends.local.logs import Follow, read_log, tail
from paddle_nbext_server.jobfiles import log_tail

MiB = 1024 * 1024
LAST_LINES = "".join(f"step {i} loss 0.{i:03d}\n" for i in range(50))


@pytest.fixture
def big_log(tmp_path: Path) -> Path:
    """300 MiB: a sparse hole (NUL bytes, no line ends), then lines, then the last 50 lines."""
    path = tmp_path / "trainer-0.log"
    with open(path, "wb") as handle:
        handle.truncate(300 * MiB)
        handle.seek(300 * MiB)
        handle.write(b"".join(f"early line {i}\n".encode() for i in range(1000)) + LAST_LINES.encode())
    return path


def peak_memory(read: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_tail_of_a_300_mib_log_reads_only_its_end(big_log: Path) -> None:
    assert read_log(big_log, 10) == "".join(LAST_LINES.splitlines(keepends=True)[-10:])
    assert peak_memory(lambda: read_log(big_log, 10)) < 2 * MiB
    assert read_text(big_log, 10) == "".join(LAST_LINES.splitlines(keepends=True)[-10:])
    assert peak_memory(lambda: read_text(big_log, 10)) < 2 * MiB


def test_following_from_a_tail_starts_at_the_end_in_bounded_memory(big_log: Path) -> None:
    follow = Follow(big_log.parent, big_log, "trainer", 0)
    assert follow.start_at_tail(3) == "".join(LAST_LINES.splitlines(keepends=True)[-3:])
    assert follow.position == big_log.stat().st_size
    assert peak_memory(lambda: Follow(big_log.parent, big_log, "trainer", 0).start_at_tail(3)) < 2 * MiB


def test_a_line_without_an_end_is_cut_at_the_tail_limit(tmp_path: Path) -> None:
    """A progress bar that never writes "\\n" is one endless line: a tail keeps its last bytes."""
    path = tmp_path / "bar.log"
    with open(path, "wb") as handle:
        handle.truncate(100 * MiB)
        handle.seek(100 * MiB)
        handle.write(b"\r42%")
    text = read_log(path, 5)
    assert text.endswith("\r42%") and len(text.encode()) <= log_tail.MAX_TAIL_BYTES
    assert peak_memory(lambda: read_log(path, 5)) < 5 * log_tail.MAX_TAIL_BYTES  # a few copies of the kept bytes, whatever the file size


def test_a_whole_log_read_keeps_the_last_part_and_says_so(big_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_tail, "MAX_LOG_BYTES", 4096)
    text = read_log(big_log, None)
    first, rest = text.split("\n", 1)
    assert first.startswith("[paddle-nbext] the first ") and "bytes of this log are left out" in first
    assert rest.endswith(LAST_LINES) and len(rest.encode()) <= 4096
    skipped = int(first.split()[3])
    assert skipped + len(rest.encode()) == big_log.stat().st_size


@pytest.mark.parametrize("lines", [0, 1, 2, 5, 50, 1000, 1049, 1050, 5000])
def test_a_tail_says_what_splitting_the_whole_text_says(tmp_path: Path, lines: int) -> None:
    """Carriage returns, CRLF and a missing final line end: the same lines as before."""
    path = tmp_path / "mixed.log"
    body = "".join(f"line {i}\r\n" if i % 3 else f"bar {i}\r{i}%\n" for i in range(1000)) + LAST_LINES + "no end"
    path.write_text(body, encoding="utf-8")
    assert read_log(path, lines) == tail(body, lines)
