"""scripts/setup.sh waits for the Debian package lock instead of failing at once."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_apt_get(tmp_path: Path, locked_times: int, wait: int = 30) -> subprocess.CompletedProcess[str]:
    """`apt_get update` with an apt-get that reports a held lock `locked_times` times first."""
    fake = tmp_path / "bin" / "apt-get"
    fake.parent.mkdir(exist_ok=True)
    count = tmp_path / "calls"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo x >> "{count}"\n'
        f'if [ "$(wc -l < "{count}")" -le {locked_times} ]; then\n'
        '  echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2; exit 100\n'
        "fi\n"
        'echo "apt-get $*"\n'
    )
    fake.chmod(0o755)
    script = f'source "{ROOT}/scripts/apt_get.sh"; sleep() {{ :; }}; apt_get update -qq'
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "APT_LOCK_WAIT": str(wait)}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_a_held_lock_is_waited_for(tmp_path: Path) -> None:
    done = run_apt_get(tmp_path, locked_times=2)
    assert done.returncode == 0, done.stderr
    assert "waiting for the Debian package lock" in done.stderr
    assert len((tmp_path / "calls").read_text().splitlines()) == 3


def test_a_lock_held_past_the_wait_fails_with_apts_own_words(tmp_path: Path) -> None:
    done = run_apt_get(tmp_path, locked_times=100, wait=10)
    assert done.returncode == 1
    assert "Could not get lock" in done.stderr


def test_other_errors_fail_at_once(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "apt-get"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "E: Unable to locate package chromium" >&2; exit 100\n')
    fake.chmod(0o755)
    done = subprocess.run(
        ["bash", "-c", f'source "{ROOT}/scripts/apt_get.sh"; apt_get install chromium'],
        env={"PATH": f"{fake.parent}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "Unable to locate package" in done.stderr and "waiting" not in done.stderr


def test_the_repeat_run_stops_at_the_first_red_run_and_names_it(tmp_path: Path) -> None:
    """`scripts/test.sh --repeat N` (the proof that the suite needs no luck) runs pytest N times,
    each a fresh process, and says which run went red; `--busy K` loads the cores meanwhile."""
    counter = tmp_path / "runs"
    flaky = tmp_path / "test_second_run_fails.py"
    flaky.write_text(
        "from pathlib import Path\n"
        f"COUNTER = Path({str(counter)!r})\n"
        "def test_red_on_the_second_run():\n"
        "    runs = len(COUNTER.read_text().splitlines()) + 1 if COUNTER.exists() else 1\n"
        "    COUNTER.write_text('x\\n' * runs)\n"
        "    assert runs != 2\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PADDLE_NBEXT_SKIP_CHECKS": "1", "PADDLE_NBEXT_TEST_KUBECONFIG": "unused"}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "test.sh"), "--repeat", "3", "--busy", "1", str(flaky)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "run 1 of 3 (busy loops: 1)" in done.stdout and "run 2 of 3 failed" in done.stderr
    assert "run 3 of 3" not in done.stdout
    bad = subprocess.run(
        ["bash", str(ROOT / "scripts" / "test.sh"), "--repeat", "five"], env=env, capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "--repeat and --busy take whole numbers" in bad.stderr
