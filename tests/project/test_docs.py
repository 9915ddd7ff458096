"""The docs cannot drift: every command, magic flag and config name they mention must exist.

Parses README.md and docs/*.md and compares what they mention against the real thing:
- `paddle-nbext COMMAND --flag` in code against the `--help` output of the installed CLI and of
  each of its commands, and the value of a flag with choices (`--role environment`) against them;
- `%paddle_...` / `%%paddle_...` and their flags against the magics' own `--help` output, run in a
  real IPython shell after `%load_ext paddle_nbext`;
- `c.Class.trait` (anywhere), and `Class: {trait: ...}` keys in JSON/YAML code blocks, against
  the configurable traits of the class (`class_traits(config=True)`).
The guides must also cover the whole surface: every magic flag and CLI command in the user
guide, every configurable trait of the three paddle-nbext classes in the admin guide.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:
    from traitlets import HasTraits

ROOT = Path(__file__).resolve().parents[2]
USER_GUIDE = ROOT / "docs" / "user-guide.md"
ADMIN_GUIDE = ROOT / "docs" / "admin-guide.md"
CLI = "paddle-nbext"
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
CONFIG_NAME = re.compile(r"(?<![\w.])c\.([A-Z]\w*)\.([A-Za-z_]\w*)")
MAGIC = re.compile(r"(?<![\w%])(%%?)(paddle_\w+)")
# Where a shell command starts inside a code line.
COMMAND_START = re.compile(r"(?:^|[|;&(!`]|\$\s|&&|\bexec\s|\bthen\s|\bdo\s)\s*$")


# ------------------------------------------------------------------ the real surface


def option_names(help_text: str) -> set[str]:
    """The option strings argparse lists in a help text (not words from the descriptions)."""
    names: set[str] = set()
    for line in help_text.splitlines():
        head = re.match(r"^\s{2,}(-\S.*?)(?:\s{2,}|$)", line)
        if head:
            names.update(OPTION.findall(head.group(1)))
    return names


def option_choices(help_text: str) -> dict[str, set[str]]:
    """Option -> the values argparse allows it (`--role {trainer,pserver,environment}`)."""
    choices: dict[str, set[str]] = {}
    for line in help_text.splitlines():
        head = re.match(r"^\s{2,}(-\S.*?)(?:\s{2,}|$)", line)
        for flag, values in re.findall(r"(--?[A-Za-z][\w-]*) \{([^}]*)\}", head.group(1) if head else ""):
            choices[flag] = set(values.split(","))
    return choices


def _configurable(cls: type[HasTraits]) -> set[str]:
    return set(cls.class_traits(config=True))


@lru_cache(maxsize=1)
def config_classes() -> dict[str, set[str]]:
    """Class name -> its configurable traits, for every class the docs may configure."""
    from jupyter_server.serverapp import ServerApp

    from paddle_nbext_server.backends.kubernetes import KubernetesBackend
    from paddle_nbext_server.backends.local import LocalBackend
    from paddle_nbext_server.config import PaddleNbext
    from paddle_nbext_server.notify.admin import PaddleNbextNotifications

    return {cls.__name__: _configurable(cls) for cls in (PaddleNbext, PaddleNbextNotifications, LocalBackend, KubernetesBackend, ServerApp)}


OWN_CLASSES = ("PaddleNbext", "PaddleNbextNotifications", "LocalBackend", "KubernetesBackend")


def _cli_help(*args: str) -> str:
    exe = Path(sys.executable).with_name(CLI)
    command = [str(exe)] if exe.exists() else [shutil.which(CLI) or CLI]
    done = subprocess.run([*command, *args, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{CLI} {' '.join(args)} --help failed: {done.stderr}"
    return done.stdout


@dataclass
class CliSurface:
    global_flags: set[str]
    commands: dict[str, set[str]] = field(default_factory=dict)
    choices: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # command -> option -> values


@lru_cache(maxsize=1)
def cli_surface() -> CliSurface:
    top = _cli_help()
    listing = top.split("COMMAND\n", 2)[-1].split("\noptions:")[0]
    names = re.findall(r"^ {4}([a-z][\w-]*)\s", listing, flags=re.M)
    assert names, f"no commands found in `{CLI} --help`:\n{top}"
    surface = CliSurface(option_names(top))
    for name in names:
        help_text = _cli_help(name)
        surface.commands[name] = option_names(help_text)
        surface.choices[name] = option_choices(help_text)
    return surface


@lru_cache(maxsize=1)
def magic_help() -> dict[str, tuple[str, str]]:
    """'%name' / '%%name' -> (its --help text, kind) from a real IPython shell."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "paddle_nbext")
    magics = shell.magics_manager.magics
    found: dict[str, tuple[str, str]] = {}
    for kind, prefix in (("line", "%"), ("cell", "%%")):
        for name in magics[kind]:
            if not name.startswith("paddle_"):
                continue
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                shell.run_line_magic(name, "--help")
            help_text = out.getvalue()
            assert "usage:" in help_text, f"%{name} --help printed no usage: {help_text!r}"
            found[prefix + name] = (help_text, kind)
    return found


