"""The guides are read to the end: each opens with its reader and a true contents list, its prose
is in short sentences and paragraphs, and what it says about the product is what the code does.

Two kinds of checks live here:
- shared checks every guide must pass, parametrized over `GUIDES` (a guide joins that list once it
  is written to them): the opening names its reader, the contents list is the `##` sections, the
  prose's mean sentence and longest paragraph stay within bounds (`readability()` measures them);
- the user guide's own facts, each compared with the code it describes: the magics the extension
  registers and every flag of each, how the package is installed, the Pythons the `paddle` extra
  installs on, what a Kueue preemption does to a job, parameter-server examples that serve.

`python -m tests.project.test_guides docs/user-guide.md ...` prints the figures of each file
(lines, words, sentences, mean sentence, longest paragraph) without running pytest.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER_GUIDE = ROOT / "docs" / "user-guide.md"
ADMIN_GUIDE = ROOT / "docs" / "admin-guide.md"

#: The guides the shared checks read. docs/admin-guide.md joins this list when it meets them.
GUIDES: list[Path] = [USER_GUIDE, ADMIN_GUIDE]

#: The bounds the shared readability check holds every guide to, in words (see `readability`).
MAX_MEAN_SENTENCE = 30
MAX_SENTENCE = 60
MAX_PARAGRAPH = 100

FENCE = re.compile(r"^\s*(```+|~~~+)")
HEADING = re.compile(r"^(#+)\s+(.*?)\s*#*$")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|etc|vs|cf)\.", flags=re.I)
#: A sentence ends at `.`, `!` or `?` (after any closing quotes or brackets) followed by white
#: space and something that starts a sentence: a capital, a digit, an opening quote or bracket.
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]*_]*\s+(?=[A-Z0-9\"'(*\[§])")


# ------------------------------------------------------------------ reading a guide as prose


def without_code_blocks(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, inside = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            lines.append(line)
    return lines


def prose_paragraphs(text: str) -> list[str]:
    """The guide's prose, one string per paragraph, as a reader meets it: fenced code blocks,
    tables, headings, images and HTML comments left out; each list item a paragraph of its own,
    without its marker; a link as its text; emphasis marks dropped. Code spans stay (a reader
    reads them), each turned into `§` words (one per word of the span) so that the dots and
    question marks inside code (`job.logs()`, `?tail=N`) never end a sentence."""
    paragraphs: list[list[str]] = []
    current: list[str] = []

    def close() -> None:
        if current:
            paragraphs.append(current.copy())
            current.clear()

    for line in without_code_blocks(re.sub(r"<!--.*?-->", "", text, flags=re.S)):
        stripped = line.strip()
        if not stripped or stripped.startswith("|") or HEADING.match(stripped) or re.fullmatch(r"(!\[[^\]]*\]\([^)]*\)\s*)+", stripped):
            close()
            continue
        if LIST_ITEM.match(line):
            close()
            line = LIST_ITEM.sub("", line, count=1)
        current.append(line.strip())
    close()
    return [_plain(" ".join(lines)) for lines in paragraphs]


def _plain(paragraph: str) -> str:
    """A paragraph's words without Markdown: code spans as `§` words, links as their text."""
    paragraph = CODE_SPAN.sub(lambda m: " ".join("§" for _ in m.group(2).split()) or "§", paragraph)
    paragraph = LINK.sub(r"\1", paragraph)
    paragraph = re.sub(r"\*\*|(?<!\w)[*_]|[*_](?!\w)", "", paragraph)
    return " ".join(paragraph.split())


def sentences(paragraph: str) -> list[str]:
    """A paragraph cut into sentences: at `.`, `!` or `?` followed by white space and a capital,
    a digit, an opening quote, bracket or code span, and at the paragraph's end. `e.g.`, `i.e.`,
    `etc.`, `vs.` and `cf.` end none; colons and semicolons end none either (a long list after a
    colon is one long sentence, as the reader meets it)."""
    masked = ABBREVIATIONS.sub(lambda m: m.group(1).replace(".", ""), paragraph)
    return [part for part in SENTENCE_END.split(masked) if part.strip()]


