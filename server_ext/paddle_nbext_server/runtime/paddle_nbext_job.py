"""`report()`: training code tells paddle-nbext its step and metrics, in any image with Python 3;
and checkpoints: `save_checkpoint`, `latest`, `resume_from`.

    from paddle_nbext_job import report
    report(step, total=steps, loss=float(loss), acc=accuracy)

    import paddle_nbext_job as job
    resume = job.resume_from()            # the same for every rank of this attempt
    with job.save_checkpoint(step, ranks=1) as directory:
        paddle.save(model.state_dict(), os.path.join(directory, "model.pdparams"))

The launcher puts this module on every replica's `PYTHONPATH` (the bundle's `pylib/`), with its
two parts beside it: `paddle_nbext_report` (the metrics reporter: one JSON line per call in the
replica's metrics file, written by a thread of its own, never raising into training code) and
`paddle_nbext_checkpoints` (checkpoints published by one atomic rename once every saving rank is
done, and fenced against an attempt the job has moved past).  This module is the one name users
import, so that the API stays one module however its parts are arranged.

Standard library only, and nothing else of paddle-nbext: it is imported by user code in job images.
"""

from __future__ import annotations

if __package__:  # the installed package (the server reads checkpoints through this module)
    from . import paddle_nbext_checkpoints, paddle_nbext_report
else:  # a job's pylib/, where its parts are shipped beside this one
    import paddle_nbext_checkpoints  # type: ignore[import-not-found,no-redef]
    import paddle_nbext_report  # type: ignore[import-not-found,no-redef]

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "checkpoint_dir",
    "checkpoints",
    "flush",
    "latest",
    "manifest",
    "prune",
    "report",
    "resume_from",
    "save_checkpoint",
]

# The metrics reporter (`paddle_nbext_report`).
report, flush = paddle_nbext_report.report, paddle_nbext_report.flush
Reporter = paddle_nbext_report.Reporter
reporter_from = paddle_nbext_report.reporter_from
FILE_VAR, BUDGET_VAR, RANK_VAR = paddle_nbext_report.FILE_VAR, paddle_nbext_report.BUDGET_VAR, paddle_nbext_report.RANK_VAR
DEFAULT_BUDGET, FLUSH_SECONDS = paddle_nbext_report.DEFAULT_BUDGET, paddle_nbext_report.FLUSH_SECONDS

# The checkpoint API (`paddle_nbext_checkpoints`).
Checkpoint = paddle_nbext_checkpoints.Checkpoint
CheckpointError = paddle_nbext_checkpoints.CheckpointError
save_checkpoint = paddle_nbext_checkpoints.save_checkpoint
checkpoint_dir, checkpoints = paddle_nbext_checkpoints.checkpoint_dir, paddle_nbext_checkpoints.checkpoints
latest, resume_from = paddle_nbext_checkpoints.latest, paddle_nbext_checkpoints.resume_from
manifest, prune, tree_size = paddle_nbext_checkpoints.manifest, paddle_nbext_checkpoints.prune, paddle_nbext_checkpoints.tree_size
process_started = paddle_nbext_checkpoints.process_started
wait_for_removals = paddle_nbext_checkpoints.wait_for_removals
CHECKPOINT_DIR_VAR, KEEP_VAR = paddle_nbext_checkpoints.CHECKPOINT_DIR_VAR, paddle_nbext_checkpoints.KEEP_VAR
RESUME_VAR, RESUME_STEP_VAR = paddle_nbext_checkpoints.RESUME_VAR, paddle_nbext_checkpoints.RESUME_STEP_VAR
ATTEMPT_VAR, DEFAULT_KEEP = paddle_nbext_checkpoints.ATTEMPT_VAR, paddle_nbext_checkpoints.DEFAULT_KEEP
CHECKPOINTS_SUBDIR, MANIFEST = paddle_nbext_checkpoints.CHECKPOINTS_SUBDIR, paddle_nbext_checkpoints.MANIFEST
STEP_PREFIX, PARTIAL_PREFIX = paddle_nbext_checkpoints.STEP_PREFIX, paddle_nbext_checkpoints.PARTIAL_PREFIX
STEP_DIGITS, DELETING_PREFIX = paddle_nbext_checkpoints.STEP_DIGITS, paddle_nbext_checkpoints.DELETING_PREFIX
