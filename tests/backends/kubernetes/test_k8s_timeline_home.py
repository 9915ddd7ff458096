"""The Kubernetes timeline's entries from a job's folder in a tmp home (environment status,
metrics, checkpoints, the launchers' health files), and its file: keys that survive a server
restart and bounding, answers ordered by time with `since` still working."""

from __future__ import annotations

import json
import os
from pathlib import Path

from paddle_nbext_server.backends.kubernetes.timeline.home import HomeReader
from paddle_nbext_server.backends.kubernetes.timeline.objects import Derived
from paddle_nbext_server.backends.kubernetes.timeline.store import KEYS_FILE, KeyedTimeline, TimelineFiles
from paddle_nbext_server.jobfiles import timeline
from paddle_nbext_server.jobfiles.metrics import MetricsFile
from paddle_nbext_server.runtime import paddle_nbext_job

T0 = 1796479200.0  # 2026-12-05T14:00:00Z


def folders(tmp_path: Path) -> tuple[Path, Path]:
    logs, checkpoints = tmp_path / "job" / "logs", tmp_path / "job" / "checkpoints"
    logs.mkdir(parents=True)
    return logs, checkpoints


def health_line(kind: str, text: str, *, t: str, attempt: int = 0, index: int = 1) -> str:
    return json.dumps({"t": t, "kind": kind, "text": text, "role": "trainer", "index": index, "attempt": attempt}) + "\n"


def save_checkpoint(directory: Path, step: int, when: float) -> None:
    path = directory / f"{paddle_nbext_job.STEP_PREFIX}{step:0{paddle_nbext_job.STEP_DIGITS}d}"
    path.mkdir(parents=True)
    (path / paddle_nbext_job.MANIFEST).write_text(json.dumps({"step": step, "time": when, "ranks": 1, "attempt": "0."}))
    os.utime(path / paddle_nbext_job.MANIFEST, (when, when))


def test_environment_first_step_and_checkpoints_with_the_files_times(tmp_path: Path) -> None:
    logs, checkpoints = folders(tmp_path)
    reader = HomeReader(logs, checkpoints)
    trainer = [MetricsFile("trainer", 0, logs / "trainer-0.metrics.jsonl"), MetricsFile("trainer", 1, logs / "trainer-1.metrics.jsonl")]
    assert reader.read([], trainer) == []
    (logs / "environment.json").write_text(json.dumps({"job": "mnist", "time": T0 + 3, "state": "building", "packages": 12}))
    (logs / "trainer-0.metrics.jsonl").write_text('{"t":%.3f,"step":5,"total":null,"m":{"loss":1.0}}\n' % (T0 + 30))
    (logs / "trainer-1.metrics.jsonl").write_text('{"t":%.3f,"step":1,"total":null,"m":{"loss":1.0}}\n{"t":' % (T0 + 20))
    save_checkpoint(checkpoints, 100, T0 + 60)
    found = {entry.kind: entry for entry in reader.read([], trainer)}
    assert found["environment"].text == "Preparing environment: 12 packages."
    assert found["environment"].t == "2026-12-05T14:00:03.000Z"
    assert (found["first_step"].text, found["first_step"].t) == ("First progress reported: step 1.", "2026-12-05T14:00:20.000Z")
    assert (found["checkpoint"].text, found["checkpoint"].t) == ("Checkpoint at step 100 saved.", "2026-12-05T14:01:00.000Z")
    # Nothing changed: nothing is read again, and the first step is said once.
    assert reader.read([], trainer) == []
    (logs / "environment.json").write_text(json.dumps({"job": "mnist", "time": T0 + 9, "state": "ready", "packages": 12}))
    save_checkpoint(checkpoints, 200, T0 + 120)
    again = reader.read([], trainer)
    assert [entry.text for entry in again if entry.kind == "environment"] == ["Environment ready (12 packages)."]
    assert sorted(entry.text for entry in again if entry.kind == "checkpoint") == [
        "Checkpoint at step 100 saved.",
        "Checkpoint at step 200 saved.",
    ]
    assert not [entry for entry in again if entry.kind == "first_step"]