def word_count(text: str) -> int:
    return len(text.split())


@dataclass(frozen=True)
class Readability:
    lines: int
    words: int
    sentences: int
    longest_sentence: int
    longest_paragraph: int
    longest_paragraph_starts: str

    @property
    def mean_sentence(self) -> float:
        return self.words / self.sentences if self.sentences else 0.0

    def __str__(self) -> str:
        return (
            f"{self.lines} lines, {self.words} words of prose in {self.sentences} sentences: "
            f"{self.mean_sentence:.1f} words a sentence, the longest {self.longest_sentence}; longest paragraph {self.longest_paragraph} words "
            f"({self.longest_paragraph_starts!r}...)"
        )


def readability(text: str) -> Readability:
    """Words per sentence over the prose (see `prose_paragraphs` and `sentences` for what counts),
    the longest sentence and the longest paragraph, in words (white-space separated, a code span
    counting its own words)."""
    paragraphs = prose_paragraphs(text)
    counts = [word_count(p) for p in paragraphs]
    every = [word_count(s) for p in paragraphs for s in sentences(p)]
    longest = max(range(len(paragraphs)), key=counts.__getitem__) if paragraphs else None
    return Readability(
        lines=len(text.splitlines()),
        words=sum(counts),
        sentences=len(every),
        longest_sentence=max(every, default=0),
        longest_paragraph=counts[longest] if longest is not None else 0,
        longest_paragraph_starts=" ".join(paragraphs[longest].split()[:8]) if longest is not None else "",
    )


# ------------------------------------------------------------------ sections and the contents list


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: markup and punctuation dropped, lower case, spaces as `-`."""
    text = re.sub(r"[`*_]|\[([^]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def sections(text: str) -> list[str]:
    """The `##` headings, in order (not `#`, not `###`)."""
    return [m.group(2) for line in without_code_blocks(text) if (m := HEADING.match(line)) and len(m.group(1)) == 2]


def contents_links(text: str) -> list[tuple[str, str]]:
    """(text, anchor) of each link of the contents list: the links to `#anchors` above the first `##`."""
    head = text.split("\n## ", 1)[0]
    return [(name, target) for name, target in re.findall(r"\[([^\]]+)\]\(#([^)]+)\)", head)]


def opening(text: str) -> str:
    """The first paragraph after the title: what a reader sees first."""
    head = text.split("\n## ", 1)[0]
    return prose_paragraphs(head)[0] if prose_paragraphs(head) else ""


# ------------------------------------------------------------------ shared checks


def test_the_measure_cuts_sentences_where_a_reader_would() -> None:
    """Dots inside code, `e.g.` and file names end no sentence; tables, code and headings are not prose."""
    text = (
        "# Title\n\nRun `job.logs()` first, e.g. on the CLI. Then read `a.b.c`? Yes! 3 more\nwords here.\n\n"
        "| a | b |\n|---|---|\n| one. Two. | three. |\n\n```python\nprint('x. Y. Z.')\n```\n\n"
        "- **An item.** Its second sentence.\n- [A link](x.md). Done.\n"
    )
    paragraphs = prose_paragraphs(text)
    assert [len(sentences(p)) for p in paragraphs] == [4, 2, 2], paragraphs
    assert readability(text).words == 14 + 5 + 4, paragraphs


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_a_guide_opens_with_its_reader_and_its_contents(guide: Path) -> None:
    """One or two sentences say whom the guide is for; then the contents list: one link per `##`
    section, in order, each to that section's anchor."""
    text = guide.read_text(encoding="utf-8")
    first = opening(text)
    assert re.search(r"\bis for\b", first) and len(sentences(first)) <= 2, f"{guide.name} opens with {first!r}"
    links = contents_links(text)
    expected = [(name, anchor(name)) for name in sections(text)]
    assert [target for _, target in links] == [target for _, target in expected], (
        f"{guide.name}: the contents list links {[t for _, t in links]}, the sections are {[t for _, t in expected]}"
    )


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_a_guides_prose_is_in_short_sentences_and_paragraphs(guide: Path) -> None:
    figures = readability(guide.read_text(encoding="utf-8"))
    assert figures.mean_sentence <= MAX_MEAN_SENTENCE, f"{guide.name}: {figures}"
    assert figures.longest_sentence <= MAX_SENTENCE, f"{guide.name}: {figures}"
    assert figures.longest_paragraph <= MAX_PARAGRAPH, f"{guide.name}: {figures}"


