"""One rank's lines of a trainer's log.  A trainer of several ranks writes every rank's lines
into its one log, each prefixed `[rank r] ` (the launcher's `runtime/gang.py`); these keep rank
r's lines without the prefix, and the launcher's own lines (no prefix: waiting for pservers, the
`trainer 1 rank 2 failed: ...` line), and drop the other ranks' lines.  The panel's log picker
does the same (`labextension/src/logic/ranks.ts`).  Pure, standard library only."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

__all__ = ["RankLines", "failed_rank", "rank_lines", "rank_stream"]

_ANY_RANK = re.compile(r"^\[rank \d+\] ")


class RankLines:
    """Filters a stream of log chunks to one rank; a chunk may end mid-line, so that part waits
    for its newline (or `end()`)."""

    def __init__(self, rank: int) -> None:
        if rank < 0:
            raise ValueError(f"a rank is 0 or more, got {rank}")
        self.rank = rank
        self.prefix = f"[rank {rank}] "
        self.hidden = 0  # other ranks' lines dropped so far
        self._partial = ""

    def feed(self, chunk: str) -> str:
        text = self._partial + chunk
        cut = text.rfind("\n") + 1
        self._partial = text[cut:]
        return self._keep(text[:cut])

    def end(self) -> str:
        rest, self._partial = self._partial, ""
        return self._keep(rest)

    def _keep(self, text: str) -> str:
        kept = []
        for line in text.splitlines(keepends=True):
            if line.startswith(self.prefix):
                kept.append(line[len(self.prefix) :])
            elif _ANY_RANK.match(line):
                self.hidden += 1
            else:
                kept.append(line)
        return "".join(kept)


def rank_lines(text: str, rank: int) -> str:
    """Rank `rank`'s lines of a whole trainer log (and the launcher's own)."""
    lines = RankLines(rank)
    return lines.feed(text) + lines.end()


def rank_stream(chunks: Iterable[str], rank: int) -> Iterator[str]:
    """Rank `rank`'s lines of a streamed trainer log, whole lines as they complete."""
    lines = RankLines(rank)
    for chunk in chunks:
        kept = lines.feed(chunk)
        if kept:
            yield kept
    rest = lines.end()
    if rest:
        yield rest


def failed_rank(message: str, index: int) -> int | None:
    """The rank of trainer `index` a job's message says failed (`trainer 1 rank 2 failed: ...`,
    runtime/policy.py), or None."""
    found = re.search(rf"\btrainer {index} rank (\d+) failed\b", message)
    return int(found[1]) if found else None