def test_health_files_merge_and_the_last_line_of_this_attempt_is_the_standing_warning(tmp_path: Path) -> None:
    logs, checkpoints = folders(tmp_path)
    reader = HomeReader(logs, checkpoints)
    replicas = [("trainer", 0), ("trainer", 1)]
    path = logs / "trainer-1.health.jsonl"
    path.write_text(
        health_line("warning", "Memory: trainer 1 uses 1.8 GiB of its 2 GiB limit", t="2026-12-05T14:05:00Z", attempt=0)
        + health_line("recovered", "Memory: trainer 1 is back under 90 % of its limit", t="2026-12-05T14:06:00Z", attempt=0)
        + "not json\n"
        + health_line("warning", "Stalled: no progress for 10 min since step 1234", t="2026-12-05T14:20:00Z", attempt=1)
        + '{"t": "2026-12-05T14:21:00Z", "kind": "warn'  # being written: waits for its end
    )
    found = reader.read(replicas, [])
    assert [(entry.kind, entry.t, entry.role, entry.index) for entry in found] == [
        ("warning", "2026-12-05T14:05:00.000Z", "trainer", 1),
        ("recovered", "2026-12-05T14:06:00.000Z", "trainer", 1),
        ("warning", "2026-12-05T14:20:00.000Z", "trainer", 1),
    ]
    assert found[0].text == "Memory: trainer 1 uses 1.8 GiB of its 2 GiB limit."
    assert len({entry.key for entry in found}) == 3
    assert reader.active_warnings(0) == []  # the stall is of attempt 1
    [standing] = reader.active_warnings(1)
    assert (standing.role, standing.index, standing.stall) == ("trainer", 1, True)
    with open(path, "a") as handle:
        handle.write('ing", "text": "x", "attempt": 1}\n')
        handle.write(health_line("recovered", "Progress again after 12 min", t="2026-12-05T14:32:00Z", attempt=1))
    more = reader.read(replicas, [])
    assert [(entry.kind, entry.text) for entry in more] == [("warning", "x."), ("recovered", "Progress again after 12 min.")]  # read on
    assert reader.active_warnings(1) == []


def test_a_memory_warning_that_clears_leaves_a_standing_stall_standing(tmp_path: Path) -> None:
    """One file, two watches: the memory watch's "recovered" is the file's last line, yet the
    stall, the stall watch's last line, still holds."""
    logs, checkpoints = folders(tmp_path)
    (logs / "trainer-1.health.jsonl").write_text(
        health_line("warning", "Memory: trainer 1 uses 1.8 GiB of its 2 GiB limit", t="2026-12-05T14:05:00Z")
        + health_line("warning", "Stalled: no progress for 10 min since step 7", t="2026-12-05T14:15:00Z")
        + health_line("recovered", "Memory: trainer 1 is back to 1 GiB of its 2 GiB limit", t="2026-12-05T14:16:00Z")
    )
    reader = HomeReader(logs, checkpoints)
    reader.read([("trainer", 1)], [])
    [standing] = reader.active_warnings(0)
    assert standing.stall and standing.text == "Stalled: no progress for 10 min since step 7", standing


def derived(n: int, *, prefix: str = "e", t0: float = T0) -> list[Derived]:
    from paddle_nbext_server.backends.kubernetes.timeline.objects import stamp_epoch

    return [Derived(f"{prefix}:{i}", stamp_epoch(t0 + i) or "", "checkpoint", f"Checkpoint at step {i} saved.") for i in range(n)]


def test_no_entry_is_written_twice_across_a_server_restart(tmp_path: Path) -> None:
    logs, _ = folders(tmp_path)
    first = KeyedTimeline(logs)
    assert len(first.add_new([*derived(3), *derived(3)])) == 3
    restarted = KeyedTimeline(logs)  # a new server process: the keys come from the file
    assert restarted.add_new(derived(4)) != []
    assert [entry.key for entry in timeline.read(logs)] == ["e:0", "e:1", "e:2", "e:3"]
    assert [entry.seq for entry in timeline.read(logs)] == [1, 2, 3, 4]


