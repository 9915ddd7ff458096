"""scripts/gpu_check.py's pure parts: arguments, the job it submits, reading the ranks' reports
and judging them (the GPU path itself needs GPUs; its CPU dry path runs in
tests/paddle_jobs/test_gpu_check_cpu.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)
    return module


gpu_check = load()
HOME = {"HOME": "/home/alice"}


def no_gpus() -> int | None:
    return None


def four_gpus() -> int | None:
    return 4


def test_gpus_default_to_what_nvidia_smi_lists_and_the_pool_to_the_first_ones() -> None:
    opts = gpu_check.options([], HOME, four_gpus)
    assert (opts.ranks, opts.cpu, opts.gpu_ids) == (4, False, [0, 1, 2, 3])
    assert opts.package_dir == Path("/home/alice/paddle-nbext-gpu-check")
    opts = gpu_check.options(["--gpus", "2", "--gpu-ids", "6,7"], HOME, no_gpus)
    assert (opts.ranks, opts.gpu_ids) == (2, [6, 7])
    assert gpu_check.options(["--gpu-ids", "4,5,6"], HOME, no_gpus).ranks == 3
    opts = gpu_check.options(["--cpu"], HOME, no_gpus)
    assert (opts.ranks, opts.cpu, opts.gpu_ids) == (2, True, [])


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        ([], HOME, "no GPU found"),
        (["--gpus", "0"], HOME, "at least 1"),
        (["--cpu", "--ranks", "1"], HOME, "at least 2"),
        (["--cpu", "--gpus", "2"], HOME, "leave out --gpus"),
        (["--gpus", "2", "--gpu-ids", "1"], HOME, "lists 1 GPUs but the job has 2"),
        (["--gpu-ids", "a,b"], HOME, "GPU numbers"),
        (["--gpu-ids", "1,1"], HOME, "distinct"),
        (["--gpus", "1", "--url", "http://h/paddle/api/v1"], HOME, "needs the server's token"),
        (["--gpus", "1", "--url", "http://h/paddle/api/v1", "--token", "t", "--server-config", "c.py"], HOME, "already running"),
        (["--gpus", "1", "--timeout", "0"], HOME, "positive"),
    ],
)
def test_arguments_that_cannot_make_a_check_are_refused_with_why(argv: list[str], env: dict[str, str], words: str) -> None:
    with pytest.raises(gpu_check.UsageError, match=words):
        gpu_check.options(argv, env, no_gpus)


def test_a_token_may_come_from_the_environment_and_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    opts = gpu_check.options(["--gpus", "1", "--url", "http://h/paddle/api/v1"], {**HOME, "PADDLE_NBEXT_TOKEN": "t"}, no_gpus)
    assert (opts.url, opts.token) == ("http://h/paddle/api/v1", "t")
    assert gpu_check.main(["--cpu", "--ranks", "1"]) == 2
    assert "gpu_check.py: --ranks must be at least 2" in capsys.readouterr().err


def test_the_job_is_one_collective_trainer_of_n_gpus_or_n_cpu_ranks(tmp_path: Path) -> None:
    gpu = gpu_check.job_spec(gpu_check.options(["--gpus", "8", "--image", "site/paddle:3-gpu"], HOME, no_gpus), tmp_path, "python")
    assert gpu["mode"] == "collective" and gpu["trainers"] == 1
    assert (gpu["trainer_gpu"], gpu["procs_per_trainer"], gpu["image"]) == (8, 1, "site/paddle:3-gpu")
    assert gpu["entry_point"] == "python gpu_probe.py" and gpu["trainer_package"] == str(tmp_path)
    cpu = gpu_check.job_spec(gpu_check.options(["--cpu", "--ranks", "3"], HOME, no_gpus), tmp_path, "/opt/my env/python")
    assert (cpu["trainer_gpu"], cpu["procs_per_trainer"]) == (0, 3) and "image" not in cpu
    assert cpu["entry_point"] == "'/opt/my env/python' gpu_probe.py"


def test_the_server_config_puts_the_gpus_in_the_pool_then_the_users_file(tmp_path: Path) -> None:
    mine = tmp_path / "k8s.py"
    mine.write_text('c.PaddleNbext.backend = "kubernetes"\n')
    text = gpu_check.server_config_text(gpu_check.options(["--gpu-ids", "2,3", "--server-config", str(mine)], HOME, no_gpus))
    assert "c.LocalBackend.gpu_pool = [2, 3]" in text
    assert text.index("gpu_pool") < text.index('c.PaddleNbext.backend = "kubernetes"')
    compile(text, "config", "exec")  # a valid Jupyter config file


def report(rank: int, ranks: int, **changes: Any) -> dict[str, Any]:
    """What rank `rank` of a healthy 1 x `ranks` GPU job prints."""
    base = {
        "host": "node-1",
        "global_rank": rank,
        "world": ranks,
        "local_rank": rank,
        "selected_gpus": str(rank),
        "distri_backend": None,
        "cuda_visible": ",".join(str(i) for i in range(4, 4 + ranks)),
        "nvidia_visible": None,
        "compiled_with_cuda": True,
        "device": f"gpu:{rank}",
        "backend": "nccl",
        "place": f"Place(gpu:{rank})",
        "all_reduce": ranks * (ranks + 1) / 2,
        "rank": rank,
        "world_size": ranks,
    }
    base.update(changes)
    return base


def log_of(reports: list[dict[str, Any]]) -> str:
    """A trainer's log as the launcher writes it: prefixed rank lines among other output."""
    lines = ["waiting for nothing", "[rank 0] I1201 06:29:17.266114 569 init.cc:1] noise"]
    for item in reports:
        lines.append(f"[rank {item['local_rank']}] step 1")
        lines.append(f"[rank {item['local_rank']}] {gpu_check.MARK}{json.dumps(item)}")
    lines.append(f"[rank 1] {gpu_check.MARK}{{not json")
    lines.append("GPU_CHECK_SOMETHING else")
    return "\n".join(lines) + "\n"