# ------------------------------------------------------------------ the user guide's facts

NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def section(text: str, heading: str) -> str:
    """The text of the `##` section called `heading`, up to the next `##`."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def tables(text: str) -> list[list[str]]:
    """The Markdown tables of a text, each as its lines (header, rule, rows)."""
    found: list[list[str]] = []
    current: list[str] = []
    for line in [*without_code_blocks(text), ""]:
        if line.lstrip().startswith("|"):
            current.append(line)
        elif current:
            found.append(current)
            current = []
    return found


def registered_magics() -> dict[str, set[str]]:
    """Each magic the extension registers (`paddle_submit`, without `%`) -> the flags of its
    `--help`, from a real IPython shell after `%load_ext paddle_nbext`."""
    from .test_docs import magic_help, option_names

    return {key.lstrip("%"): option_names(help_text) - {"-h", "--help"} for key, (help_text, _) in magic_help().items()}


def magic_table_problems(text: str, magics: dict[str, set[str]]) -> list[str]:
    """Flags of a magic that its own table text in "The magics" leaves out: a table whose header
    names the magic is all its own; otherwise the rows whose first cell names it."""
    own: dict[str, str] = dict.fromkeys(magics, "")
    for table in tables(section(text, "The magics")):
        for name in magics:
            named = re.compile(rf"%%?{name}\b")
            if named.search(table[0]):
                own[name] += "\n".join(table)
            else:
                own[name] += "\n".join(row for row in table[2:] if named.search(row.split("|")[1]))
    return [
        f"%{name} {flag}"
        for name, flags in sorted(magics.items())
        for flag in sorted(flags)
        if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", own[name])
    ]


def test_the_magic_table_check_catches_a_missing_flag() -> None:
    text = (
        "\n## The magics\n\n| `%%paddle_submit` flag | does |\n|---|---|\n| `--job-name` | x |\n\n"
        "| magic | does |\n|---|---|\n| `%paddle_logs NAME` | `--role pserver`, `--rank-of` |\n"
    )
    problems = magic_table_problems(
        text, {"paddle_submit": {"--job-name", "--wait"}, "paddle_logs": {"--role", "--rank"}, "paddle_jobs": set()}
    )
    assert problems == ["%paddle_logs --rank", "%paddle_submit --wait"], problems


def test_the_user_guide_counts_and_names_the_magics_the_extension_registers() -> None:
    """ "registers N magics" is the number `%load_ext paddle_nbext` registers, and each is named."""
    magics = registered_magics()
    text = section(USER_GUIDE.read_text(encoding="utf-8"), "The magics")
    said = re.findall(r"registers (\w+) magics", text)
    assert said, "the user guide's magics section says how many magics `%load_ext paddle_nbext` registers"
    assert [NUMBER_WORDS.get(word, word) for word in said] == [len(magics)] * len(said), (
        f"the user guide says {said} magics, the extension registers {len(magics)}: {sorted(magics)}"
    )
    assert not [name for name in magics if not re.search(rf"%%?{name}\b", text)], sorted(magics)


def test_the_user_guide_tables_every_flag_of_every_magic() -> None:
    """Mentioned somewhere is not enough (tests/project/test_docs.py checks that): each magic's
    flags are in its own table in "The magics", where a reader looks them up."""
    problems = magic_table_problems(USER_GUIDE.read_text(encoding="utf-8"), registered_magics())
    assert not problems, "the user guide's magic tables leave out: " + ", ".join(problems)


def pip_installs(text: str) -> list[list[str]]:
    """The arguments of every `pip install` in a text's code (blocks and spans)."""
    commands = []
    for line in text.splitlines():
        for match in re.finditer(r"\bpip3? install\s+([^`#\n|;&]*)", line):
            commands.append(match.group(1).split())
    return commands


