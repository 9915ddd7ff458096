"""The local master's health bookkeeping, from readings the tests set: the memory warning's
threshold, sustain and hysteresis, the stall watch over the trainers' files (armed only by a
report in this attempt, naming the quietest trainer and the last step), the bounded timeline
and the CPU figure of a resource-use sample."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from paddle_nbext_server.backends.local.master import stall_watch
from paddle_nbext_server.backends.local.master.process_table import CLOCK_TICKS, PAGE_SIZE, ProcessTable
from paddle_nbext_server.backends.local.master.usage_sampler import UsageSampler
from paddle_nbext_server.backends.local.records import ReplicaPlan
from paddle_nbext_server.jobfiles import timeline
from paddle_nbext_server.runtime import health_rules

LIMIT = 2 << 30


def test_memory_warns_after_staying_above_ninety_percent_and_clears_below_eighty_five() -> None:
    watch = health_rules.MemoryWatch(sustain=5.0)
    high = int(1.84 * (1 << 30))
    assert watch.observe("trainer-1", "trainer 1", high, LIMIT, now=100.0) == (None, None)  # above, not yet for long
    assert watch.observe("trainer-1", "trainer 1", high, LIMIT, now=104.0) == (None, None)
    warning, cleared = watch.observe("trainer-1", "trainer 1", high, LIMIT, now=105.0)
    assert warning == "trainer 1 uses 1.8 GiB of its 2 GiB limit" and cleared is None
    assert watch.observe("trainer-1", "trainer 1", high, LIMIT, now=106.0) == (None, None)  # said once
    # Between the two lines: the warning holds.
    assert watch.observe("trainer-1", "trainer 1", int(0.87 * LIMIT), LIMIT, now=107.0) == (None, None)
    assert "trainer-1" in watch.warned
    warning, cleared = watch.observe("trainer-1", "trainer 1", 1 << 30, LIMIT, now=108.0)
    assert warning is None and cleared == "trainer 1 is back to 1 GiB of its 2 GiB limit"
    assert watch.warned == {}


def test_a_dip_below_the_line_restarts_the_sustain() -> None:
    watch = health_rules.MemoryWatch(sustain=5.0)
    high, low = int(0.95 * LIMIT), int(0.5 * LIMIT)
    watch.observe("k", "trainer 0", high, LIMIT, now=0.0)
    watch.observe("k", "trainer 0", low, LIMIT, now=4.0)
    assert watch.observe("k", "trainer 0", high, LIMIT, now=6.0) == (None, None)
    assert watch.observe("k", "trainer 0", high, LIMIT, now=11.0)[0] is not None


def test_no_memory_warning_without_a_limit() -> None:
    watch = health_rules.MemoryWatch(sustain=0.0)
    assert watch.observe("k", "trainer 0", 100 << 30, 0, now=0.0) == (None, None)
    assert watch.observe("k", "trainer 0", 100 << 30, 0, now=1000.0) == (None, None)


def _touch(path: Path, when: float, text: str = "") -> None:
    path.write_text(text)
    os.utime(path, (when, when))


def _point(step: int, when: float = 0) -> str:
    return json.dumps({"t": when, "step": step, "total": None, "m": {"loss": 1.0}}) + "\n"


def test_stall_watch_is_armed_only_by_a_report_in_this_attempt(tmp_path: Path) -> None:
    watch = stall_watch.StallWatch(tmp_path, timeout=600)
    start = 1_000_000.0
    _touch(tmp_path / "trainer-0.log", start + 1)
    assert watch.check([0], start, now=start + 10_000) is None  # never reported: never stalled
    _touch(tmp_path / "trainer-0.metrics.jsonl", start - 50, _point(7))  # a report of the attempt before
    assert watch.check([0], start, now=start + 10_000) is None


def test_stall_names_the_quietest_trainer_and_the_last_step(tmp_path: Path) -> None:
    watch = stall_watch.StallWatch(tmp_path, timeout=600)
    start = time.mktime((2026, 12, 5, 14, 0, 0, 0, 0, -1))
    _touch(tmp_path / "trainer-0.log", start + 700)
    _touch(tmp_path / "trainer-0.metrics.jsonl", start + 700, _point(1234))
    _touch(tmp_path / "trainer-1.log", start + 120)
    _touch(tmp_path / "trainer-1.metrics.jsonl", start + 110, _point(1200))
    assert watch.check([0, 1], start, now=start + 719) is None  # trainer 1 quiet for 599 s
    stall = watch.check([0, 1], start, now=start + 720)
    assert stall is not None and stall.index == 1 and stall.step == 1234
    assert stall.words(start + 720) == "no progress for 10 min since step 1234; trainer 1 last wrote at 14:02:00"
    # Only running trainers count: trainer 1 finished, trainer 0 is fine.
    assert watch.check([0], start, now=start + 720) is None


def test_stall_of_a_trainer_with_ranks_reads_every_rank_file(tmp_path: Path) -> None:
    watch = stall_watch.StallWatch(tmp_path, timeout=60)
    start = 5_000.0
    _touch(tmp_path / "trainer-0.log", start + 10)
    _touch(tmp_path / "trainer-0.metrics.jsonl", start + 10, _point(3, start + 10))
    _touch(tmp_path / "trainer-0.rank-1.metrics.jsonl", start + 100, _point(9, start + 100))
    assert watch.check([0], start, now=start + 150) is None  # rank 1 wrote 50 s ago
    stall = watch.check([0], start, now=start + 161)
    assert stall is not None and stall.step == 9
    assert watch.first_step([0], start) == 3


def test_timeline_keeps_order_across_writers_and_stays_bounded(tmp_path: Path) -> None:
    writer = timeline.TimelineWriter(tmp_path)
    writer.add("submitted", "Submitted.")
    writer.add("started", "trainer 0 started.", role="trainer", index=0)
    again = timeline.TimelineWriter(tmp_path)  # a master (or server) reading the file anew
    assert again.seq == 2 and again.kinds_seen == {"submitted", "started"}
    for number in range(timeline.MAX_ENTRIES + 50):
        again.add("warning", f"warning {number}")
    entries = timeline.read(tmp_path)
    assert len(entries) <= timeline.MAX_ENTRIES
    seqs = [entry.seq for entry in entries]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert [entry.kind for entry in entries[:2]] == ["submitted", "started"]  # how it began stays
    assert entries[-1].text == f"warning {timeline.MAX_ENTRIES + 49}"  # and the newest
    (omitted,) = [entry for entry in entries if entry.kind == "omitted"]
    assert "earlier entries were dropped" in omitted.text
    assert [entry.seq for entry in timeline.read(tmp_path, since=seqs[-2])] == [seqs[-1]]


def test_timeline_skips_damaged_lines(tmp_path: Path) -> None:
    writer = timeline.TimelineWriter(tmp_path)
    writer.add("submitted", "Submitted.")
    with open(tmp_path / timeline.FILE, "a") as handle:
        handle.write('{"seq": "x"}\nnot json\n{"seq": 2, "t": "2026')  # a line cut by a crash
    assert [entry.text for entry in timeline.read(tmp_path)] == ["Submitted."]
    assert timeline.TimelineWriter(tmp_path).add("ended", "Succeeded.").seq == 2


def test_usage_sample_counts_the_whole_tree_in_cores_and_bytes() -> None:
    plan = ReplicaPlan(role="trainer", index=0, endpoint="127.0.0.1:1", cpu=2.0, memory=LIMIT)
    sampler = UsageSampler([plan])
    table = ProcessTable(alive={10, 11}, groups={10: [10, 11]}, children={10: [11]}, use={10: (100, 1000), 11: (50, 2000)})
    sampler.sample(table, {"trainer-0": 10}, now=0.0)
    first = sampler.replicas["trainer-0"]
    assert first.cpu is None and first.memory == 3000 * PAGE_SIZE and first.processes == 2
    # Two seconds later the tree used 3 s of CPU (one new process included): 1.5 cores.
    later = ProcessTable(
        alive={10, 11, 12},
        groups={10: [10, 11, 12]},
        children={10: [11], 11: [12]},
        use={10: (100 + CLOCK_TICKS, 1000), 11: (50 + CLOCK_TICKS, 2000), 12: (CLOCK_TICKS, 500)},
    )
    sampler.sample(later, {"trainer-0": 10}, now=2.0)
    second = sampler.replicas["trainer-0"]
    assert second.cpu == 1.5 and second.peak_cpu == 1.5 and second.memory == 3500 * PAGE_SIZE
    document = sampler.document({"trainer-0": "Running"}, 2.0)
    (replica,) = document["replicas"]
    assert replica["memory_limit"] == LIMIT and replica["cpu_request"] == 2.0 and replica["cpu_limit"] is None
    assert len(replica["history"]) == 2
    sampler.sample(ProcessTable(), {}, now=4.0)  # it ended: live figures go, the peak stays
    (replica,) = sampler.document({"trainer-0": "Succeeded"}, 2.0)["replicas"]
    assert replica["memory"] is None and replica["cpu"] is None and replica["peak_memory"] == 3500 * PAGE_SIZE
