"""Collective data-parallel training (dygraph, `paddle.DataParallel`, gloo on CPU).

Each trainer learns the same synthetic regression task (generated here, no downloads) from its
own batches; gradients are averaged across trainers by DataParallel.  Prints `step N loss X`
lines whose loss visibly falls, and `report()`s every step (step, total, loss) for the charts.
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
    from paddle_nbext_job import report
except ImportError:

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
    print(f"trainer {rank} of {world} training for {args.steps} steps", flush=True)
    for step in range(args.steps):
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
        if step % args.print_every == 0 or step == args.steps - 1:
            print(f"step {step} loss {loss_value:.6f}", flush=True)
        if args.step_delay:
            time.sleep(args.step_delay)
    print(f"trainer {rank} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
