"""One rank's lines of a trainer's log (paddle_nbext.ranklog), as `job.logs(rank=)`,
`paddle-nbext logs --rank` and `%paddle_logs --rank` show them."""

from __future__ import annotations

import pytest

from paddle_nbext.ranklog import RankLines, rank_lines, rank_stream

LOG = (
    "waiting for pserver 127.0.0.1:6174\n"
    "[rank 0] step 1\n"
    "[rank 1] step 1\n"
    "[rank 10] step 1 of rank ten\n"
    "[rank 1] Traceback (most recent call last):\n"
    "[rank 1] ValueError: bad batch\n"
    "trainer 1 rank 1 failed: ValueError: bad batch\n"
)


def test_a_ranks_lines_without_prefix_and_the_launchers_own_lines() -> None:
    assert rank_lines(LOG, 1) == (
        "waiting for pserver 127.0.0.1:6174\nstep 1\nTraceback (most recent call last):\nValueError: bad batch\n"
        "trainer 1 rank 1 failed: ValueError: bad batch\n"
    )
    assert rank_lines(LOG, 10) == "waiting for pserver 127.0.0.1:6174\nstep 1 of rank ten\ntrainer 1 rank 1 failed: ValueError: bad batch\n"
    assert rank_lines("plain log of one process\n", 0) == "plain log of one process\n"


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_a_stream_cut_anywhere_gives_the_same_lines(size: int) -> None:
    chunks = [LOG[i : i + size] for i in range(0, len(LOG), size)]
    assert "".join(rank_stream(chunks, 1)) == rank_lines(LOG, 1)
    lines = RankLines(1)
    for chunk in chunks:
        lines.feed(chunk)
    lines.end()
    assert lines.hidden == 2


def test_a_last_line_without_newline_is_kept_and_a_negative_rank_refused() -> None:
    assert rank_lines("[rank 2] almost", 2) == "almost"
    with pytest.raises(ValueError, match="0 or more"):
        RankLines(-1)


def test_the_failed_rank_of_a_trainer_is_read_from_the_jobs_message() -> None:
    from paddle_nbext.ranklog import failed_rank

    assert failed_rank("trainer 1 rank 2 failed: ValueError: x", 1) == 2
    assert failed_rank("trainer 1 rank 2 failed after 1 restart: ValueError: x", 1) == 2
    assert failed_rank("trainer 11 rank 2 failed: x", 1) is None
    assert failed_rank("trainer 1 failed with exit code 1: ValueError: x", 1) is None