def magic_surface() -> dict[str, tuple[set[str], set[str]]]:
    """'%name' / '%%name' -> (flags from its --help, kinds)."""
    return {key: (option_names(help_text), {kind}) for key, (help_text, kind) in magic_help().items()}


# ------------------------------------------------------------------ reading the markdown


def doc_files() -> list[Path]:
    return [p for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))] if p.is_file()]


@dataclass
class Snippet:
    where: str
    text: str
    lang: str = ""  # fenced block language; "" for inline code


def code_snippets(path: Path, text: str | None = None) -> list[Snippet]:
    """Fenced blocks (with their language) and inline code spans, with file:line for messages."""
    text = path.read_text(encoding="utf-8") if text is None else text
    snippets: list[Snippet] = []
    block: list[str] = []
    in_block, lang, start = False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*(```+|~~~+)\s*([\w+-]*)", line)
        if fence:
            if in_block:
                snippets.append(Snippet(f"{path.name}:{start}", "\n".join(block), lang or "text"))
                in_block = False
            else:
                in_block, lang, start, block = True, fence.group(2).lower(), number, []
            continue
        if in_block:
            block.append(line)
        else:
            for span in re.findall(r"(`+)(.+?)\1", line):
                snippets.append(Snippet(f"{path.name}:{number}", span[1].strip()))
    return snippets


def _split_commands(line: str) -> list[list[str]]:
    """Shell-ish tokens of each `paddle-nbext ...` command in a line of code."""
    commands = []
    for match in re.finditer(rf"(?<![\w/.-]){re.escape(CLI)}(?![\w\[/:=@.-])", line):
        if not COMMAND_START.search(line[: match.start()]):
            continue
        rest = re.split(r"\s(?:\||&&|;|#)\s|[`)]\s*$|\s#", line[match.end() :])[0]
        try:
            tokens = shlex.split(rest)
        except ValueError:
            tokens = rest.split()
        commands.append(tokens)
    return commands


# ------------------------------------------------------------------ the checks


def cli_problems(snippets: list[Snippet]) -> list[str]:
    surface = cli_surface()
    takes_value = {"--url", "--token", "--output", "-o"}
    problems = []
    for snippet in snippets:
        for line in snippet.text.splitlines():
            for tokens in _split_commands(line.strip()):
                index, command = 0, None
                while index < len(tokens) and tokens[index].startswith("-"):
                    flag = tokens[index].split("=")[0]
                    if flag not in surface.global_flags:
                        problems.append(f"{snippet.where}: `{CLI} {flag}` is not an option of {CLI}")
                    index += 2 if flag in takes_value and "=" not in tokens[index] else 1
                if index < len(tokens):
                    command = tokens[index]
                if command is None:
                    continue
                if re.fullmatch(r"[A-Z][A-Z_]*", command):  # a placeholder: `paddle-nbext COMMAND --help`
                    continue
                names = command.split("|")
                for name in names:
                    if name not in surface.commands:
                        problems.append(f"{snippet.where}: `{CLI} {name}` is not a command (commands: {', '.join(surface.commands)})")
                for position, token in enumerate(tokens[index + 1 :], index + 1):
                    for flag in OPTION.findall(token.split("=")[0]) if token.startswith("-") else []:
                        for name in names:
                            valid = surface.commands.get(name, set()) | surface.global_flags
                            if name in surface.commands and flag not in valid:
                                problems.append(f"{snippet.where}: `{CLI} {name} {flag}`: no such option")
                            allowed = surface.choices.get(name, {}).get(flag, set())
                            value = (
                                token.partition("=")[2] if "=" in token else (tokens[position + 1] if position + 1 < len(tokens) else "")
                            )
                            for one in value.split("|") if allowed and not re.search(r"[A-Z<$]", value) else []:
                                if one not in allowed:
                                    problems.append(f"{snippet.where}: `{CLI} {name} {flag} {one}`: not one of {sorted(allowed)}")
    return problems


