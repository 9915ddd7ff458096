"""A small parameter-server (GEO) training program: the cell body the kernel tests submit."""

import os

os.environ.setdefault("FLAGS_enable_pir_api", "0")
import numpy as np
import paddle
import paddle.distributed.fleet as fleet

paddle.enable_static()
fleet.init(fleet.PaddleCloudRoleMaker(is_collective=False))
x = paddle.static.data("x", [None, 4], "float32")
y = paddle.static.data("y", [None, 1], "float32")
loss = paddle.mean(paddle.nn.functional.square_error_cost(paddle.static.nn.fc(x, 1), y))
strategy = fleet.DistributedStrategy()
strategy.a_sync = True
strategy.a_sync_configs = {"k_steps": 10}
# Paddle documents fleet.distributed_optimizer but leaves it out of fleet.__all__ and unannotated.
fleet.distributed_optimizer(paddle.optimizer.SGD(0.05), strategy).minimize(loss)  # type: ignore[attr-defined,no-untyped-call]
if fleet.is_server():
    fleet.init_server()
    fleet.run_server()
else:
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    fleet.init_worker()
    rng = np.random.default_rng(fleet.worker_index())
    w = np.array([[1.0], [-2.0], [0.5], [3.0]], "float32")
    for step in range(200):
        xb = rng.normal(size=(32, 4)).astype("float32")
        (value,) = exe.run(paddle.static.default_main_program(), feed={"x": xb, "y": xb @ w}, fetch_list=[loss])
        if step % 50 == 0 or step == 199:
            print(f"step {step} loss {float(value):.4f}", flush=True)
    fleet.stop_worker()
    print("trainer done", flush=True)
