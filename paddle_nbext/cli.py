"""`paddle-nbext`: the terminal front end over the same REST client as the notebook.

    paddle-nbext submit --entry "python train.py" --trainers 2 --wait
    paddle-nbext list [--output json]
    paddle-nbext status NAME | logs NAME [--role --index --follow] | wait NAME | cancel NAME | delete NAME
    paddle-nbext metrics NAME [--points N]     # latest reported values and a text sparkline
    paddle-nbext checkpoints NAME              # its checkpoints (step, time, size), the resume chain
    paddle-nbext resume NAME [--job-name NEW] [--wait]   # a Cancelled/Failed job from its latest checkpoint
    paddle-nbext delete NAME [--keep-checkpoints]
    paddle-nbext envs list [--json]            # your jobs' Python environments: size, last use, users
    paddle-nbext envs prune [--unused-days N] [--dry-run] [--cache]   # remove the unused ones
    paddle-nbext envs rm KEY

Exit codes: 0 ok; 1 the job failed (or was cancelled), the API refused/was unreachable, or a dry
run found that the job can never fit the cluster's quota;
2 usage error (bad flags or invalid job field, found before anything is sent).
The server comes from `--url`/`--token`, else `PADDLE_NBEXT_API_URL`/`PADDLE_NBEXT_TOKEN`, else the
running Jupyter server whose root dir contains the current directory.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from . import __version__, display, envs, health
from . import metrics as job_metrics
from .client import Client, PaddleNbextError, dumps
from .model.contract import ENVIRONMENT_LOG, Phase, Role, is_terminal
from .model.quota import QuotaCheck, Verdict
from .model.status import JobStatus
from .options import HelpShown, Parser, UsageError, add_job_flags, describe_error, spec_from_args
from .ranklog import rank_lines, rank_stream

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _ShowVersion(argparse.Action):
    """`--version` that works with the raising Parser (no subcommand needed)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=kwargs.get("help"))

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None
    ) -> None:
        raise HelpShown(f"paddle-nbext {__version__}\n")