def magic_problems(snippets: list[Snippet]) -> list[str]:
    magics = magic_surface()
    problems = []
    for snippet in snippets:
        if snippet.lang in ("bash", "sh", "shell", "console", "yaml", "json", "text") and "%" not in snippet.text:
            continue
        for line in snippet.text.splitlines():
            for match in MAGIC.finditer(line):
                prefix, name = match.groups()
                key = prefix + name
                if key not in magics:
                    problems.append(f"{snippet.where}: `{key}` is not a magic (magics: {', '.join(sorted(magics))})")
                    continue
                flags, _ = magics[key]
                rest = re.split(r"(?<!\S)(?:%|#)|`", line[match.end() :])[0]
                try:
                    tokens = shlex.split(rest)
                except ValueError:
                    tokens = rest.split()
                choices = option_choices(magic_help()[key][0])
                for position, token in enumerate(tokens):
                    flag = token.split("=")[0]
                    if not OPTION.fullmatch(flag):
                        continue
                    if flag not in flags:
                        problems.append(f"{snippet.where}: `{key} {flag}`: no such flag")
                    value = token.partition("=")[2] if "=" in token else (tokens[position + 1] if position + 1 < len(tokens) else "")
                    for one in value.split("|") if flag in choices and not re.search(r"[A-Z<$]", value) else []:
                        if one not in choices[flag]:
                            problems.append(f"{snippet.where}: `{key} {flag} {one}`: not one of {sorted(choices[flag])}")
    return problems


def _walk_config(data: Any, where: str, problems: list[str]) -> None:
    classes = config_classes()
    if isinstance(data, dict):
        for key, value in data.items():
            if key in OWN_CLASSES:
                if not isinstance(value, dict):
                    problems.append(f"{where}: `{key}` config must be a mapping of traits")
                    continue
                for trait in value:
                    if trait not in classes[key]:
                        problems.append(f"{where}: `{key}.{trait}` is not a configurable trait of {key}")
            else:
                _walk_config(value, where, problems)
    elif isinstance(data, list):
        for item in data:
            _walk_config(item, where, problems)


def config_problems(path: Path, text: str | None = None) -> list[str]:
    text = path.read_text(encoding="utf-8") if text is None else text
    classes = config_classes()
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for cls, trait in CONFIG_NAME.findall(line):
            if cls not in classes:
                problems.append(f"{path.name}:{number}: `c.{cls}` is not a class this project documents ({', '.join(classes)})")
            elif trait not in classes[cls]:
                problems.append(f"{path.name}:{number}: `c.{cls}.{trait}` is not a configurable trait of {cls}")
    for snippet in code_snippets(path, text):
        if snippet.lang in ("json", "yaml", "yml"):
            try:
                data = json.loads(snippet.text) if snippet.lang == "json" else yaml.safe_load(snippet.text)
            except (ValueError, yaml.YAMLError) as error:
                problems.append(f"{snippet.where}: the {snippet.lang} block does not parse: {error}")
                continue
            _walk_config(data, snippet.where, problems)
    return problems


# ------------------------------------------------------------------ tests


def test_the_checks_catch_drift() -> None:
    """Each check reports a made-up command, flag, magic and trait (so a pass means something)."""
    fake = Path("fake.md")
    text = (
        "Run `paddle-nbext submit --trainers 2 --gpus 4` or `paddle-nbext show NAME`.\n"
        "`paddle-nbext logs NAME --role master`, `paddle-nbext logs NAME --role environment`.\n"
        "```python\n%%paddle_submit --trainers 2 --replicas 3\n%paddle_status NAME\n%paddle_logs NAME --role master\n```\n"
        "Set `c.KubernetesBackend.namespaces` and `c.PaddleNbext.backend`.\n"
        "```yaml\nPaddleNbext:\n  max_gpus: 2\n```\n"
    )
    snippets = code_snippets(fake, text)
    cli = cli_problems(snippets)
    assert any("--gpus" in p for p in cli) and any("`paddle-nbext show`" in p for p in cli), cli
    assert not any("--trainers" in p for p in cli), cli
    assert any("--role master" in p for p in cli) and not any("--role environment" in p for p in cli), cli
    magics = magic_problems(snippets)
    assert any("--replicas" in p for p in magics) and any("%paddle_status" in p for p in magics), magics
    assert any("--role master" in p for p in magics), magics
    config = config_problems(fake, text)
    assert any("namespaces" in p for p in config) and any("max_gpus" in p for p in config), config
    assert not any("PaddleNbext.backend" in p for p in config), config


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: p.name)
def test_every_command_magic_and_config_name_in_the_docs_exists(path: Path) -> None:
    snippets = code_snippets(path)
    problems = cli_problems(snippets) + magic_problems(snippets) + config_problems(path)
    assert not problems, "\n".join(problems)


def test_guides_cover_the_whole_surface() -> None:
    """The user guide names every magic flag and CLI command; the admin guide every trait."""
    user = USER_GUIDE.read_text(encoding="utf-8")
    missing = [
        f"{magic} {flag}"
        for magic, (flags, _) in magic_surface().items()
        for flag in sorted(flags)
        if flag not in ("-h", "--help") and flag not in user
    ]
    missing += [f"{magic}" for magic in magic_surface() if magic not in user]
    missing += [f"{CLI} {name}" for name in cli_surface().commands if f"{CLI} {name}" not in user]
    assert not missing, "docs/user-guide.md does not mention: " + ", ".join(missing)
    admin = ADMIN_GUIDE.read_text(encoding="utf-8")
    classes = config_classes()
    undocumented = [
        f"c.{cls}.{trait}"
        for cls in OWN_CLASSES
        for trait in sorted(classes[cls])
        if f"c.{cls}.{trait}" not in admin and trait not in ("log",)
    ]
    assert not undocumented, "docs/admin-guide.md does not document: " + ", ".join(undocumented)


