"""One half of the real node's way to the API server: a byte relay, run as a script.

The control plane listens on the host's 127.0.0.1 only; the real node (kubelet, kube-proxy,
CoreDNS and the pods) lives in a network namespace of its own, where the host's loopback does not
exist.  A Unix socket is a file, seen from both namespaces, so two relays join them without
opening any host port: on the host ``--listen unix:PATH --to tcp:127.0.0.1:PORT``, in the node's
namespace ``--listen tcp:NODE_IP:6443 --to unix:PATH``.  TLS passes through untouched (the API
server's certificate names the node IP and ``10.96.0.1``).  Standalone (stdlib only), because it
is started as ``python netbridge.py`` under ``nsenter``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal


def _parse(address: str) -> tuple[str, str, int]:
    kind, _, rest = address.partition(":")
    if kind == "unix" and rest:
        return kind, rest, 0
    host, _, port = rest.rpartition(":")
    if kind == "tcp" and host and port.isdigit():
        return kind, host, int(port)
    raise SystemExit(f"netbridge: {address!r} is neither unix:PATH nor tcp:HOST:PORT")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            if writer.can_write_eof():
                writer.write_eof()


async def _serve(listen: str, target: str) -> None:
    to_kind, to_host, to_port = _parse(target)

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if to_kind == "unix":
                up_reader, up_writer = await asyncio.open_unix_connection(to_host)
            else:
                up_reader, up_writer = await asyncio.open_connection(to_host, to_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        for stream in (writer, up_writer):
            stream.close()

    kind, host, port = _parse(listen)
    if kind == "unix":
        with contextlib.suppress(FileNotFoundError):
            os.unlink(host)
        server = await asyncio.start_unix_server(relay, host)
    else:
        server = await asyncio.start_server(relay, host, port, reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"netbridge: {listen} -> {target}", flush=True)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--listen", required=True, help="unix:PATH or tcp:HOST:PORT")
    parser.add_argument("--to", required=True, help="unix:PATH or tcp:HOST:PORT")
    args = parser.parse_args()
    asyncio.run(_serve(args.listen, args.to))


if __name__ == "__main__":
    main()
