"""Benchmark: a job's own requirements (issue 25) — the first build of its environment and the
start of a job that finds it built, with uv and with pip side by side.

Two sets of requirements, from an offline index of wheels made here (`--find-links`, no index):

- **five small**: five tiny packages, one depending on the next;
- **one large**: one package whose wheel carries 50 MB of incompressible data.

For each installer and set, round after round: the environment step (`environments.ensure`, what
every replica's launcher runs before the user's code) is timed in a fresh process of the
replicas' interpreter (this virtualenv's, with Paddle and ~170 distributions: the key covers what
it has installed), first against an empty envs dir and cold download cache (**first build**), then
again with the environment there (**cached start**: what a job adds when nothing is installed —
reading the requirements, listing the interpreter's distributions for the key, one stat, the
status file).  Goal: cached start < 0.3 s.  The machine is shared: its load is recorded beside the
figures.

Writes benchmarks/results/requirements.json and requirements.md.

    .venv/bin/python benchmarks/bench_requirements.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
GOAL_CACHED = 0.3

from harness import machine, verdict, write_report  # noqa: E402
from support.wheels import make_wheel  # noqa: E402 - after the path it lives on

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
began = time.perf_counter()
from paddle_nbext_server.runtime import environments as env
requirements, package, envs, job = sys.argv[2:6]
prepared = env.ensure(requirements, package, envs, env.Job(job, os.path.join(envs, "..", "logs-" + job)), os.environ, lambda _: None)
print(json.dumps({"seconds": time.perf_counter() - began, "reused": prepared.reused, "installer": prepared.installer, "packages": len(prepared.packages)}))
"""


def make_sets(root: Path) -> dict[str, tuple[Path, Path]]:
    """{set name: (wheels dir, package dir with requirements.txt)}."""
    sets: dict[str, tuple[Path, Path]] = {}
    wheels = root / "wheels-small"
    names = [f"benchpkg{n}" for n in range(5)]
    for n, name in enumerate(names):
        make_wheel(wheels, name, "1.0", requires=(f"{names[n + 1]}>=1",) if n + 1 < len(names) else ())
    package = root / "small"
    package.mkdir()
    (package / "requirements.txt").write_text("".join(f"{name}==1.0\n" for name in names))
    sets["five small"] = (wheels, package)
    wheels = root / "wheels-large"
    big = make_wheel(wheels, "benchlarge", "1.0")
    _pad_wheel(big, 50 << 20)
    package = root / "large"
    package.mkdir()
    (package / "requirements.txt").write_text("benchlarge==1.0\n")
    sets["one large"] = (wheels, package)
    return sets


def _pad_wheel(wheel: Path, size: int) -> None:
    """Add incompressible data to a wheel (and its RECORD), as a real large wheel has."""
    import base64
    import hashlib
    import zipfile

    data = os.urandom(size)
    with zipfile.ZipFile(wheel) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    record_name = next(name for name in files if name.endswith("RECORD"))
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    files["benchlarge/data.bin"] = data
    files[record_name] = files[record_name] + f"benchlarge/data.bin,sha256={digest},{size}\n".encode()
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)


def run_once(wheels: Path, package: Path, envs: Path, installer: str, job: str) -> dict[str, Any]:
    settings = envs.parent / f"site-{installer}.json"
    settings.write_text(json.dumps({"no_index": True, "find_links": [str(wheels)], "installer": installer}))
    environ = {**os.environ, "PADDLE_NBEXT_PIP_INDEX_FILE": str(settings), "PIP_CONFIG_FILE": os.devnull}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(REPO / "server_ext"), str(package / "requirements.txt"), str(package), str(envs), job],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the environment step failed ({installer}): {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-requirements-") as scratch:
        root = Path(scratch)
        sets = make_sets(root)
        for name, (wheels, package) in sets.items():
            for installer in ("uv", "pip"):
                first, cached = [], []
                for round_ in range(args.rounds):
                    envs = root / f"envs-{installer}-{round_}"
                    shutil.rmtree(envs, ignore_errors=True)
                    envs.mkdir()
                    built = run_once(wheels, package, envs, installer, f"first-{round_}")
                    assert not built["reused"] and built["installer"] == installer, built
                    first.append(built["seconds"])
                    reused = run_once(wheels, package, envs, installer, f"cached-{round_}")
                    assert reused["reused"], reused
                    cached.append(reused["seconds"])
                    shutil.rmtree(envs, ignore_errors=True)
                rows.append(
                    {
                        "set": name,
                        "installer": installer,
                        "packages": built["packages"],
                        "first_build_s": round(statistics.median(first), 3),
                        "cached_start_s": round(statistics.median(cached), 3),
                        "first_rounds": [round(x, 3) for x in first],
                        "cached_rounds": [round(x, 3) for x in cached],
                    }
                )
                print(rows[-1], flush=True)
    result: dict[str, Any] = {
        "rounds": args.rounds,
        "machine": machine(),
        "goal_cached_start_s": GOAL_CACHED,
        "rows": rows,
    }
    lines = [
        "# A job's own requirements: first build and cached start",
        "",
        f"`.venv/bin/python benchmarks/bench_requirements.py --rounds {args.rounds}` — median of {args.rounds} rounds, seconds of the "
        "environment step in a fresh process of the replicas' interpreter; "
        f"{result['machine']['cpus']} CPUs, load {result['machine']['load'][0]:.2f}.",
        "",
        "| requirements | installer | packages installed | first build | cached start |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r['set']} | {r['installer']} | {r['packages']} | {r['first_build_s']:.2f} | {r['cached_start_s']:.3f} |" for r in rows]
    worst = max(r["cached_start_s"] for r in rows)
    lines += ["", f"Goal: cached start < {GOAL_CACHED} s — worst {worst:.3f} s: {verdict(worst < GOAL_CACHED)}."]
    for name in sets:
        uv = next(r for r in rows if r["set"] == name and r["installer"] == "uv")
        pip = next(r for r in rows if r["set"] == name and r["installer"] == "pip")
        lines.append(f"- {name}: uv builds in {uv['first_build_s'] / pip['first_build_s']:.2f} × pip's time.")
    write_report("requirements", result, "\n".join(lines) + "\n", indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