def test_admin_guide_object_listing_matches_the_manifests() -> None:
    """The `kubectl get` listing in the admin guide is what the manifest builder makes for the
    job it describes (names, kinds, roles, completions, resources, accounts)."""
    from paddle_nbext.model.spec import JobSpec
    from paddle_nbext_server.backends.kubernetes.build import manifests
    from paddle_nbext_server.backends.kubernetes.build.home_volume import HomeVolume
    from paddle_nbext_server.backends.kubernetes.settings import ManifestSettings
    from paddle_nbext_server.jobfiles.runtime_files import read_bundle

    text = ADMIN_GUIDE.read_text(encoding="utf-8")
    section = text.split("## A job's objects", 1)[1].split("\n## ", 1)[0]
    listing = section.split("```console\n", 1)[1].split("```", 1)[0]
    flags = re.search(r"`(--job-name .*?)`", section)
    assert flags, "the section names the dry run's flags"
    tokens = shlex.split(flags.group(1))
    fields = {tokens[i][2:].replace("-", "_"): tokens[i + 1] for i in range(0, len(tokens), 2)}
    spec = JobSpec.from_dict({"entry_point": "python train.py", **fields})
    objects = manifests.build_plan(
        spec,
        "alice",
        ManifestSettings(namespace="jupyter-alice", default_image="paddlepaddle/paddle:3.0.0", home_path="/home/jovyan"),
        home=HomeVolume({"persistentVolumeClaim": {"claimName": "claim-alice"}}, "/home/jovyan"),
        workdir=f"/home/jovyan/.paddle-jobs/{spec.job_name}/package",
        runtime=read_bundle(),
    )
    kinds = {"ConfigMap": "configmap", "Service": "service", "Job": "job.batch"}
    expected = {f"{kinds[o['kind']]}/{o['metadata']['name']}": o for o in objects}
    listed = dict(re.findall(r"^((?:configmap|service|job\.batch)/\S+)\s+(.*)$", listing, flags=re.M))
    assert set(listed) == set(expected), f"listing {sorted(listed)} != manifests {sorted(expected)}"
    for name, row in listed.items():
        obj = expected[name]
        assert row.split()[-1] == obj["metadata"]["labels"]["paddle-nbext/role"], name
        if obj["kind"] == "Job":
            assert f"0/{obj['spec']['completions']}" in row.split(), name
        if obj["kind"] == "ConfigMap":
            assert row.split()[0] == str(len(obj["data"])), name
    jobs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Job"}
    rows = re.findall(r"^([a-z0-9-]+-(?:master|pserver|trainer))\s+(.*)$", listing, flags=re.M)
    assert {name for name, _ in rows} == set(jobs), rows
    for name, row in rows:
        job = jobs[name]
        pod = job["spec"]["template"]["spec"]
        resources = pod["containers"][0]["resources"]
        cells = row.split()
        assert cells == [
            job["spec"].get("completionMode", "NonIndexed"),
            str(job["spec"].get("backoffLimit", "<none>")),
            resources["requests"]["cpu"],
            resources["limits"]["memory"],
            str(resources["limits"].get("nvidia.com/gpu", "<none>")),
            pod.get("serviceAccountName", "<none>"),
        ], f"{name}: {cells}"


def _tracked_sources() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.py", "*.ts", "*.md", "*.sh", "*.json"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [ROOT / name for name in listed.stdout.split() if "gomod/" not in name and name != "CHANGELOG.md"]


def test_every_document_the_code_cites_is_in_the_repo() -> None:
    """Facts the code relies on live in docs/: a citation of a design card's section or of a fact
    sheet that only exists outside the repository is a dead end for the next reader, and every
    `docs/<name>.md` named anywhere must exist."""
    outside = re.compile(r"\bDESIGN §\d|(?<![/\w])(?:paddle|k8s)-facts\b(?!\.md)|(?<![/\w])jupyter-build\.md")
    cited = re.compile(r"\bdocs/([\w-]+\.md)")
    problems = []
    for path in _tracked_sources():
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(ROOT)
        problems += [f"{rel}: cites {m.group(0)!r}, which is not in the repo" for m in outside.finditer(text)]
        problems += [
            f"{rel}: cites docs/{name}, which does not exist" for name in cited.findall(text) if not (ROOT / "docs" / name).is_file()
        ]
    assert not problems, "\n".join(problems)
