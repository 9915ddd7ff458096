"""The relay to the collective store: a rank other than 0 connects at once, the bytes pass both
ways once the store listens, an end on either side reaches the other, and only the processes
that talk to a store they do not serve, and have no master given, are pointed at it."""

from __future__ import annotations

import socket
import threading

from paddle_nbext_server.runtime import store_relay


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_once(port: int, started: threading.Event, reply: bytes) -> threading.Thread:
    """A store stand-in that starts listening only when `started` is set, reads one request,
    answers `reply` and hangs up."""

    def run() -> None:
        started.wait()
        with socket.create_server(("127.0.0.1", port)) as server:
            connection, _ = server.accept()
            with connection:
                connection.recv(64)
                connection.sendall(reply)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def client_of(relay: store_relay.StoreRelay) -> socket.socket:
    host, _, port = relay.address.rpartition(":")
    return socket.create_connection((host, int(port)), timeout=30)


def test_a_client_connects_before_the_store_listens_and_talks_to_it_once_it_does() -> None:
    port, started = unused_port(), threading.Event()
    server = serve_once(port, started, b"pong")
    relay = store_relay.StoreRelay("127.0.0.1", port, timeout=30)
    try:
        with client_of(relay) as client:  # accepted though nothing listens on the store's port yet
            client.sendall(b"ping")
            started.set()
            assert client.recv(64) == b"pong"
            assert client.recv(64) == b""  # the store hung up: so does the relay
        server.join(30)
    finally:
        relay.close()


def test_a_store_that_never_listens_ends_the_client_connection() -> None:
    relay = store_relay.StoreRelay("127.0.0.1", unused_port(), timeout=0.3)
    try:
        with client_of(relay) as client:
            assert client.recv(64) == b""
    finally:
        relay.close()


def collective(rank: str, **extra: str) -> dict[str, str]:
    return {"PADDLE_TRAINER_ID": rank, "PADDLE_TRAINER_ENDPOINTS": "job-trainer-0.job:6170,job-trainer-1.job:6170", **extra}


def test_every_process_but_rank_0_is_pointed_at_one_relay_to_the_first_endpoint() -> None:
    envs = [collective("0"), collective("1"), collective("2")]
    relay = store_relay.attach(envs, timeout=1)
    assert relay is not None
    try:
        assert (relay.host, relay.port) == ("job-trainer-0.job", 6170)
        assert "PADDLE_MASTER" not in envs[0]
        assert envs[1]["PADDLE_MASTER"] == envs[2]["PADDLE_MASTER"] == relay.address
        assert relay.address.startswith("127.0.0.1:")
    finally:
        relay.close()


def test_rank_0_alone_and_a_launch_entry_point_get_no_relay() -> None:
    assert store_relay.attach([collective("0")], timeout=1) is None
    launch = {"PADDLE_MASTER": "job-trainer-0.job:6170", "PADDLE_NNODES": "2", "PADDLE_RANK": "1"}  # no endpoints, its master
    assert store_relay.attach([launch], timeout=1) is None
    assert launch["PADDLE_MASTER"] == "job-trainer-0.job:6170"
    assert store_relay.attach([collective("1", PADDLE_MASTER="10.0.0.5:6170")], timeout=1) is None
