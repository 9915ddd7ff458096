"""Parameter-server training (static graph, fleet, GEO mode) on a synthetic regression task.

Run by paddle-nbext's launcher, which sets the Paddle environment of each role: pservers serve
the parameters, trainers learn y = X·w + b from batches generated here (no downloads) and print
`step N loss X` lines whose loss visibly falls.  Every step is also `report()`ed (step, total,
loss), so the panel and the notebook draw each trainer's loss curve and the job's progress.  GEO (`a_sync` with `k_steps`) is the PS mode
that trains with a plain executor loop on the Paddle 3.0 CPU wheel (see docs/paddle-facts.md).

`--crash-trainer I --crash-step N --crash-code C` makes trainer I exit with code C at step N,
and `--raise-trainer I --raise-step N` makes it raise a ValueError there, the way user code
fails (Paddle then prints its own shutdown lines after the traceback): how the tests (and
curious users) see what a failing trainer looks like.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("FLAGS_enable_pir_api", "0")  # PS minimize() needs the legacy program IR

import numpy as np  # noqa: E402
import paddle  # noqa: E402
import paddle.distributed.fleet as fleet  # noqa: E402

try:  # on the PYTHONPATH of every paddle-nbext replica; run elsewhere, the script still trains
    from paddle_nbext_job import report
except ImportError:

    def report(step: int, total: int | None = None, **metrics: float) -> None:
        """Nothing to report to outside a paddle-nbext job."""


FEATURES = 13


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps per trainer")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--print-every", type=int, default=20)
    parser.add_argument("--step-delay", type=float, default=0.0, help="seconds to sleep per step (slows the job for demos/tests)")
    parser.add_argument("--crash-trainer", type=int, default=None, help="trainer id that exits early with --crash-code")
    parser.add_argument("--crash-step", type=int, default=20)
    parser.add_argument("--crash-code", type=int, default=3)
    parser.add_argument("--raise-trainer", type=int, default=None, help="trainer id that raises ValueError")
    parser.add_argument("--raise-step", type=int, default=20)
    return parser.parse_args()


def build_model() -> paddle.static.Variable:
    x = paddle.static.data(name="x", shape=[None, FEATURES], dtype="float32")
    y = paddle.static.data(name="y", shape=[None, 1], dtype="float32")
    hidden = paddle.static.nn.fc(x, size=16, activation="tanh")
    prediction = paddle.static.nn.fc(hidden, size=1)
    return paddle.mean(paddle.nn.functional.square_error_cost(prediction, y))


def batches(trainer_id: int, batch: int):
    """An endless stream of (x, y) from one fixed linear truth; each trainer its own samples."""
    truth = np.random.default_rng(0).normal(size=(FEATURES, 1)).astype("float32")
    rng = np.random.default_rng(1000 + trainer_id)
    while True:
        x = rng.normal(size=(batch, FEATURES)).astype("float32")
        y = (x @ truth + 0.5 + 0.01 * rng.normal(size=(batch, 1))).astype("float32")
        yield x, y


def main() -> int:
    args = parse_args()
    paddle.enable_static()
    fleet.init(fleet.PaddleCloudRoleMaker(is_collective=False))
    loss = build_model()
    strategy = fleet.DistributedStrategy()
    strategy.a_sync = True
    strategy.a_sync_configs = {"k_steps": 10}
    optimizer = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=args.lr), strategy)
    optimizer.minimize(loss)

    if fleet.is_server():
        print(f"pserver {fleet.server_index()} serving", flush=True)
        fleet.init_server()
        fleet.run_server()  # blocks until the job runner stops it
        return 0

    trainer_id = fleet.worker_index()
    executor = paddle.static.Executor(paddle.CPUPlace())
    executor.run(paddle.static.default_startup_program())
    fleet.init_worker()
    print(f"trainer {trainer_id} of {fleet.worker_num()} training for {args.steps} steps", flush=True)
    data = batches(trainer_id, args.batch)
    program = paddle.static.default_main_program()
    for step in range(args.steps):
        if args.crash_trainer == trainer_id and step == args.crash_step:
            print(f"trainer {trainer_id}: simulated crash at step {step}, exiting with code {args.crash_code}", file=sys.stderr, flush=True)
            os._exit(args.crash_code)
        if args.raise_trainer == trainer_id and step == args.raise_step:
            raise ValueError(f"bad batch at step {step}: x has NaN values")
        x, y = next(data)
        (value,) = executor.run(program, feed={"x": x, "y": y}, fetch_list=[loss])
        loss_value = float(np.asarray(value).mean())
        report(step + 1, total=args.steps, loss=loss_value)
        if step % args.print_every == 0 or step == args.steps - 1:
            print(f"step {step} loss {loss_value:.6f}", flush=True)
        if args.step_delay:
            time.sleep(args.step_delay)
    fleet.stop_worker()
    print(f"trainer {trainer_id} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
