"""Collective data-parallel training (dygraph, `paddle.DataParallel`, gloo on CPU).

Each trainer learns the same synthetic regression task (generated here, no downloads) from its
own batches; gradients are averaged across trainers by DataParallel.  Prints `step N loss X`
lines whose loss visibly falls, and `report()`s every step (step, total, loss) for the charts.
With `--checkpoint-every K`, rank 0 saves the model's and the optimizer's `state_dict`s every K
steps with `paddle_nbext_job.save_checkpoint`, and every rank resumes from
`paddle_nbext_job.resume_from()` when the job restarts whole or was resumed from an ended one.
The launcher sets the collective environment (`PADDLE_TRAINER_ENDPOINTS`,
`PADDLE_CURRENT_ENDPOINT`, `PADDLE_DISTRI_BACKEND=gloo`, ...).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import paddle
import paddle.distributed as dist

try:  # on the PYTHONPATH of every paddle-nbext replica; run elsewhere, the script still trains
    from paddle_nbext_job import report, resume_from, save_checkpoint
except ImportError:
    resume_from = save_checkpoint = None  # type: ignore[assignment]

    def report(step: int, total: int | None = None, **metrics: float) -> None:
        """Nothing to report to outside a paddle-nbext job."""


FEATURES = 13


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--print-every", type=int, default=10)
    parser.add_argument("--step-delay", type=float, default=0.0, help="seconds to sleep per step")
    parser.add_argument("--raise-rank", type=int, default=None, help="rank that raises ValueError (tests a failing job)")
    parser.add_argument("--raise-step", type=int, default=20)
    parser.add_argument("--checkpoint-every", type=int, default=0, help="save a checkpoint every K steps (0: never)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    paddle.set_device("cpu")
    dist.init_parallel_env()
    rank, world = dist.get_rank(), dist.get_world_size()
    paddle.seed(0)  # same initial weights on every rank
    model = paddle.DataParallel(paddle.nn.Sequential(paddle.nn.Linear(FEATURES, 16), paddle.nn.Tanh(), paddle.nn.Linear(16, 1)))
    optimizer = paddle.optimizer.SGD(learning_rate=args.lr, parameters=model.parameters())
    truth = np.random.default_rng(0).normal(size=(FEATURES, 1)).astype("float32")
    rng = np.random.default_rng(1000 + rank)
    start = 0
    resume = resume_from() if resume_from is not None else None
    if resume is not None:  # the same checkpoint for every rank: the one the job started from
        model.set_state_dict(paddle.load(resume.file("model.pdparams")))
        optimizer.set_state_dict(paddle.load(resume.file("optimizer.pdopt")))
        start = resume.step
        print(f"trainer {rank} resumed from step {start}", flush=True)
    print(f"trainer {rank} of {world} training for {args.steps} steps", flush=True)
    for step in range(start, args.steps):
        if args.raise_rank == rank and step == args.raise_step:
            raise ValueError(f"bad batch at step {step}: x has NaN values")
        x = rng.normal(size=(args.batch, FEATURES)).astype("float32")
        y = (x @ truth + 0.5).astype("float32")
        loss = paddle.nn.functional.mse_loss(model(paddle.to_tensor(x)), paddle.to_tensor(y))
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        loss_value = float(loss)
        report(step + 1, total=args.steps, loss=loss_value)
        done = step + 1
        if args.checkpoint_every and done % args.checkpoint_every == 0 and rank == 0 and save_checkpoint is not None:
            # The ranks hold the same weights: one saves.  Visible only once complete.
            with save_checkpoint(done, ranks=1) as directory:
                paddle.save(model.state_dict(), f"{directory}/model.pdparams")
                paddle.save(optimizer.state_dict(), f"{directory}/optimizer.pdopt")
        if step % args.print_every == 0 or step == args.steps - 1:
            print(f"step {step} loss {loss_value:.6f}", flush=True)
        if args.step_delay:
            time.sleep(args.step_delay)
    print(f"trainer {rank} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
