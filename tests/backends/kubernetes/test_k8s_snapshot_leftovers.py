"""A resubmit over an earlier job's folder that cannot be removed (files a pod wrote as another
user, a read-only mount in it) answers 409 naming the folder and the file, never a 500 (issue 22)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddle_nbext_server.backends.kubernetes.lifecycle.home_setup import HomeSetup
from paddle_nbext_server.errors import InvalidState

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounts a read-only tmpfs (needs root)")


@pytest.fixture
def stuck_folder(tmp_path: Path) -> Iterator[Path]:
    """`~/.paddle-jobs/train` of an earlier job, with a file nobody here can remove."""
    job_dir = tmp_path / "home" / ".paddle-jobs" / "train"
    stuck = job_dir / "package" / "outputs"
    stuck.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(stuck)], check=True)
    try:
        (stuck / "checkpoint.pdparams").write_text("weights")
        subprocess.run(["mount", "-o", "remount,ro", str(stuck)], check=True)
        yield job_dir
    finally:
        subprocess.run(["umount", "-l", str(stuck)], check=False)


def test_a_resubmit_over_files_that_cannot_be_removed_is_a_conflict_naming_them(stuck_folder: Path, tmp_path: Path) -> None:
    source = tmp_path / "home" / "code"
    source.mkdir()
    (source / "train.py").write_text("print('hi')\n")
    with pytest.raises(InvalidState) as refused:
        HomeSetup.snapshot(source, stuck_folder, None, tmp_path / "home")
    assert refused.value.status == 409 and refused.value.field == "job_name"
    message = str(refused.value)
    assert f"the folder {stuck_folder} of an earlier job 'train' cannot be removed" in message
    assert "checkpoint.pdparams" in message and "choose another job_name" in message