def test_bounding_keeps_the_dropped_keys_so_a_restart_adds_nothing_again(tmp_path: Path) -> None:
    logs, _ = folders(tmp_path)
    writer = KeyedTimeline(logs)
    every = derived(timeline.MAX_ENTRIES + 100)
    for entry in every:
        writer.add_new([entry])
    kept = timeline.read(logs)
    assert len(kept) <= timeline.MAX_ENTRIES
    assert [entry.kind for entry in kept].count("omitted") == 1
    assert (logs / KEYS_FILE).is_file()
    restarted = KeyedTimeline(logs)
    assert restarted.add_new(every) == []
    assert len(timeline.read(logs)) == len(kept)


def test_the_answer_is_by_time_and_since_still_gets_what_was_written_late(tmp_path: Path) -> None:
    logs, _ = folders(tmp_path)
    writer = KeyedTimeline(logs)
    writer.add_new(derived(3, t0=T0 + 100))
    files = TimelineFiles()
    answer = files.answer(logs, "mnist", 0, None)
    assert answer["available"] is True
    assert answer["last"] == 3
    assert all("key" not in entry for entry in answer["entries"])
    # The server was down when these happened: derived later, with their older times.
    writer.add_new(derived(2, prefix="late", t0=T0))
    later = files.answer(logs, "mnist", answer["last"], None)
    assert [entry["seq"] for entry in later["entries"]] == [4, 5]
    assert later["last"] == 5
    everything = files.answer(logs, "mnist", 0, None)["entries"]
    assert [entry["seq"] for entry in everything] == [4, 5, 1, 2, 3]  # by time
    assert files.answer(logs, "mnist", 5, None)["entries"] == []


def test_no_file_and_a_problem_is_not_available_with_the_reason(tmp_path: Path) -> None:
    answer = TimelineFiles().answer(tmp_path / "nowhere" / "logs", "mnist", 0, "the job's folder is not in the home yet")
    assert (answer["available"], answer["reason"], answer["entries"]) == (False, "the job's folder is not in the home yet", [])


def test_a_new_job_of_the_same_name_over_a_kept_folder_starts_its_own_timeline(tmp_path: Path) -> None:
    logs, _ = folders(tmp_path)
    KeyedTimeline(logs, "uid-old").add_new(derived(3))
    again = KeyedTimeline(logs, "uid-new")
    assert [entry.key for entry in again.add_new(derived(2))] == ["uid-new/e:0", "uid-new/e:1"]
    assert [entry.seq for entry in timeline.read(logs)] == [1, 2]
    assert len((logs / "timeline.uid-old.jsonl").read_text().splitlines()) == 3
    assert KeyedTimeline(logs, "uid-new").add_new(derived(2)) == []


def test_damaged_files_lose_their_entries_only(tmp_path: Path) -> None:
    logs, checkpoints = folders(tmp_path)
    (logs / "environment.json").write_text(json.dumps({"state": "ready", "time": 1e300}))
    (logs / "trainer-0.metrics.jsonl").write_text('{"t":1e300,"step":1}\n{"t":"x","step":2}\n[]\n')
    (logs / "trainer-0.health.jsonl").write_text(
        '{"t": "yesterday", "kind": "warning", "text": "x"}\n'
        '{"t": "2026-12-05T14:00:00Z", "kind": "panic", "text": "x"}\n'
        '{"t": "2026-12-05T14:00:00Z", "kind": "warning", "text": 5}\n'
        "\x00\xff\n" + health_line("warning", "Memory: trainer 0 uses 1.9 GiB of its 2 GiB limit", t="2026-12-05T14:01:00Z", index=0)
    )
    checkpoints.mkdir()
    (checkpoints / "step-oops").mkdir()
    reader = HomeReader(logs, checkpoints)
    found = reader.read([("trainer", 0)], [MetricsFile("trainer", 0, logs / "trainer-0.metrics.jsonl")])
    assert [(entry.kind, entry.text) for entry in found] == [("warning", "Memory: trainer 0 uses 1.9 GiB of its 2 GiB limit.")]
    assert [w.text for w in reader.active_warnings(0)] == ["Memory: trainer 0 uses 1.9 GiB of its 2 GiB limit"]