def verdict(checks: list[Any]) -> dict[str, bool]:
    return {check.name: check.passed for check in checks}


def test_reports_are_read_from_the_prefixed_lines_and_garbage_is_skipped() -> None:
    reports = [report(rank, 2) for rank in range(2)]
    assert gpu_check.parse_reports(log_of(reports)) == reports


def test_a_healthy_gpu_job_passes_every_check() -> None:
    checks = gpu_check.evaluate([report(rank, 4) for rank in range(4)], 4, cpu=False, phase="Succeeded")
    assert verdict(checks) == {"ranks": True, "selected": True, "device": True, "backend": True, "all_reduce": True, "job": True}
    lines = [check.line() for check in checks]
    assert lines[2].startswith("PASS  device      rank 0 on gpu:0, rank 1 on gpu:1") and "of visible 4,5,6,7" in lines[2]


@pytest.mark.parametrize(
    ("broken", "failing"),
    [
        # Every rank on GPU 0: one process per trainer's way of old, or a missing FLAGS_selected_gpus.
        ({1: {"selected_gpus": None, "device": "gpu:0", "place": "Place(gpu:0)"}}, {"selected", "device"}),
        # Moved to the CPU with gloo although it has GPUs (issue 23's NVIDIA_VISIBLE_DEVICES case).
        (
            {r: {"distri_backend": "gloo", "backend": "gloo", "device": "cpu", "place": "Place(cpu)"} for r in range(4)},
            {"selected", "device", "backend"},
        ),
        ({2: {"all_reduce": 3.0}}, {"all_reduce"}),
        ({3: {"place": "Place(cpu)"}}, {"device"}),
    ],
)
def test_each_wrong_thing_fails_its_own_check(broken: dict[int, dict[str, Any]], failing: set[str]) -> None:
    reports = [report(rank, 4, **broken.get(rank, {})) for rank in range(4)]
    checks = verdict(gpu_check.evaluate(reports, 4, cpu=False, phase="Succeeded"))
    assert {name for name, passed in checks.items() if not passed} == failing


def test_a_missing_or_failed_rank_and_a_failed_job_are_named() -> None:
    reports = [report(0, 2), report(1, 2, error="RuntimeError: NCCL error")]
    checks = gpu_check.evaluate(reports, 3, cpu=False, phase="Failed", message="trainer 0 rank 1 failed: RuntimeError: NCCL error")
    by_name = {check.name: check for check in checks}
    assert not by_name["ranks"].passed and "missing [2]" in by_name["ranks"].detail and "NCCL error" in by_name["ranks"].detail
    assert not by_name["job"].passed and by_name["job"].detail == "Failed: trainer 0 rank 1 failed: RuntimeError: NCCL error"
    assert all(not check.passed for check in gpu_check.evaluate([], 2, cpu=False, phase="Failed"))


def test_the_cpu_path_wants_gloo_ranks_without_gpus() -> None:
    cpu = [
        report(rank, 2, selected_gpus=None, distri_backend="gloo", device="cpu", backend="gloo", place="Place(cpu)", cuda_visible=None)
        for rank in range(2)
    ]
    assert all(verdict(gpu_check.evaluate(cpu, 2, cpu=True, phase="Succeeded")).values())
    checks = verdict(gpu_check.evaluate([report(rank, 2) for rank in range(2)], 2, cpu=True, phase="Succeeded"))
    assert {name for name, passed in checks.items() if not passed} == {"selected", "device", "backend"}
