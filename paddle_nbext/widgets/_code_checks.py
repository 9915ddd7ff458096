"""What `form()` checks of the code before a submit, on the kernel's side of the same home: the
package folder is not the whole home by accident, and the entry point's script is in it.

Before, the untouched form said `python train.py` with the whole home as the package; the job
started, copied the home, and failed at once with "can't open file …/train.py".  The server
cannot check the script (it is the job's command), so the form does, as the user types: a
script named in the command (`python train.py --epochs 3`) must be a file in the package.
When the package folder is not visible here (a path on the server only), nothing is claimed.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: What a command starts with to run a Python script.
_PYTHONS = {"python", "python3"}


def package_dir(value: str, home: Path) -> Path:
    """The package folder as the server resolves it: `~` and relative paths are in the home,
    and an empty value is the home itself."""
    raw = value.strip()
    if not raw or raw == "~":
        return home
    if raw.startswith("~/"):
        return home / raw[2:]
    path = Path(raw)
    return path if path.is_absolute() else home / path


def entry_script(entry_point: str) -> str | None:
    """The script a `python [options] SCRIPT [args]` command runs, None for any other command
    (`python -m module`, `bash run.sh`, a command that does not parse)."""
    try:
        words = shlex.split(entry_point)
    except ValueError:
        return None
    if not words or Path(words[0]).name not in _PYTHONS:
        return None
    for word in words[1:]:
        if word in ("-m", "-c"):
            return None
        if not word.startswith("-"):
            return word if word.endswith(".py") else None
    return None


def default_entry(package: Path) -> str:
    """`python train.py` when the package has that script, else its one top-level script, else
    nothing: the form never offers a command that cannot start."""
    if (package / "train.py").is_file():
        return "python train.py"
    try:
        scripts = sorted(p.name for p in package.glob("*.py") if p.is_file() and p.name not in ("setup.py", "conftest.py"))
    except OSError:
        return ""
    return f"python {scripts[0]}" if len(scripts) == 1 else ""


def code_problems(data: Mapping[str, Any], home: Path, *, empty_is_home: bool = True) -> dict[str, str]:
    """Messages per field (`trainer_package`, `entry_point`) for the code as typed.
    `empty_is_home`: an empty package means the whole home (false when the server pins one)."""
    problems: dict[str, str] = {}
    typed = str(data.get("trainer_package") or "").strip()
    if not typed and empty_is_home:
        problems["trainer_package"] = (
            "give the folder of your training code: left empty, your whole home would be copied into the job (type ~ if you mean it)"
        )
    package = package_dir(typed, home)
    script = entry_script(str(data.get("entry_point") or ""))
    if script is not None and package.is_dir() and not Path(script).is_absolute() and not (package / script).is_file():
        problems["entry_point"] = f"'{script}' is not in the package folder {package}"
    return problems