def index_installs(text: str, project: str) -> list[str]:
    """`pip install` arguments that ask a package index for the project itself (a requirement
    named after it) rather than a path: a clone (`.`, `".[paddle]"`) or a built wheel."""
    own = re.compile(rf"^[\"']?{re.escape(project)}(?:\[[^\]]*\])?(?:[=<>!~].*)?[\"']?$", flags=re.I)
    canonical = project.replace("_", "-").lower()
    return [
        " ".join(arguments)
        for arguments in pip_installs(text)
        for argument in arguments
        if own.match(argument.replace("_", "-").lower()) or argument.strip("\"'").lower().startswith(canonical + "[")
    ]


def test_the_guides_install_paddle_nbext_the_way_it_is_distributed() -> None:
    """paddle-nbext is installed from a clone or from a wheel built from one: no guide offers an
    index install of it, or promises one "once published"."""
    from importlib.metadata import metadata

    project = metadata("paddle-nbext")["Name"]
    assert index_installs('pip install "paddle-nbext[paddle]" jupyterlab', project), "the check sees an index install"
    assert not index_installs('pip install ".[paddle]" jupyterlab && pip install dist/paddle_nbext-*.whl', project)
    for guide in GUIDES:
        text = guide.read_text(encoding="utf-8")
        assert not index_installs(text, project), f"{guide.name} installs {project} from an index: {index_installs(text, project)}"
        assert "once published" not in text, f"{guide.name} promises an index release"


#: The CPython versions with a wheel of the `paddle` extra's pinned paddlepaddle, measured with
#: `pip download --no-deps paddlepaddle==V --python-version 3.N --only-binary=:all:` for 3.10..3.14
#: (3.14: no wheel). A new pin in pyproject.toml fails the test below until it is measured here.
PADDLE_WHEEL_PYTHONS = {"3.0.0": ("3.10", "3.11", "3.12", "3.13")}


def paddle_extra_pythons() -> tuple[str, str]:
    """(lowest, highest) Python the `paddle` extra installs on: the package's `Requires-Python`
    floor and the pinned paddlepaddle's wheels."""
    from importlib.metadata import metadata, requires

    pins = [re.search(r"paddlepaddle==([\w.]+)", r) for r in requires("paddle-nbext") or [] if 'extra == "paddle"' in r]
    versions = [pin.group(1) for pin in pins if pin]
    assert len(versions) == 1 and versions[0] in PADDLE_WHEEL_PYTHONS, f"measure the wheels of paddlepaddle {versions}"
    floor = re.fullmatch(r">=\s*(3\.\d+)", metadata("paddle-nbext")["Requires-Python"] or "")
    assert floor, "Requires-Python is a floor"
    wheels = [v for v in PADDLE_WHEEL_PYTHONS[versions[0]] if int(v.split(".")[1]) >= int(floor.group(1).split(".")[1])]
    return wheels[0], wheels[-1]


def test_the_user_guide_names_the_pythons_the_paddle_extra_installs_on() -> None:
    low, high = paddle_extra_pythons()
    installing = USER_GUIDE.read_text(encoding="utf-8").split("\n### Installing\n", 1)[1].split("\n### ", 1)[0]
    assert f"Python {low} to {high}" in " ".join(installing.split()), f"Installing names the Pythons of the paddle extra: {low} to {high}"
    for guide in GUIDES:
        open_ended = re.findall(r"Python 3\.\d+\+", guide.read_text(encoding="utf-8"))
        assert not open_ended, f"{guide.name} says {open_ended}: the paddle extra installs on Python {low} to {high} only"


