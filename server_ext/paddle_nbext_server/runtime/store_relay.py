"""A loopback relay to the collective rendezvous store, so no rank loses 3 s at start.

Paddle's collective start (``init_parallel_env``) has every rank but 0 connect to the TCP store
that rank 0 serves.  When that connect is refused (rank 0 has not reached its
``init_parallel_env`` yet: both import Paddle at the same moment, a coin flip), Paddle sleeps a
fixed 3 s before trying again (``tcp_utils.cc``: "Retry to connect to ... while the server is
not yet listening"), and every rank waits for the late one: half of all starts, and every whole
restart, took 3 s longer than they need (measured: docs/paddle-facts.md).

So the launcher of a rank other than 0 points Paddle's store client at this relay on loopback
(``PADDLE_MASTER``, which Paddle's store client reads before the trainer endpoints), which accepts at once and
connects on to the real store itself, retrying every few tens of milliseconds until the wait
timeout, then passes the bytes both ways until either side closes.  Paddle's messages are
unchanged; only the store's own traffic (rendezvous keys and barriers, not the gradients, which
gloo sends rank to rank) goes through it.  Standard library only: it runs inside job images.
"""

from __future__ import annotations

import contextlib
import socket
import threading

if __package__:
    from . import endpoint_wait, paddle_nbext_fence
else:  # a plain script: the bundle's files beside this one
    import endpoint_wait  # type: ignore[import-not-found,no-redef]
    import paddle_nbext_fence  # type: ignore[import-not-found,no-redef]

#: The most seconds between connects to a store that refuses (`endpoint_wait.until`'s back-off;
#: short: every tenth of a second late here delays every rank).
RETRY_DELAY = 0.05
#: Seconds one connect to the store may take (a pod address nobody holds any more hangs).
CONNECT_TIMEOUT = 1.0
CHUNK = 1 << 16


def connect_when_listening(host: str, port: int, timeout: float) -> socket.socket | None:
    """A connection to `host:port` as soon as it listens; None once `timeout` seconds passed.
    The name is looked up on every try: after a whole restart it may move to the new pod."""
    found: list[socket.socket] = []

    def connected(left: float) -> bool:
        try:
            found.append(socket.create_connection((host, port), timeout=max(0.05, min(CONNECT_TIMEOUT, left))))
        except OSError:
            return False
        return True

    if not endpoint_wait.until(connected, timeout, RETRY_DELAY):
        return None
    upstream = found[0]
    upstream.settimeout(None)
    upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return upstream


def pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy `source` to `sink` until `source` ends, then end `sink`'s sending side (the other
    direction may still be talking)."""
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class StoreRelay:
    """Listens on 127.0.0.1 (an ephemeral port: `address`) and relays each connection to the
    store at `host:port`; its threads are daemons, so it ends with the launcher."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        # Its threads block every signal (the ones it starts inherit the mask).
        paddle_nbext_fence.start_without_signals(threading.Thread(target=self._accept, name="store-relay", daemon=True))

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._relay, args=(client,), name="store-relay-conn", daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream = connect_when_listening(self.host, self.port, self.timeout)
        if upstream is None:  # the store never came: Paddle's receive fails, as its own timeout would
            client.close()
            return
        back = threading.Thread(target=pump, args=(upstream, client), name="store-relay-back", daemon=True)
        back.start()
        pump(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def close(self) -> None:
        """Stop accepting (connections already relayed keep going until they end)."""
        self._listener.close()


#: Where Paddle's store client looks first (``CreateOrGetGlobalTCPStore``; else the first trainer
#: endpoint).  The job's own env cannot set it (a reserved contract name); the launcher's
#: environment for a ``paddle.distributed.launch`` entry point does, and is left alone.
MASTER_VAR = "PADDLE_MASTER"


def attach(envs: list[dict[str, str]], timeout: float) -> StoreRelay | None:
    """Point every collective process of this replica but global rank 0 at one relay to the
    store (rank 0 serves it on the first trainer endpoint); the relay, or None when no process
    needs one (rank 0 alone, a ``paddle.distributed.launch`` entry point, which gets its own
    rendezvous)."""
    clients = [
        env for env in envs if env.get("PADDLE_TRAINER_ID", "0") != "0" and env.get("PADDLE_TRAINER_ENDPOINTS") and not env.get(MASTER_VAR)
    ]
    if not clients:
        return None
    host, _, port = clients[0]["PADDLE_TRAINER_ENDPOINTS"].split(",")[0].rpartition(":")
    relay = StoreRelay(host.strip("[]"), int(port), timeout)
    for env in clients:
        env[MASTER_VAR] = relay.address
    return relay
