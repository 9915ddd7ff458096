"""IPython magics: `%%paddle_submit`, `%paddle_jobs`, `%paddle_logs`, `%paddle_cancel`, `%paddle_delete`,
`%paddle_resume`.

Users mistype flags all the time, so every error — bad flag, invalid field, server refusal,
server not found — is printed as ONE line on stderr (naming the flag and what is allowed) and the
magic returns None; no traceback ever reaches the notebook.  `--help` prints the usage.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class

from . import api, display
from .client import PaddleNbextError
from .model.contract import ENVIRONMENT_LOG, Role, is_terminal
from .options import HelpShown, Parser, UsageError, add_job_flags, describe_error, spec_from_args
from .waiting import wait_showing_progress

__all__ = ["PaddleMagics", "load_ipython_extension"]


def _submit_parser() -> Parser:
    parser = Parser(
        prog="%%paddle_submit",
        description=(
            "Submit the cell as a distributed Paddle job. The cell body is written as paddle_entry.py "
            "into the job's package snapshot and run with `python paddle_entry.py` on every replica. "
            "--entry runs another command instead (the body, if any, is still written, so "
            "--entry 'python paddle_entry.py --epochs 3' passes arguments to it); without a body use "
            "the line magic: %paddle_submit --entry 'python train.py'. Without --mode a job runs as "
            "trainers only (collective) unless --pservers is given. Parameter-server jobs need "
            "paddlepaddle==3.0.0 with the GEO strategy and a pserver that serves: see the user guide's "
            "'Parameter-server jobs' section (docs/user-guide.md#parameter-server-jobs) for a minimal cell."
        ),
        add_help=True,
    )
    add_job_flags(parser, entry_help="command to run instead of the cell body, e.g. 'python train.py --epochs 3'")
    run = parser.add_argument_group("after submitting")
    run.add_argument("--wait", action="store_true", help="block until the job ends and show the final status")
    run.add_argument("--follow", action="store_true", help="stream trainer 0's log until the job ends")
    run.add_argument("--dry-run", action="store_true", help="validate and show the plan without creating anything")
    return parser


def _logs_parser() -> Parser:
    parser = Parser(prog="%paddle_logs", description="Show one replica's log.")
    parser.add_argument("name", metavar="NAME", help="job name")
    parser.add_argument(
        "--role",
        choices=(Role.TRAINER.value, Role.PSERVER.value, ENVIRONMENT_LOG),
        default=Role.TRAINER.value,
        help=f"whose log: a replica's [trainer], or '{ENVIRONMENT_LOG}' for the installer's output of the job's requirements",
    )
    parser.add_argument("--index", type=int, default=0, help="replica index [0]")
    parser.add_argument("--tail", type=int, default=None, help="only the last N lines")
    parser.add_argument("--previous", action="store_true", help="the log of the previous (restarted) attempt")
    parser.add_argument("--follow", action="store_true", help="stream until the replica ends")
    parser.add_argument("--rank", type=int, default=None, help="only this rank's lines of a trainer of several ranks")
    return parser


def _name_parser(prog: str, description: str) -> Parser:
    parser = Parser(prog=prog, description=description)
    parser.add_argument("name", metavar="NAME", help="job name")
    return parser


def _fail(message: str) -> None:
    print(f"paddle-nbext: {message}", file=sys.stderr)


@magics_class
class PaddleMagics(Magics):
    """The magics; each parses with argparse (never exiting) and reports errors in one line."""

    def _run(self, parser: Parser, line: str, action: Any) -> Any:
        try:
            args = parser.parse_args(shlex.split(line))
            return action(args)
        except HelpShown as shown:
            print(shown.text.rstrip())
        except UsageError as error:
            _fail(str(error))
        except ValueError as error:  # shlex: unbalanced quotes; dist_train-style argument errors
            _fail(f"{parser.prog}: {error}")
        except (PaddleNbextError, TimeoutError) as error:
            _fail(describe_error(error))
        except KeyboardInterrupt:
            _fail("interrupted; the job keeps running (use %paddle_cancel NAME to stop it)")
        return None

    @line_cell_magic
    def paddle_submit(self, line: str, cell: str | None = None) -> Any:
        """Submit the cell as a distributed Paddle job.  Run `%paddle_submit --help` for the flags.

        As a line magic (`%paddle_submit --entry "python train.py"`) it runs an existing command;
        IPython refuses a `%%` cell magic with an empty body, so that is the form for --entry alone."""

        def action(args: Any) -> Any:
            spec = spec_from_args(args)
            body = cell if cell and cell.strip() else None
            if not spec.get("entry_point") and body is None:
                raise UsageError("%%paddle_submit: nothing to run; write the training script in the cell body or give --entry COMMAND")
            if args.dry_run:
                from .client import dumps

                plan = api.submit(script=body, dry_run=True, **spec)
                print(dumps(plan.to_dict()))
                if plan.environment_words:
                    print(f"Environment: {plan.environment_words}")
                return None
            job = api.submit(script=body, **spec)
            if args.follow:
                job.logs(follow=True)
                job.wait()
            elif args.wait:
                wait_showing_progress(job)
            return job

        return self._run(_submit_parser(), line, action)

    @line_magic
    def paddle_jobs(self, line: str = "") -> Any:
        """List your jobs (name, phase, replicas, age)."""
        parser = Parser(prog="%paddle_jobs", description="List your jobs, newest first.")
        return self._run(parser, line, lambda args: api.jobs())

    @line_magic
    def paddle_logs(self, line: str) -> Any:
        """Show a replica's log, or the job's environment log: `%paddle_logs NAME [--role
        trainer|pserver|environment] [--index N] [--rank R] [--follow]`."""

        def action(args: Any) -> Any:
            job = api.Job(args.name)
            if args.follow:
                job.logs(args.role, args.index, tail=args.tail, follow=True, rank=args.rank)
                return None
            text = job.logs(args.role, args.index, tail=args.tail, previous=args.previous, rank=args.rank) or ""
            whose = "the environment" if args.role == ENVIRONMENT_LOG else f"{args.role}-{args.index}"
            print(text if text else f"(no output yet from {whose} of {args.name})", end="" if text.endswith("\n") else "\n")
            return None

        return self._run(_logs_parser(), line, action)

    @line_magic
    def paddle_cancel(self, line: str) -> Any:
        """Stop a job, keeping its record and logs: `%paddle_cancel NAME`."""

        def action(args: Any) -> Any:
            job = api.Job(args.name)
            before = job.status().phase
            after = before if is_terminal(before) else job.cancel().phase
            print(display.cancel_text(job.name, before, after))
            return None

        return self._run(_name_parser("%paddle_cancel", "Stop a job; its record and logs stay."), line, action)

    @line_magic
    def paddle_delete(self, line: str) -> Any:
        """Delete a job with its processes, snapshot, logs and checkpoints:
        `%paddle_delete NAME [--keep-checkpoints]`."""

        def action(args: Any) -> Any:
            job = api.Job(args.name)
            try:
                sizes = job.checkpoints()
            except PaddleNbextError:  # a server without checkpoints
                sizes = {}
            kept = job.client.delete(args.name, keep_checkpoints=args.keep_checkpoints)
            print(display.delete_text(args.name, sizes, kept))
            return None

        parser = _name_parser("%paddle_delete", "Delete a job, its snapshot, its logs and its checkpoints.")
        parser.add_argument("--keep-checkpoints", action="store_true", help="move its checkpoints to ~/paddle-checkpoints/ instead")
        return self._run(parser, line, action)

    @line_magic
    def paddle_resume(self, line: str) -> Any:
        """Start a Cancelled or Failed job again as a new job from its latest checkpoint:
        `%paddle_resume NAME [--job-name NEW] [--wait]`; returns the new job."""

        def action(args: Any) -> Any:
            job = api.Job(args.name).resume(job_name=args.job_name)
            if args.wait:
                wait_showing_progress(job)
            return job

        parser = _name_parser("%paddle_resume", "Start a Cancelled or Failed job again as a new job from its latest checkpoint.")
        parser.add_argument("--job-name", metavar="NEW", default=None, help="the new job's name [a new name from NAME]")
        parser.add_argument("--wait", action="store_true", help="block until the new job ends")
        return self._run(parser, line, action)


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(PaddleMagics)