def test_a_replica_readmitted_after_a_preemption_resumes_from_the_latest_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the guides say of a Kueue preemption is what the replicas do: Kueue suspends the job
    and admits it again later; the new pods keep the attempt label, started after the last save,
    and `resume_from()` names the latest checkpoint. So no guide says such a job runs again "from
    the start", and the one that says what happens names the latest checkpoint."""
    import time

    from paddle_nbext_server.runtime import paddle_nbext_checkpoints
    from paddle_nbext_server.runtime import paddle_nbext_job as job

    for name in (job.RESUME_VAR, job.RESUME_STEP_VAR):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(job.CHECKPOINT_DIR_VAR, str(tmp_path))
    monkeypatch.setenv(job.ATTEMPT_VAR, "0.")
    for step in (100, 200):
        with job.save_checkpoint(step, ranks=1) as directory:
            (Path(directory) / "model.pdparams").write_bytes(b"state")
    monkeypatch.setattr(paddle_nbext_checkpoints, "process_started", lambda: time.time() + 1)
    found = job.resume_from()
    assert found is not None and found.step == 200, found

    for guide in GUIDES:
        said = [s for p in prose_paragraphs(guide.read_text(encoding="utf-8")) for s in sentences(p) if "preempt" in s.lower()]
        said += [row for table in tables(guide.read_text(encoding="utf-8")) for row in table if "Preempted" in row]
        wrong = [s for s in said if re.search(r"from the (?:start|beginning)|from scratch", s)]
        assert not wrong, f"{guide.name}: a preempted job resumes from its latest checkpoint, not {wrong}"
    text = USER_GUIDE.read_text(encoding="utf-8")
    preemption = text.split("**Preemption.**", 1)[1].split("\n\n", 1)[0]
    assert "latest checkpoint" in preemption, preemption


def serves(block: str) -> bool:
    """Whether a PS job's code runs a parameter server: the block itself, or the script of
    examples/ its entry point runs, calls `run_server()`."""
    if "run_server(" in block:
        return True
    scripts = re.findall(r"python3? (?:-u )?(?:\S*/)?([\w-]+\.py)", block)
    return any(
        (ROOT / "examples" / name).is_file() and "run_server(" in (ROOT / "examples" / name).read_text(encoding="utf-8") for name in scripts
    )


def asks_for_pservers(block: str) -> bool:
    numbers = re.findall(r"--pservers[ =](\d+)|\bpservers=(\d+)", block)
    return any(int(a or b) > 0 for a, b in numbers) or bool(re.search(r"--mode[ =]ps\b|mode=[\"']ps[\"']", block))


def code_blocks(text: str) -> list[tuple[int, str]]:
    """(line of the fence, source) of each fenced block."""
    blocks: list[tuple[int, str]] = []
    current: list[str] | None = None
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            if current is None:
                current, start = [], number
            else:
                blocks.append((start, "\n".join(current)))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_the_never_served_check_knows_a_serving_example() -> None:
    assert asks_for_pservers('PaddleJob(job_name="fn-ps", pservers=1)') and not serves("fleet.init()\n...")
    assert serves('%paddle_submit --pservers 1 --package examples --entry "python ps_train.py --steps 60"')
    assert not serves('%paddle_submit --pservers 2 --entry "python train.py --epochs 3"')
    assert not asks_for_pservers("%%paddle_submit --trainers 2 --pservers 0")


def test_every_parameter_server_example_serves() -> None:
    """A parameter-server job whose pservers never serve ends "pserver 0 ended with exit code 0
    before the trainers finished": every example that asks for pservers must run a server."""
    wrong = [
        f"{USER_GUIDE.name}:{line}"
        for line, block in code_blocks(USER_GUIDE.read_text(encoding="utf-8"))
        if asks_for_pservers(block) and not serves(block)
    ]
    assert not wrong, "parameter-server examples that never serve: " + ", ".join(wrong)


