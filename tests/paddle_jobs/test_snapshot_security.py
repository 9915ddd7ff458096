"""Issue 16, the files half, with real replica processes: a snapshot writes only into itself and
reads only the user's files, and no replica sees a credential of the server."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from paddle_jobs.local_jobs import OWNER, backend_for, request, wait_terminal
from paddle_nbext_server.config import PaddleNbext
from paddle_nbext_server.errors import InvalidRequest

CELL = "print('the cell ran', flush=True)\n"


def test_a_symlinked_entry_script_never_writes_outside_the_snapshot(home: Path, tmp_path: Path) -> None:
    """`paddle_entry.py` in the package being a link made the cell body overwrite the link's
    target, anywhere the server could write."""
    victim = tmp_path / "victim.py"
    victim.write_text("precious\n")
    (home / "code" / "paddle_entry.py").symlink_to(victim)
    backend = backend_for(home)

    async def scenario() -> str:
        await backend.submit(request(home, entry_script=CELL, job_name="cell", mode="collective", entry_point="python paddle_entry.py"))
        status = await wait_terminal(backend, "cell")
        assert status.phase == "Succeeded", status.to_dict()
        return await backend.read_logs("cell", OWNER, "trainer", 0)

    assert "the cell ran" in asyncio.run(scenario())
    assert victim.read_text() == "precious\n"
    written = home / ".paddle-jobs" / "cell" / "package" / "paddle_entry.py"
    assert not written.is_symlink() and written.read_text() == CELL


def test_links_are_copied_as_their_target_only_inside_the_home(home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    shared = home / "shared"
    shared.mkdir()
    (shared / "helper.py").write_text("VALUE = 42\n")
    code = home / "code"
    (code / "helper.py").symlink_to(shared / "helper.py")
    (code / "lib").symlink_to(shared, target_is_directory=True)
    (code / "loop").symlink_to(code, target_is_directory=True)
    (code / "leak.txt").symlink_to(outside)
    (code / "dangling.txt").symlink_to(tmp_path / "nothing-here")
    (code / "jobs").symlink_to(home / ".paddle-jobs", target_is_directory=True)
    backend = backend_for(home)
    cell = "import helper, lib.helper\nprint('value', helper.VALUE + lib.helper.VALUE, flush=True)\n"

    async def scenario() -> str:
        await backend.submit(request(home, entry_script=cell, job_name="links", mode="collective", entry_point="python paddle_entry.py"))
        status = await wait_terminal(backend, "links")
        assert status.phase == "Succeeded", status.to_dict()
        return await backend.read_logs("links", OWNER, "trainer", 0)

    assert "value 84" in asyncio.run(scenario())
    snapshot = home / ".paddle-jobs" / "links" / "package"
    assert (snapshot / "helper.py").read_text() == "VALUE = 42\n" and not (snapshot / "helper.py").is_symlink()
    assert (snapshot / "lib" / "helper.py").is_file()
    for skipped in ("leak.txt", "dangling.txt", "jobs", "loop"):
        assert not os.path.lexists(snapshot / skipped), skipped
    assert not any(path.is_symlink() for path in snapshot.rglob("*"))


def test_another_users_job_dir_cannot_be_a_package(home: Path) -> None:
    """A second user's job with `trainer_package=~/.paddle-jobs/<first user's job>` printed the
    first one's job.json and logs."""
    backend = backend_for(home)

    async def scenario() -> None:
        await backend.submit(request(home, job_name="first", mode="collective", entry_point="python -c 'print(1)'"))
        await wait_terminal(backend, "first")
        for package in (".paddle-jobs/first", str(home / ".paddle-jobs"), "~/.paddle-jobs/first/logs"):
            for snapshot in (True, False):
                leak = request(
                    home, job_name="reader", mode="collective", entry_point="cat job.json", trainer_package=package, snapshot=snapshot
                )
                with pytest.raises(InvalidRequest) as error:
                    await backend.submit(leak)
                assert error.value.field == "trainer_package" and "jobs dir" in error.value.message

    asyncio.run(scenario())


def test_replicas_see_no_server_credential(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's JUPYTER_TOKEN reached every replica's environment."""
    token = "server-token-0123456789"
    monkeypatch.setenv("JUPYTER_TOKEN", token)
    monkeypatch.setenv("PADDLE_NBEXT_TOKEN", token)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "hub-token-0123456789")
    monkeypatch.setenv("TOKEN_UNDER_ANOTHER_NAME", token)
    monkeypatch.setenv("SITE_VAULT_KEY", "vault-key-0123456789")
    monkeypatch.setenv("HARMLESS_SETTING", "kept")
    settings = PaddleNbext(secret_env=["SITE_*"])
    backend = backend_for(home)
    backend.parent = settings
    cell = (
        "import os\n"
        "print('seen:', sorted(k for k in os.environ if 'TOKEN' in k or k.startswith('SITE_')), flush=True)\n"
        "print('harmless:', os.environ.get('HARMLESS_SETTING'), flush=True)\n"
        f"print('value anywhere:', any({token!r} in v for v in os.environ.values()), flush=True)\n"
    )

    async def scenario() -> str:
        await backend.submit(request(home, entry_script=cell, job_name="env", mode="collective", entry_point="python paddle_entry.py"))
        status = await wait_terminal(backend, "env")
        assert status.phase == "Succeeded", status.to_dict()
        return await backend.read_logs("env", OWNER, "trainer", 0)

    log = asyncio.run(scenario())
    assert "seen: []" in log and "harmless: kept" in log and "value anywhere: False" in log, log
