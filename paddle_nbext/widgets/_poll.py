"""The refresh loop behind the live widgets.

Why a background thread and not an asyncio task on the kernel's event loop: ipykernel runs each
cell on that loop, in the main thread.  While a cell blocks (a training cell, `job.wait()`, a
`time.sleep`) a task on the loop would not run at all, so the status view would freeze exactly
when people watch it; and a blocking `requests` call inside a task would stall the kernel.  A
daemon thread keeps refreshing while cells run, its HTTP calls block nobody, and ipykernel sends
widget updates from any thread through its thread-safe IOPub channel.

Rate: the thread sleeps `interval` seconds between ticks (`Event.wait`) and each tick makes one
request, so a widget never makes more than one request per refresh interval.  It stops when
asked (widget closed), when `alive()` turns false (the frontend closed the widget's comm), or
when a tick returns False (e.g. the job ended).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Poller:
    def __init__(self, interval: float, tick: Callable[[], bool], alive: Callable[[], bool], name: str = "paddle-nbext-poll"):
        if interval <= 0:
            raise ValueError(f"interval must be positive (seconds), got {interval}")
        self.interval = float(interval)
        self._tick = tick
        self._alive = alive
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Poller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if not self._alive():
                break
            try:
                keep_going = self._tick()
            except Exception:  # a widget must never kill the kernel; the tick shows its own errors
                keep_going = True
            if keep_going is False:
                break
        self._stop.set()


def comm_alive(widget: object) -> bool:
    """False once the widget was closed or the frontend closed its comm."""
    comm = getattr(widget, "comm", None)
    return comm is not None and not getattr(comm, "_closed", False)


def watch_comm_close(widget: object, poller: Poller) -> None:
    """Stop `poller` as soon as the frontend closes the widget's comm (kernel-side close message)."""
    comm = getattr(widget, "comm", None)
    if comm is not None and hasattr(comm, "on_close"):
        comm.on_close(lambda _msg=None: poller.stop())
