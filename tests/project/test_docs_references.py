"""What the docs point at must be there: the files, REST calls, variables and settings they name.

tests/project/test_docs.py keeps the CLI commands, magics and `c.Class.trait` names honest; this
file does the same for the other things a reader copies out of README.md, docs/ and deploy/:
- every repository path (`deploy/rbac/notebook-role.yaml`, `tests/cluster/test_x.py::test_y`) and
  every relative Markdown link exists (build outputs, which git ignores, excepted), and every
  `#anchor` names a heading of its document;
- every `GET /jobs/{name}/logs?role=...` is an operation of the served OpenAPI document, with
  those query parameters;
- every `PADDLE_NBEXT_*` variable is read somewhere outside the docs;
- every long option given to a `scripts/...` or `examples/...` command is one the script handles;
- the plain-hub recipe's `PADDLE_NBEXT_HUB_*` list in the admin guide is the recipe's own, and the
  job settings shipped in deploy/jupyterhub are configurable traits.
CHANGELOG.md's released sections are history (they name files and calls as they were); the
section of the version being made is checked for commands, settings, REST calls and variables.
"""

from __future__ import annotations

import json
import re
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from .test_docs import _walk_config

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "deploy" / "README.md"]
#: docs/architecture.md speaks of a job's routes by their last part (`GET /usage`).
GUIDES = [path for path in DOCS if path.name != "architecture.md"]
TOP_DIRS = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and p.name not in (".git", ".venv") and not p.name.endswith("_cache"))
REPO_PATH = re.compile(rf"(?<![\w./~$-])((?:{'|'.join(map(re.escape, TOP_DIRS))})/[\w./*-]*(?:::\w+)?)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
REST_CALL = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE)\s+(?:\S*?paddle/api/v1)?(/[\w{}<>.-]+(?:/[\w{}<>.-]+)*)/?(\?[^\s`]*)?")
VARIABLE = re.compile(r"\bPADDLE_NBEXT_[A-Z0-9_]*[A-Z0-9]\b")
SCRIPT_CALL = re.compile(r"\b((?:scripts|examples)/[\w-]+\.(?:sh|py))\b([^`|;#\n]*)")
PYTHON_MODULE = re.compile(r"\bpython3? -m ((?:paddle_nbext_server|paddle_nbext|support|benchmarks)\b(?:\.\w+)*)")
#: Where the repo's importable top-level packages live.
PACKAGE_HOMES = {"paddle_nbext": ROOT, "paddle_nbext_server": ROOT / "server_ext", "support": ROOT / "tests", "benchmarks": ROOT}


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def ignored(path: Path) -> bool:
    """A build output or cache git ignores (`paddle_nbext/labextension/`, `dist/...`), as a file
    or as a directory (a pattern ending in `/` matches only that)."""
    return any(subprocess.run(["git", "check-ignore", "-q", "--no-index", f"{path}{end}"], cwd=ROOT).returncode == 0 for end in ("", "/"))


def path_problem(where: str, target: Path, node: str | None = None) -> str | None:
    if "*" in target.name:
        if any(target.parent.glob(target.name)) or ignored(target.parent / target.name.replace("*", "x")):
            return None
        return f"{where}: `{rel(target)}` matches no file"
    if not target.exists():
        return None if ignored(target) else f"{where}: `{rel(target)}` does not exist"
    if node and not re.search(rf"^\s*(?:async\s+)?def {node}\(|^class {node}\b", target.read_text(encoding="utf-8"), flags=re.M):
        return f"{where}: `{rel(target)}` has no test `{node}`"
    return None


def headings(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    anchors: set[str] = set()
    in_block = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.match(r"^\s*(```|~~~)", line):
            in_block = not in_block
        elif not in_block and (heading := re.match(r"^#+\s+(.*?)\s*#*$", line)):
            text = re.sub(r"[`*_]|\[([^]]*)\]\([^)]*\)", r"\1", heading.group(1)).lower()
            anchors.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return anchors


def numbered_lines(path: Path) -> list[tuple[str, str]]:
    return [(f"{rel(path)}:{n}", line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]


def path_problems(doc: Path, lines: list[tuple[str, str]]) -> list[str]:
    problems: list[str | None] = []
    for where, line in lines:
        for name in REPO_PATH.findall(line):
            name = name.rstrip(".,:;")
            if re.search(r"[<>{}]|\.\.\.", name):
                continue  # a pattern, not a path: `~/.paddle-jobs/<job>/logs`, `tests/...`
            file, _, node = name.partition("::")
            problems.append(path_problem(where, ROOT / file, node or None))
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            linked = (doc.parent / file).resolve() if file else doc
            problems.append(path_problem(where, linked))
            if anchor and linked.suffix == ".md" and linked.exists() and anchor not in headings(linked):
                problems.append(f"{where}: `#{anchor}` is no heading of {rel(linked)}")
    if doc.parent.name == "deploy":  # deploy/README.md names its files relative to deploy/
        for where, line in lines:
            for name in re.findall(r"`([\w-]+/[\w./-]+\.(?:yaml|py|json))`", line):
                problems.append(path_problem(where, doc.parent / name))
    return [problem for problem in problems if problem]


def test_the_path_check_catches_drift() -> None:
    lines = [
        ("fake.md:1", "See `deploy/rbac/notebook-role.yaml`, `deploy/rbac/gone.yaml` and `~/.paddle-jobs/<job>/logs`."),
        ("fake.md:2", "Run `tests/project/test_docs.py::test_no_such_test`; [admin](admin-guide.md#no-such-heading)."),
        (
            "fake.md:3",
            "[RBAC](admin-guide.md#rbac-shipped-in-deployrbac), [built](../paddle_nbext/labextension/), `dist/paddle_nbext-*.whl`.",
        ),
    ]
    problems = path_problems(ROOT / "docs" / "fake.md", lines)
    assert [p.split(":")[1] for p in problems] == ["1", "2", "2"], problems
    assert "gone.yaml" in problems[0] and "test_no_such_test" in problems[1] and "no-such-heading" in problems[2], problems


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_every_path_and_link_the_docs_name_exists(doc: Path) -> None:
    problems = path_problems(doc, numbered_lines(doc))
    assert not problems, "\n".join(problems)


def openapi_operations() -> dict[str, dict[str, set[str]]]:
    """'/jobs/{}/logs' -> {'get': {'role', 'index', ...}} from the OpenAPI document the server serves."""
    document = json.loads((ROOT / "server_ext" / "paddle_nbext_server" / "openapi.json").read_text(encoding="utf-8"))
    operations: dict[str, dict[str, set[str]]] = {}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and method in ("get", "post", "put", "patch", "delete"):
                query = {p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"}
                operations.setdefault(re.sub(r"\{\w+\}", "{}", path), {})[method] = query
    return operations


def rest_problems(lines: list[tuple[str, str]]) -> list[str]:
    operations = openapi_operations()
    problems: list[str] = []
    for where, line in lines:
        for method, path, query in REST_CALL.findall(line):
            key = re.sub(r"\{[^}]*\}|<[^>]*>|(?<=^/jobs/)[A-Z]+\b|(?<=^/environments/)[A-Z]+\b", "{}", path)
            if key not in operations or method.lower() not in operations[key]:
                problems.append(f"{where}: `{method} {path}` is not an operation of the API ({', '.join(sorted(operations))})")
                continue
            for name in re.findall(r"[?&\[]([a-z_]+)=", query or ""):
                if name not in operations[key][method.lower()]:
                    problems.append(f"{where}: `{method} {path}` takes no query parameter `{name}`")
    return problems


def test_the_rest_check_catches_drift() -> None:
    problems = rest_problems(
        [
            ("fake.md:1", "`GET /jobs/{name}/log` and `DELETE /jobs/<job>?keep=true`, `GET /metrics`"),
            ("fake.md:2", "`POST /jobs?dry_run=true`"),
        ]
    )
    assert [p.split("`")[1] for p in problems] == ["GET /jobs/{name}/log", "DELETE /jobs/<job>", "GET /metrics"], problems


@pytest.mark.parametrize("doc", GUIDES, ids=rel)
def test_every_rest_call_in_the_docs_is_served(doc: Path) -> None:
    problems = rest_problems(numbered_lines(doc))
    assert not problems, "\n".join(problems)


@lru_cache(maxsize=1)
def _code_texts() -> dict[str, str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    texts: dict[str, str] = {}
    for name in listed:
        path = ROOT / name
        if path.suffix in (".md", ".png", ".ipynb") or name.endswith("package-lock.json") or not path.is_file():
            continue
        texts[name] = path.read_text(encoding="utf-8", errors="replace")
    return texts


def test_every_variable_the_docs_name_is_read() -> None:
    code = "\n".join(_code_texts().values())
    problems = [
        f"{where}: `{name}` appears in no code, script or manifest"
        for doc in [*DOCS, ROOT / "benchmarks" / "README.md"]
        if doc.exists()
        for where, line in numbered_lines(doc)
        for name in VARIABLE.findall(line)
        if not re.search(rf"\b{name}\b", code)
    ]
    assert not problems, "\n".join(problems)


def script_text(path: Path) -> str:
    """The script and the Python modules it hands its arguments to (`python -m support.controlplane "$@"`)."""
    text = path.read_text(encoding="utf-8")
    for module in re.findall(r"-m ([\w.]+)\b.*\"\$@\"", text):
        for base in (ROOT / "tests", ROOT):
            for candidate in (base / module.replace(".", "/") / "__main__.py", base / f"{module.replace('.', '/')}.py"):
                if candidate.is_file():
                    text += candidate.read_text(encoding="utf-8")
    return text


def test_every_script_option_the_docs_give_is_handled() -> None:
    problems: list[str] = []
    for doc in DOCS:
        for where, line in numbered_lines(doc):
            for script, rest in SCRIPT_CALL.findall(line):
                path = ROOT / script
                if not path.exists():
                    continue  # the path check reports it
                text = script_text(path)
                problems += [
                    f"{where}: `{script} {flag}`: the script has no {flag}"
                    for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", rest)
                    if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text)
                ]
    assert not problems, "\n".join(problems)


def test_the_admin_guide_lists_the_hub_recipes_settings() -> None:
    recipe = (ROOT / "deploy" / "jupyterhub" / "jupyterhub_config.py").read_text(encoding="utf-8")
    read = set(re.findall(r'\bsetting\("(\w+)"', recipe)) | set(re.findall(r'"PADDLE_NBEXT_HUB_(\w+)" in os\.environ', recipe))
    guide = (ROOT / "docs" / "admin-guide.md").read_text(encoding="utf-8")
    listing = guide.split("Site values come from `PADDLE_NBEXT_HUB_*` variables (", 1)[1].split(")", 1)[0]
    listed = set(re.findall(r"`(\w+)`", listing)) | {"EXTRA_CONFIG"}
    assert listed == read, f"the admin guide lists {sorted(listed - read)} the recipe does not read and not {sorted(read - listed)}"


def _shipped_settings() -> list[tuple[str, Any]]:
    values = yaml.safe_load((ROOT / "deploy" / "jupyterhub" / "values.yaml").read_text(encoding="utf-8"))
    site = yaml.safe_load((ROOT / "deploy" / "jupyterhub" / "paddle-nbext-site.yaml").read_text(encoding="utf-8"))
    shipped = [("deploy/jupyterhub/values.yaml", f["data"]) for f in values["singleuser"]["extraFiles"].values()]
    shipped += [(f"deploy/jupyterhub/paddle-nbext-site.yaml:{key}", json.loads(text)) for key, text in site["data"].items()]
    return shipped


def test_the_shipped_job_settings_are_configurable_traits() -> None:
    problems: list[str] = []
    shipped = _shipped_settings()
    for where, data in shipped:
        _walk_config(data, where, problems)
    assert not problems, "\n".join(problems)
    assert shipped[0][1] == shipped[1][1], "values.yaml and paddle-nbext-site.yaml are meant to ship the same job settings"


#: Settings whose default is worked out when the server starts; the reference says from what.
RUNTIME_DEFAULTS = {
    "PaddleNbext.home_dir": "`$HOME`",
    "LocalBackend.max_cpu": "`os.cpu_count()`",
    "LocalBackend.max_memory": "physical memory",
    "LocalBackend.python": "the server's Python",
    "KubernetesBackend.home_path": "`$HOME`",
    "KubernetesBackend.owner": "`$JUPYTERHUB_USER`",
    "KubernetesBackend.pod_name": "`$HOSTNAME`",
}


def test_the_configuration_reference_gives_each_settings_default_and_help() -> None:
    """The admin guide's "Configuration reference" rows say what the code says: the trait's
    default (or, for one worked out at start, where it comes from) and its help, word for word
    (backticks aside)."""
    from paddle_nbext_server.backends.kubernetes import KubernetesBackend
    from paddle_nbext_server.backends.local import LocalBackend
    from paddle_nbext_server.config import PaddleNbext
    from paddle_nbext_server.notify.admin import PaddleNbextNotifications

    classes = {
        cls.__name__: cls.class_traits(config=True) for cls in (PaddleNbext, PaddleNbextNotifications, LocalBackend, KubernetesBackend)
    }
    reference = (ROOT / "docs" / "admin-guide.md").read_text(encoding="utf-8").split("\n## Configuration reference", 1)[1]
    rows = re.findall(r"^\| `c\.(\w+)\.(\w+)` \| (.*?) \| (.*) \|$", reference, flags=re.M)
    problems: list[str] = []
    for cls, name, default, meaning in rows:
        trait = classes[cls][name]
        if f"{cls}.{name}" in RUNTIME_DEFAULTS:
            if default != RUNTIME_DEFAULTS[f"{cls}.{name}"] or trait.default():
                problems.append(f"c.{cls}.{name}: default {default}, the code's {trait.default()!r}")
        elif not default.startswith(f"`{trait.default()!r}`"):
            problems.append(f"c.{cls}.{name}: default {default}, the code's `{trait.default()!r}`")
        if meaning.replace("`", "") != " ".join((trait.help or "").split()).replace("`", ""):
            problems.append(f"c.{cls}.{name}: the reference says {meaning!r}, its help {trait.help!r}")
    documented = {(cls, name) for cls, name, _, _ in rows}
    problems += [f"c.{c}.{n} has no row" for c, traits in classes.items() for n in traits if n != "log" and (c, n) not in documented]
    assert not problems, "\n".join(problems)


def test_the_user_guides_field_table_is_the_job_model() -> None:
    """The user guide's "The job fields": one row per field of the job model, each with the
    field's own flag (the magics and the CLI take their flags from that model)."""
    from paddle_nbext.model.spec import JOB_FIELDS

    guide = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    table = guide.split("\n## The job fields", 1)[1].split("\n\n|", 1)[1].split("\n\n", 1)[0]
    documented: dict[str, set[str]] = {}
    for row in table.splitlines()[2:]:
        names, flags = row.split(" | ")[:2]
        found = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", flags))
        for name in re.findall(r"`(\w+)`", names):
            documented[name] = found
    fields = {row.name: row.info.flag for row in JOB_FIELDS}
    assert set(documented) == set(fields), f"rows for no field: {set(documented) - set(fields)}; no row: {set(fields) - set(documented)}"
    wrong = [f"{name}: {sorted(flags)} (the model's {fields[name]})" for name, flags in documented.items() if fields[name] not in flags]
    assert not wrong, "\n".join(wrong)


def test_every_python_module_the_docs_run_exists() -> None:
    """`python -m paddle_nbext_server.codegen.openapi_gen` and the like name a module of the repo that can run."""
    problems: list[str] = []
    for doc in DOCS:
        for where, line in numbered_lines(doc):
            for module in PYTHON_MODULE.findall(line):
                base = PACKAGE_HOMES[module.split(".")[0]] / module.replace(".", "/")
                if not (base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()):
                    problems.append(f"{where}: `python -m {module}`: no such module in the repo")
    assert not problems, "\n".join(problems)


#: `(admin guide: "CephFS homes")`, `the README's "Flaky tests"`: a section of another document by name.
SECTION_REFERENCE = re.compile(r"\b(README|[Aa]dmin guide|[Uu]ser guide|architecture(?:\.md)?|CHANGELOG)(?:'s|:|,)?\s+\"([^\"]+)\"")
SECTION_DOCS = {
    "readme": "README.md",
    "admin guide": "docs/admin-guide.md",
    "user guide": "docs/user-guide.md",
    "architecture": "docs/architecture.md",
    "changelog": "CHANGELOG.md",
}


def section_names(path: Path) -> list[str]:
    """A document's headings and bold paragraph leads (`**Flaky tests.**`), lower-cased, without markup."""
    text = path.read_text(encoding="utf-8")
    names = re.findall(r"^#+\s+(.*)$", text, flags=re.M) + re.findall(r"\*\*([^*]+?)\*\*", text)
    return [" ".join(re.sub(r"[`*]", "", name).split()).lower() for name in names]


def test_every_section_the_docs_refer_to_by_name_exists() -> None:
    names = {key: section_names(ROOT / path) for key, path in SECTION_DOCS.items()}
    problems: list[str] = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in SECTION_REFERENCE.finditer(text.replace("\n", " ")):
            doc, section = match.group(1).lower().removesuffix(".md"), " ".join(match.group(2).split())
            if not any(section.lower().strip(" .") in name for name in names[doc]):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f'{rel(path)}:{line}: {match.group(1)} "{section}" names no heading of {SECTION_DOCS[doc]}')
    assert not problems, "\n".join(problems)


def test_the_settings_named_in_deploy_examples_and_scripts_exist() -> None:
    """`c.KubernetesBackend.gang_scheduler` in a manifest's comment, a recipe or a script is a real
    setting (the classes of paddle-nbext; a hub's own, KubeSpawner's, are the recipe test's)."""
    from .test_docs import CONFIG_NAME, OWN_CLASSES, config_classes

    classes = config_classes()
    problems = [
        f"{name}:{number}: `c.{cls}.{trait}` is not a configurable trait of {cls}"
        for name, text in _code_texts().items()
        if name.startswith(("deploy/", "examples/", "binder/", "scripts/", "jupyter-config/"))
        for number, line in enumerate(text.splitlines(), 1)
        for cls, trait in CONFIG_NAME.findall(line)
        if cls in OWN_CLASSES and trait not in classes[cls]
    ]
    assert not problems, "\n".join(problems)


def test_the_changelogs_coming_version_names_what_exists() -> None:
    """The CHANGELOG's section of the version being made (above the first released one) describes
    today's code: its commands, magics, settings, REST calls and variables exist. (Paths are left
    out: it names files that moved.)"""
    from .test_docs import cli_problems, code_snippets, config_problems, magic_problems

    changelog = ROOT / "CHANGELOG.md"
    coming = re.split(r"\n## \[\d+\.\d+\.\d+\] - \d{4}-\d\d-\d\d\n", changelog.read_text(encoding="utf-8"), maxsplit=1)[0]
    snippets = code_snippets(changelog, coming)
    lines = [(f"CHANGELOG.md:{n}", line) for n, line in enumerate(coming.splitlines(), 1)]
    code = "\n".join(_code_texts().values())
    problems = cli_problems(snippets) + magic_problems(snippets) + config_problems(changelog, coming) + rest_problems(lines)
    problems += [f"{where}: `{name}` appears in no code" for where, line in lines for name in VARIABLE.findall(line) if name not in code]
    assert not problems, "\n".join(problems)


def documented_signatures() -> list[tuple[str, str, str, str]]:
    """(where, owner, name, parameters) of the user guide's API lists: `- `pn.submit(...)``,
    `  - `wait(...)`` under `pn.Job(name)`, `- **`save_checkpoint(...)`**` (paddle_nbext_job)."""
    found: list[tuple[str, str, str, str]] = []
    for where, line in numbered_lines(ROOT / "docs" / "user-guide.md"):
        for owner, pattern in (
            ("paddle_nbext", r"^- `pn\.(\w+)\((.*?)\)`"),
            ("Job", r"^  - `(\w+)\((.*?)\)`"),
            ("Job", r"^  - `\w+\(.*?\)` / `(\w+)\((.*?)\)`"),
            ("paddle_nbext_job", r"^- \*\*`(\w+)\((.*?)\)`\*\*"),
        ):
            if match := re.match(pattern, line):
                found.append((where, owner, match.group(1), match.group(2)))
    return found


def signature_problems(where: str, function: Any, documented: str, *, complete: bool) -> list[str]:
    """The documented parameters are the function's (names, kinds, defaults where given); with
    `complete`, all of them (the name of `**kwargs` aside)."""
    import ast
    import inspect

    tree = ast.parse(f"def f({documented}): pass").body[0]
    assert isinstance(tree, ast.FunctionDef)
    args = tree.args
    doc_defaults = dict(zip([a.arg for a in args.args][::-1], args.defaults[::-1], strict=False))
    doc_defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
    said = [(a.arg, "positional") for a in args.args] + [(a.arg, "keyword") for a in args.kwonlyargs]
    real = [p for p in inspect.signature(function).parameters.values() if p.name != "self"]
    kinds = {
        p.name: ("keyword" if p.kind is p.KEYWORD_ONLY else "positional") for p in real if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }
    problems: list[str] = []
    for name, kind in said:
        if kinds.get(name) != kind:
            problems.append(f"{where}: `{function.__name__}`: `{name}` is {kinds.get(name, 'no parameter')}, the docs say {kind}")
        elif name in doc_defaults:
            default = inspect.signature(function).parameters[name].default
            if default is inspect.Parameter.empty or ast.literal_eval(doc_defaults[name]) != default:
                problems.append(f"{where}: `{function.__name__}({name}=...)`: the default is {default!r}")
    positional = [name for name, kind in said if kind == "positional"]
    if positional != [name for name in kinds if kinds[name] == "positional"][: len(positional)]:
        problems.append(f"{where}: `{function.__name__}`: positional parameters {positional} are not the function's first ones")
    missing = [p.name for p in real if p.name not in dict(said) and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    missing = (
        missing
        if complete
        else [name for name in missing if inspect.signature(function).parameters[name].default is inspect.Parameter.empty]
    )
    if missing:
        problems.append(f"{where}: `{function.__name__}` also takes {missing}")
    if complete and any(p.kind is p.VAR_KEYWORD for p in real) != (args.kwarg is not None):
        problems.append(f"{where}: `{function.__name__}`: `**` keyword arguments {'missing' if args.kwarg is None else 'not taken'}")
    return problems


def test_the_user_guides_api_signatures_are_the_codes() -> None:
    import paddle_nbext
    from paddle_nbext_server.runtime import paddle_nbext_job

    owners = {"paddle_nbext": paddle_nbext, "Job": paddle_nbext.Job, "paddle_nbext_job": paddle_nbext_job}
    documented = documented_signatures()
    assert {owner for _, owner, _, _ in documented} == set(owners), documented
    problems: list[str] = []
    for where, owner, name, parameters in documented:
        function = getattr(owners[owner], name, None)
        if function is None:
            problems.append(f"{where}: {owner} has no `{name}`")
            continue
        # A class (`pn.Job(name)`) and the job module's helpers are documented with what users pass.
        complete = owner != "paddle_nbext_job" and not isinstance(function, type)
        problems += signature_problems(where, function, parameters, complete=complete)
    assert not problems, "\n".join(problems)


def test_the_signature_check_catches_drift() -> None:
    import paddle_nbext

    wait = signature_problems("fake.md:1", paddle_nbext.Job.wait, "timeout=None, poll=2.0", complete=True)
    assert any("default is 1.0" in p for p in wait) and any("on_status" in p for p in wait), wait
    logs = signature_problems("fake.md:2", paddle_nbext.Job.logs, 'role="trainer", index=0, tail=None', complete=False)
    assert any("`tail` is keyword" in p for p in logs), logs


CHART = ROOT / "deploy" / "chart"


def test_every_deploy_manifest_parses() -> None:
    """The manifests the docs tell admins to `kubectl apply` are YAML of named Kubernetes objects
    (home.yaml's `${...}` are filled in by provision_home.py and parse as they are)."""
    problems: list[str] = []
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        if path.name.endswith("values.yaml") or CHART in path.parents:  # Helm values; the chart (tests/deploy renders it)
            continue
        try:
            documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
        except yaml.YAMLError as error:
            problems.append(f"{rel(path)}: {error}")
            continue
        problems += [
            f"{rel(path)}: a document without apiVersion, kind or metadata.name"
            for d in documents
            if not (d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name"))
        ]
        if not documents:
            problems.append(f"{rel(path)}: no object")
    assert not problems, "\n".join(problems)


def test_the_user_guides_request_limits_are_the_models() -> None:
    """The user guide's "Limits of a job request" gives the model's own bounds."""
    from paddle_nbext.model import rules

    guide = " ".join((ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8").split())
    paragraph = guide.split("**Limits of a job request**", 1)[1].split(" Names are yours alone", 1)[0]
    assert rules.DURATION_MAX_SECONDS == 2**31 - 1
    expected = [
        f"`job_name` {rules.NAME_MAX_LENGTH} characters",
        f"`entry_point` {rules.ENTRY_POINT_MAX_LENGTH:,} characters",
        f"`trainer_package` {rules.PATH_MAX_LENGTH:,} characters",
        f"`requirements` {rules.REQUIREMENTS_MAX_LENGTH} characters",
        f"`env` at most {rules.ENV_MAX_COUNT} variables and {rules.ENV_MAX_BYTES // 1024} KiB",
        f"at most {rules.NUMBER_TEXT_MAX_LENGTH} characters",
        "at most 2³¹−1 seconds",
        f"at most {rules.ENTRY_SCRIPT_MAX_BYTES // 2**20} MiB",
    ]
    missing = [text for text in expected if text not in paragraph]
    assert not missing, f"the user guide's request limits do not say {missing}:\n{paragraph}"


def test_the_runtime_files_the_admin_guide_names_are_shipped() -> None:
    """The admin guide's "A job's objects" names files of the runtime ConfigMap: each is in the bundle."""
    from paddle_nbext_server.jobfiles import runtime_files
    from paddle_nbext_server.jobfiles.runtime_files import read_bundle

    guide = (ROOT / "docs" / "admin-guide.md").read_text(encoding="utf-8")
    item = guide.split("- ConfigMap `paddle-nbext-runtime-", 1)[1].split("\n- ", 1)[0]
    named = set(re.findall(r"`([\w/]+\.py)`", item))
    assert named and "runtime_files.NAMES" in item and hasattr(runtime_files, "NAMES"), item
    assert named <= set(read_bundle()), f"not in the runtime bundle: {sorted(named - set(read_bundle()))}"


#: Files the docs name that are the user's or the site's, not the repo's.
NOT_OURS = {"jupyter_server_config.py", "paddle_entry.py"}
SOURCE_NAME = re.compile(r"`([\w./-]+\.(?:py|ts|tsx))`")


@lru_cache(maxsize=1)
def tracked_files() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def source_name_problems(lines: list[tuple[str, str]], tracked: list[str]) -> list[str]:
    """A source file the docs name in backticks by a tail of its path (`master/forked.py`,
    `state.ts`) is a file of the repo; the job bundle's `pylib/` paths are the runtime's modules."""
    problems = []
    for where, line in lines:
        for name in SOURCE_NAME.findall(line):
            tail = name.removeprefix("./").removeprefix("pylib/")
            if tail in NOT_OURS or "*" in tail:
                continue
            if not any(path == tail or path.endswith("/" + tail) for path in tracked):
                problems.append(f"{where}: `{name}` is no file of the repo")
    return problems


def test_the_source_name_check_catches_drift() -> None:
    lines = [("fake.md:1", "`master/forked.py`, `health_events.py`, `paddle_entry.py`, `views/gone.ts`, `pylib/paddle_nbext_job.py`")]
    problems = source_name_problems(lines, tracked_files())
    assert len(problems) == 2 and "health_events.py" in problems[0] and "gone.ts" in problems[1], problems


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_every_source_file_the_docs_name_exists(doc: Path) -> None:
    problems = source_name_problems(numbered_lines(doc), tracked_files())
    assert not problems, "\n".join(problems)


#: `(docs/admin-guide.md: "Upgrading")`, `(docs/development.md: "Running the tests")`: a comment or message of
#: the code pointing at a section of a document, maybe wrapped over comment lines.
CODE_SECTION_REFERENCE = re.compile(r"\((README|docs/[\w-]+\.md):\s+\"([^\"]+)\"")


def test_every_section_the_code_cites_by_name_exists() -> None:
    """A section the code sends its reader to is there: when a section moves (the README's set-up
    went to docs/development.md), the scripts and modules that cite it move with it."""
    problems: list[str] = []
    for name, text in _code_texts().items():
        flowing = re.sub(r"\n\s*(?:#+|//|\*)?\s*", " ", text)
        for document, section in CODE_SECTION_REFERENCE.findall(flowing):
            path = ROOT / ("README.md" if document == "README" else document)
            wanted = " ".join(section.split()).lower().strip(" .")
            if not path.is_file() or not any(wanted in heading for heading in section_names(path)):
                problems.append(f'{name}: cites {document} "{section}", which names no heading of {rel(path)}')
    assert not problems, "\n".join(problems)
