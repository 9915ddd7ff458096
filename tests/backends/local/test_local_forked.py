"""A launcher forked from the job master (`backends/local/master/forked.py`): when it is used instead of
a new interpreter, what the forked child is given (session, stdio, working dir, environment,
signals, `sys.path`), and how the master waits for it as it waits for a `Popen`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paddle_nbext_server.backends.local.master import forked, limits

#: A stand-in for the bundle's launcher: reports what a started `python launcher.py` is given.
LAUNCHER = """
import json, os, signal, sys

def main():
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    print(json.dumps({
        "fds": fds,
        "session": os.getsid(0) == os.getpid(),
        "cwd": os.getcwd(),
        "marker": os.environ.get("MARKER"),
        "secret": os.environ.get("ONLY_IN_THE_MASTER"),
        "path0": sys.path[0],
        "stdin": sys.stdin.read(),
        "sigterm": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
        "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    }), flush=True)
    return int(os.environ.get("CODE", "0"))
"""


#: A master in miniature (pytest's own process replaces stdio): forks the launcher above as the
#: master does and prints its exit code.
MASTER = """
import json, os, signal, sys
from paddle_nbext_server.backends.local.master import forked
for signum in (signal.SIGTERM, signal.SIGINT):  # as the master catches them, to cancel
    signal.signal(signum, lambda *_: None)
bundle, workdir, log_path, extra = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
main = forked.load_launcher(os.path.join(bundle, "launcher.py"))
env = {key: value for key, value in os.environ.items() if key != "ONLY_IN_THE_MASTER"}
env.update(extra)
with open(log_path, "ab") as log:
    process = forked.fork_launcher(
        main, launcher=os.path.join(bundle, "launcher.py"), env=env, cwd=workdir, log=log,
        prepare=lambda: open(os.path.join(workdir, "prepared"), "w").close(),
    )
print(process.wait(timeout=60), process.poll(), process.returncode)
"""


def run_forked(tmp_path: Path, **extra: str) -> tuple[list[int], dict[str, object]]:
    """The miniature master's (wait, poll, returncode) and what the forked launcher reported."""
    bundle = tmp_path / "runtime"
    bundle.mkdir(exist_ok=True)
    (bundle / "launcher.py").write_text(LAUNCHER, encoding="utf-8")
    workdir = tmp_path / "package"
    workdir.mkdir(exist_ok=True)
    log = tmp_path / "replica.log"
    env = {**os.environ, "ONLY_IN_THE_MASTER": "x"}
    argv = [sys.executable, "-c", MASTER, str(bundle), str(workdir), str(log), json.dumps(extra)]
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=True)
    codes = [int(word) for word in done.stdout.split()]
    return codes, dict(json.loads(log.read_text().splitlines()[-1]))


def test_a_forked_launcher_gets_what_a_started_one_would(tmp_path: Path) -> None:
    codes, seen = run_forked(tmp_path, MARKER="replica")
    assert codes == [0, 0, 0]
    assert seen["fds"] == [0, 1, 2, 3]  # stdio, and the listing's own: nothing of the master's
    assert seen["session"] and seen["cwd"] == str(tmp_path / "package")
    assert seen["marker"] == "replica" and seen["secret"] is None
    assert seen["path0"] == str(tmp_path / "runtime")
    assert seen["stdin"] == "" and seen["sigterm"] and seen["sigint"]
    assert (tmp_path / "package" / "prepared").exists()


def test_its_exit_code_and_a_killing_signal_read_as_popen_reads_them(tmp_path: Path) -> None:
    codes, _ = run_forked(tmp_path, CODE="3")
    assert codes == [3, 3, 3]
    pid = os.fork()
    if pid == 0:  # the child
        time.sleep(60)
        os._exit(0)
    sleeper = forked.ForkedLauncher(pid)
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(timeout=0.05)
    os.kill(sleeper.pid, signal.SIGKILL)
    assert sleeper.wait(timeout=60) == -signal.SIGKILL


def test_a_launcher_is_forked_only_where_a_started_python_would_be_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # Threads are the next test's; a thread an earlier test of the session left finishing (or a
    # library's native one) must not decide this one.
    monkeypatch.setattr(forked, "_single_threaded", lambda: True)
    env = dict(os.environ)
    assert forked.can_fork(sys.executable, env, None)
    assert not forked.can_fork("/usr/bin/python3-other", env, None)
    assert not forked.can_fork(sys.executable, {**env, "PYTHONPATH": "/elsewhere"}, None)
    assert not forked.can_fork(sys.executable, {**env, "HOME": "/another/home"}, None)
    assert not forked.can_fork(sys.executable, {**env, "LC_ALL": "C.UTF-8" if env.get("LC_ALL") != "C.UTF-8" else "C"}, None)
    assert forked.can_fork(sys.executable, {**env, "PADDLE_NBEXT_ROLE": "trainer", "FLAGS_x": "1"}, None)
    tight = limits.KernelLimit(mechanism=limits.RLIMIT, limit=64 << 20, cgroup="")
    roomy = limits.KernelLimit(mechanism=limits.RLIMIT, limit=64 << 30, cgroup="")
    assert not forked.can_fork(sys.executable, env, tight) and forked.can_fork(sys.executable, env, roomy)


def test_a_process_with_threads_starts_launchers_as_new_interpreters() -> None:
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not forked.can_fork(sys.executable, dict(os.environ), None)
    finally:
        stop.set()
        thread.join()


def test_a_bundle_whose_siblings_are_already_someone_elses_is_not_forked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = tmp_path / "runtime"
    bundle.mkdir()
    (bundle / "launcher.py").write_text("import contract\ndef main():\n    return 0\n", encoding="utf-8")
    (bundle / "contract.py").write_text("", encoding="utf-8")
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "contract.py").write_text("", encoding="utf-8")
    monkeypatch.delitem(sys.modules, "launcher", raising=False)
    monkeypatch.syspath_prepend(str(other))
    monkeypatch.delitem(sys.modules, "contract", raising=False)
    __import__("contract")  # another `contract` loaded first: the bundle's would not be the one used
    assert forked.load_launcher(str(bundle / "launcher.py")) is None
    monkeypatch.delitem(sys.modules, "launcher", raising=False)
    monkeypatch.delitem(sys.modules, "contract", raising=False)
    assert forked.load_launcher(str(bundle / "launcher.py")) is not None