# ------------------------------------------------------------------ the admin guide's facts

DEPLOY = ROOT / "deploy"
DEPLOY_README = DEPLOY / "README.md"
#: A folder holding one of these is one unit (a Helm chart, an npm project, an image's build
#: context): deploy/README.md may list it as a folder instead of file by file.
UNIT_MARKERS = ("Chart.yaml", "package.json", "Dockerfile")
#: What `home_volume = "cephfs"` needs to name a volume at all.
CEPHFS_HOME = {"monitors": ["10.0.0.1:6789"], "path": "/home/{username}"}


def modes_reading_the_notebook_pod() -> dict[str, bool]:
    """For each `home_volume` mode, whether getting a job's home ready reads the notebook's own pod
    (the Role's `get pods`): the backend's home setup run, in a notebook pod, against an API that
    refuses every call and notes what was asked."""
    import asyncio
    import contextlib
    import dataclasses
    import logging
    from typing import Any, cast

    from kubernetes.client.exceptions import ApiException
    from traitlets import Enum

    from paddle_nbext_server.backends.kubernetes import KubernetesBackend
    from paddle_nbext_server.backends.kubernetes.client.connection import Connection
    from paddle_nbext_server.backends.kubernetes.lifecycle.home_setup import HomeSetup
    from paddle_nbext_server.backends.kubernetes.settings import BackendSettings

    class RefusingApi:
        def __init__(self) -> None:
            self.asked: list[str] = []

        async def call(self, doing: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
            self.asked.append(doing)
            raise ApiException(status=403, reason="Forbidden")

    traits = KubernetesBackend.class_traits(config=True)
    defaults = {field.name: traits[field.name].default() for field in dataclasses.fields(BackendSettings)}
    reads: dict[str, bool] = {}
    modes = traits["home_volume"]
    assert isinstance(modes, Enum)
    for mode in modes.values or ():
        home = {"home_volume": mode, "pod_name": "jupyter-alice", "home_path": "/home/jovyan", "cephfs": CEPHFS_HOME}
        settings = BackendSettings(**{**defaults, **home})
        api = RefusingApi()
        setup = HomeSetup(settings, cast(Any, api), logging.getLogger(__name__))
        in_a_pod = Connection(api=cast(Any, None), namespace="jhub", source="in-cluster", host="", in_cluster=True)
        with contextlib.suppress(Exception):  # `auto` cannot go on without the pod: only what was asked matters
            asyncio.run(setup.home_volume("alice", in_a_pod))
        reads[str(mode)] = "read the notebook pod" in api.asked
    return reads


def says_get_pods(unit: str) -> bool:
    return bool(re.search(r"`get pods`|\bpods: get\b|`get` on the notebook pod", unit))


def test_the_admin_guide_names_every_home_mode_that_needs_get_pods() -> None:
    """Every `home_volume` mode reads the notebook's pod (its volume in `auto`, the uid and groups
    job pods copy in all): the RBAC section says so for each mode that does, and what a Role
    without `get pods` costs (the notebook's fsGroup)."""
    reads = modes_reading_the_notebook_pod()
    assert reads and all(isinstance(read, bool) for read in reads.values()), reads
    readers = sorted(mode for mode, read in reads.items() if read)
    assert readers, "no home mode reads the notebook pod: the RBAC row for `get pods` can go"
    rbac = ADMIN_GUIDE.read_text(encoding="utf-8").split("\n### RBAC", 1)[1].split("\n### ", 1)[0]
    units = [unit for unit in re.split(r"\n\s*\n|\n(?=\|)", rbac) if says_get_pods(unit)]
    assert units, "the RBAC section says what `get pods` is for"
    named = {mode for unit in units for mode in readers if re.search(rf"`{mode}`|\"{mode}\"", unit)}
    assert named == set(readers), f"the RBAC section ties `get pods` to {sorted(named)}; the backend reads the pod in {readers}"
    assert any("fsGroup" in unit for unit in units), "the RBAC section says job pods lose the notebook's fsGroup without `get pods`"


def deploy_files() -> list[str]:
    """The files under deploy/ as git sees them (tracked, or new and not ignored), relative to deploy/."""
    import subprocess

    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "deploy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted({str(Path(name).relative_to("deploy")) for name in listed if (ROOT / name).is_file()})


def unlisted_deploy_files(readme: str, files: list[str]) -> list[str]:
    """The files `readme` does not name: each by its path (`rbac/notebook-role.yaml`), or one of its
    folders holding a unit marker by the folder's path (`chart/`)."""
    named = set(re.findall(r"`([^`\s]+)`", readme))
    units = {str(Path(name).parent) + "/" for name in files if Path(name).name in UNIT_MARKERS}
    unlisted = []
    for name in files:
        folders = [str(parent) + "/" for parent in Path(name).parents if str(parent) != "."]
        if name == "README.md" or name in named or any(folder in named and folder in units for folder in folders):
            continue
        unlisted.append(name)
    return unlisted


def test_the_deploy_listing_check_catches_a_missing_file() -> None:
    files = ["README.md", "chart/Chart.yaml", "chart/templates/a.yaml", "rbac/a.yaml", "rbac/b.yaml"]
    assert unlisted_deploy_files("`chart/` · `rbac/a.yaml`", files) == ["rbac/b.yaml"]
    assert unlisted_deploy_files("`rbac/` · `chart/Chart.yaml`", files) == ["chart/templates/a.yaml", "rbac/a.yaml", "rbac/b.yaml"]


def test_deploy_readme_lists_every_file_under_deploy() -> None:
    files = deploy_files()
    assert "rbac/notebook-role.yaml" in files, files
    missing = unlisted_deploy_files(DEPLOY_README.read_text(encoding="utf-8"), files)
    assert not missing, f"deploy/README.md does not list {missing}"


def test_the_admin_guide_says_what_a_kueue_preemption_does() -> None:
    """The admin guide's "Preemption" tells what the replicas do when Kueue admits the job again:
    `resume_from()` (a function of the job's module) gives the latest checkpoint."""
    from paddle_nbext_server.runtime import paddle_nbext_job

    assert "resume_from" in paddle_nbext_job.__all__
    text = ADMIN_GUIDE.read_text(encoding="utf-8").split("**Preemption.**", 1)[1]
    preemption = " ".join(re.split(r"\n\n(?=\*\*|#)", text, maxsplit=1)[0].split())
    assert "latest checkpoint" in preemption and "resume_from()" in preemption, preemption


def test_the_admin_guides_troubleshooting_quotes_the_clusters_own_words() -> None:
    """The cluster's failures an admin meets are in Troubleshooting, in the words the backend says
    them: a home the kubelet cannot mount, the in-tree cephfs volume on 1.31+, an image the node
    may never pull."""
    from paddle_nbext_server.backends.kubernetes.build import intree_cephfs
    from paddle_nbext_server.runtime import policy

    troubleshooting = " ".join(ADMIN_GUIDE.read_text(encoding="utf-8").split("\n## Troubleshooting", 1)[1].split("\n## ", 1)[0].split())
    refusal = intree_cephfs.refusal("v1.31.0", "home_volume 'cephfs'")
    mount = policy._waiting_message(
        policy.Observed("trainer", 0, policy.ReplicaPhase.PENDING, reason=f"{policy.FAILED_MOUNT}MountVolume.MountDevice failed")
    )
    said = [
        (refusal or "").split("; this cluster runs", 1)[0],
        mount.split(": MountVolume", 1)[0],
        *policy.NEVER_STARTS,
    ]
    assert all(said), said
    missing = [words for words in said if words not in troubleshooting]
    assert not missing, f"the admin guide's Troubleshooting does not quote {missing}"


def main(paths: list[str]) -> None:
    for name in paths:
        print(f"{name}: {readability(Path(name).read_text(encoding='utf-8'))}")


if __name__ == "__main__":
    main(sys.argv[1:])