def build_parser() -> Parser:
    parser = Parser(prog="paddle-nbext", description="Run and inspect distributed PaddlePaddle jobs of your Jupyter server.")
    parser.add_argument("--url", help="server or API URL (default: $PADDLE_NBEXT_API_URL or the running server)")
    parser.add_argument("--token", help="Jupyter token (default: $PADDLE_NBEXT_TOKEN)")
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text", help="output format [text]")
    parser.add_argument("--version", action=_ShowVersion, help="print the version of paddle-nbext and exit")
    # The same options are accepted after the command too (`paddle-nbext list -o json`);
    # SUPPRESS keeps a subcommand from resetting a value given before it.
    common = Parser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    common.add_argument("--token", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    common.add_argument("--output", "-o", choices=("text", "json"), default=argparse.SUPPRESS, help="output format [text]")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    _add_parser = commands.add_parser

    def add_parser(name: str, **kwargs: Any) -> Parser:
        return _add_parser(name, parents=[common], **kwargs)

    commands.add_parser = add_parser  # type: ignore[method-assign]

    submit = commands.add_parser("submit", help="submit a job", description="Submit a job.")
    add_job_flags(submit, entry_help="command to run in the package dir (or use --script)")
    submit.add_argument("--script", metavar="FILE", help="Python file sent as the entry script paddle_entry.py")
    submit.add_argument("--wait", action="store_true", help="wait until the job ends; exit 1 unless it succeeded")
    submit.add_argument("--follow", action="store_true", help="stream trainer 0's log, then wait")
    submit.add_argument(
        "--dry-run",
        action="store_true",
        help="validate and print the plan only; on Kubernetes also what the quota has free (exit 1 if it can never fit)",
    )

    commands.add_parser("list", help="list your jobs", description="List your jobs, newest first.")
    for name, text in (
        ("status", "show a job's status (exit 1 if it failed)"),
        ("wait", "wait until a job ends (exit 1 unless it succeeded)"),
        ("cancel", "stop a job, keeping its record and logs"),
        ("delete", "delete a job, its snapshot, logs and checkpoints"),
        ("checkpoints", "list a job's checkpoints (step, time, size) and the job it was resumed from"),
        ("resume", "start a Cancelled or Failed job again as a new job from its latest checkpoint"),
    ):
        sub = commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        sub.add_argument("name", metavar="NAME")
        if name == "wait":
            sub.add_argument("--timeout", type=float, default=None, help="give up after this many seconds (exit 1)")
        if name == "delete":
            sub.add_argument(
                "--keep-checkpoints",
                action="store_true",
                help="move the job's checkpoints to ~/paddle-checkpoints/ instead of deleting them",
            )
        if name == "resume":
            sub.add_argument("--job-name", metavar="NEW", default=None, help="the new job's name [a new name from NAME]")
            sub.add_argument("--wait", action="store_true", help="wait until the new job ends; exit 1 unless it succeeded")
    logs = commands.add_parser("logs", help="print a replica's log", description="Print a replica's log.")
    logs.add_argument("name", metavar="NAME")
    logs.add_argument(
        "--role",
        choices=(Role.TRAINER.value, Role.PSERVER.value, ENVIRONMENT_LOG),
        default=Role.TRAINER.value,
        help=f"whose log: a replica's, or '{ENVIRONMENT_LOG}' for the installer's output of the job's requirements",
    )
    logs.add_argument("--index", type=int, default=0)
    logs.add_argument("--tail", type=int, default=None)
    logs.add_argument("--previous", action="store_true")
    logs.add_argument("--follow", "-f", action="store_true", help="stream until the replica ends")
    logs.add_argument("--rank", type=int, default=None, help="only this rank's lines of a trainer of several ranks")
    metrics = commands.add_parser(
        "metrics",
        help="print what a job's replicas report()ed",
        description="Print each replica's latest reported step and metric values, with a text sparkline of each series.",
    )
    metrics.add_argument("name", metavar="NAME")
    metrics.add_argument("--points", type=int, default=200, help="points per replica and metric to fetch [200]")
    top = commands.add_parser(
        "top",
        help="print the CPU and memory each replica of a job uses",
        description=(
            "Print the CPU cores and memory each replica of a job uses now (its whole process tree), beside its "
            "request and limit, with its peak and a sparkline of recent memory."
        ),
    )
    top.add_argument("name", metavar="NAME")
    top.add_argument("--watch", "-w", action="store_true", help="print again every few seconds until the job ends")
    timeline_cmd = commands.add_parser(
        "timeline",
        help="print what happened to a job, in order",
        description="Print the job's timeline: what happened to it, oldest first, with times.",
    )
    timeline_cmd.add_argument("name", metavar="NAME")
    timeline_cmd.add_argument("--follow", "-f", action="store_true", help="print new entries as they come, until the job ends")
    environments = commands.add_parser(
        "envs",
        help="list or remove your jobs' Python environments",
        description=(
            "Your jobs' Python environments (built from their packages' requirements files): "
            "`envs list` shows them (key, packages, size, last use, the running jobs using them); "
            "`envs prune` removes those no job started with for --unused-days days and no running job uses; "
            "`envs rm KEY` removes one."
        ),
    )
    environments.add_argument("action", choices=("list", "prune", "rm"), help="list, prune or rm")
    environments.add_argument("key", metavar="KEY", nargs="?", default=None, help="the environment to remove (envs rm)")
    environments.add_argument("--json", dest="output", action="store_const", const="json", help="print JSON (same as --output json)")
    environments.add_argument(
        "--unused-days", type=int, default=None, metavar="N", help="prune: remove environments unused for N days or more [30]"
    )
    environments.add_argument("--dry-run", action="store_true", help="prune: only say what would be removed")
    environments.add_argument("--cache", action="store_true", help="prune: also empty the installers' download cache")
    return parser


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(dumps(data) if args.output == "json" else text)


def _quota_said(args: argparse.Namespace, quota: QuotaCheck | None) -> int:
    """After a dry run's plan: the quota sentence (stderr, so the plan on stdout stays JSON; in
    text output only, as JSON already holds it), and exit 1 when the server would refuse it."""
    if quota is None:
        return EXIT_OK
    if args.output != "json":
        print(f"Quota: {quota.words}", file=sys.stderr)
    return EXIT_FAILED if quota.verdict == Verdict.NEVER else EXIT_OK


def _phase_code(status: JobStatus) -> int:
    return EXIT_FAILED if status.phase in (Phase.FAILED, Phase.CANCELLED) else EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from .api import Job, submit

    spec = spec_from_args(args) if args.command == "submit" else {}  # usage errors before any network
    if args.command == "envs":
        _check_envs(args)
    client = Client(args.url, args.token)
    if args.command == "list":
        statuses = client.list_jobs()
        _emit(args, {"jobs": [status.to_dict() for status in statuses]}, display.jobs_text(statuses))
        return EXIT_OK
    if args.command == "submit":
        script = None
        if args.script:
            if spec.get("entry_point"):
                raise UsageError("--script and --entry exclude each other: --script runs the file as paddle_entry.py")
            try:
                with open(args.script, encoding="utf-8") as handle:
                    script = handle.read()
            except OSError as error:
                raise UsageError(f"--script: cannot read {args.script}: {error.strerror}") from None
        elif not spec.get("entry_point"):
            raise UsageError("submit: give --entry COMMAND or --script FILE")
        if args.dry_run:
            plan = submit(script=script, dry_run=True, client=client, **spec)
            print(dumps(plan.to_dict()))
            if plan.environment_words and args.output != "json":
                print(f"Environment: {plan.environment_words}", file=sys.stderr)
            return _quota_said(args, plan.quota)
        job = submit(script=script, client=client, **spec)
        if args.follow:
            for chunk in job.follow_logs():
                sys.stdout.write(chunk)
                sys.stdout.flush()
        if args.wait or args.follow:
            job.wait()
            _emit(args, job.last.to_dict(), display.status_text(job.last))
            return _phase_code(job.last)
        _emit(args, job.last.to_dict(), f"Submitted {job.name}: {job.phase}.")
        return EXIT_OK
    if args.command in ("status", "wait"):
        job = Job(args.name, client)
        if args.command == "wait":
            job.wait(timeout=args.timeout)
        else:
            job.status()
        _emit(args, job.last.to_dict(), display.status_text(job.last))
        return _phase_code(job.last)
    if args.command == "logs":
        if args.rank is not None and args.rank < 0:
            raise UsageError("--rank must be 0 or more")
        if args.follow:
            chunks = client.follow_logs(args.name, role=args.role, index=args.index, tail=args.tail)
            for chunk in chunks if args.rank is None else rank_stream(chunks, args.rank):
                sys.stdout.write(chunk)
                sys.stdout.flush()
            return EXIT_OK
        text = client.logs(args.name, role=args.role, index=args.index, tail=args.tail, previous=args.previous)
        if args.rank is not None:
            text = rank_lines(text, args.rank)
        if args.output == "json":
            where = {"name": args.name, "role": args.role, "index": args.index}
            print(dumps({**where, **({"rank": args.rank} if args.rank is not None else {}), "log": text}))
        else:
            sys.stdout.write(text)
        return EXIT_OK
    if args.command == "metrics":
        if args.points < 1:
            raise UsageError("--points must be at least 1")
        body = client.metrics(args.name, points=args.points)
        phase = None if args.output == "json" else str(client.get_job(args.name).phase)
        _emit(args, body, job_metrics.metrics_text(body, phase))
        return EXIT_OK
    if args.command == "top":
        return _top(args, client)
    if args.command == "timeline":
        return _timeline(args, client)
    if args.command == "cancel":
        before = client.get_job(args.name)
        status = before if is_terminal(before.phase) else client.cancel(args.name)
        _emit(args, status.to_dict(), display.cancel_text(args.name, before.phase, status.phase))
        return EXIT_OK
    if args.command == "checkpoints":
        body = client.checkpoints(args.name)
        _emit(args, body, display.checkpoints_text(body))
        return EXIT_OK
    if args.command == "resume":
        job = Job(args.name, client).resume(job_name=args.job_name)
        if args.wait:
            job.wait()
            _emit(args, job.last.to_dict(), display.status_text(job.last))
            return _phase_code(job.last)
        _emit(args, job.last.to_dict(), f"Resumed {args.name} as {job.name}: {job.phase}.")
        return EXIT_OK
    if args.command == "delete":
        try:
            size = client.checkpoints(args.name)
        except PaddleNbextError:  # a server without checkpoints: delete says nothing of sizes
            size = {}
        kept = client.delete(args.name, keep_checkpoints=args.keep_checkpoints)
        data = {"deleted": args.name, "freed": size.get("job_size"), "kept": kept}
        _emit(args, data, display.delete_text(args.name, size, kept))
        return EXIT_OK
    if args.command == "envs":
        return _envs(args, client)
    raise UsageError(f"unknown command {args.command!r}")


#: Seconds between two looks of `top --watch` and `timeline --follow`.
WATCH_EVERY = 2.0


def _top(args: argparse.Namespace, client: Client) -> int:
    """`paddle-nbext top NAME [--watch]`."""
    while True:
        body = client.usage(args.name)
        _emit(args, body, health.Usage(body).text())
        if not args.watch or is_terminal(client.get_job(args.name).phase):
            return EXIT_OK
        time.sleep(WATCH_EVERY)
        if args.output != "json":
            print()


def _timeline(args: argparse.Namespace, client: Client) -> int:
    """`paddle-nbext timeline NAME [--follow]`: the entries, then (following) each new one."""
    body = client.timeline(args.name)
    _emit(args, body, health.Timeline(body).text())
    since = int(body.get("last") or 0)
    while args.follow:
        ended = is_terminal(client.get_job(args.name).phase)
        body = client.timeline(args.name, since=since)
        if body.get("entries"):
            _emit(args, body, health.Timeline(body).text())
            since = int(body.get("last") or since)
        if ended:
            break
        time.sleep(WATCH_EVERY)
    return EXIT_OK


def _check_envs(args: argparse.Namespace) -> None:
    """Usage errors of `envs`, found before anything is sent."""
    given = (("--unused-days", args.unused_days is not None), ("--dry-run", args.dry_run), ("--cache", args.cache))
    prune_only = [flag for flag, present in given if present]
    if args.action != "prune" and prune_only:
        raise UsageError(f"envs {args.action}: {prune_only[0]} is an option of envs prune")
    if (args.action == "rm") != (args.key is not None):
        raise UsageError(
            "envs rm: give the KEY of the environment to remove" if args.action == "rm" else f"envs {args.action} takes no KEY"
        )
    if args.unused_days is not None and args.unused_days < 0:
        raise UsageError("--unused-days must be 0 or more")


def _envs(args: argparse.Namespace, client: Client) -> int:
    if args.action == "list":
        body = client.environments()
        _emit(args, body, envs.environments_text(body))
    elif args.action == "prune":
        days = 30 if args.unused_days is None else args.unused_days
        body = client.prune_environments(unused_days=days, dry_run=args.dry_run, cache=args.cache)
        _emit(args, body, envs.prune_text(body))
    else:
        body = client.remove_environment(args.key)
        _emit(args, body, envs.remove_text(body))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        return _run(args)
    except HelpShown as shown:
        print(shown.text.rstrip())
        return EXIT_OK
    except UsageError as error:
        message = str(error)
        print(message if message.startswith("paddle-nbext") else f"paddle-nbext: {message}", file=sys.stderr)
        return EXIT_USAGE
    except (PaddleNbextError, TimeoutError) as error:
        print(f"paddle-nbext: {describe_error(error)}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("paddle-nbext: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `paddle-nbext logs NAME | head`
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
