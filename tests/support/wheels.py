"""Tiny real wheels made in a test, for an offline package index: a directory of `.whl` files
that pip and uv read with `--no-index --find-links DIR`, or served as a PEP 503 simple index by
`SimpleIndex` (optionally behind basic auth, to prove credentials stay out of logs)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import re
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(directory: Path, name: str, version: str, *, requires: tuple[str, ...] = (), body: str = "", padding: int = 0) -> Path:
    """Write `<name>-<version>-py3-none-any.whl` into `directory`: a module `<name>` whose
    `VERSION` is `version` (plus `body`), depending on `requires`; `padding` bytes of data make a
    large wheel for benchmarks."""
    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {each}\n" for each in requires)
    files = {
        f"{module}/__init__.py": f"VERSION = {version!r}\n{body}",
        f"{dist_info}/METADATA": metadata,
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: paddle-nbext-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    if padding:
        files[f"{module}/data.bin"] = "x" * padding
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{module}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, text in files.items():
            data = text.encode()
            archive.writestr(path, data)
            record.append(f"{path},{_record_hash(data)},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return target


class SimpleIndex:
    """A PEP 503 index of the wheels in `directory` on 127.0.0.1 (or `host`), in a thread."""

    def __init__(self, directory: Path, *, host: str = "127.0.0.1", user: str = "", password: str = "") -> None:
        self.directory, self.host, self.user, self.password = directory, host, user, password
        self.requests: list[str] = []
        #: When set, file downloads wait until it is set (a test holds a build in progress).
        self.downloads: threading.Event | None = None
        self._server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        credentials = f"{self.user}:{self.password}@" if self.user else ""
        return f"http://{credentials}{self.host}:{self._server.server_address[1]}/simple/"

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:
                pass

            head_only = False

            def do_HEAD(self) -> None:  # noqa: N802 - installers ask before they download
                self.head_only = True
                self.do_GET()

            def _send(self, status: int, body: bytes, kind: str = "text/html") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                if status == 401:
                    self.send_header("WWW-Authenticate", 'Basic realm="test index"')
                self.end_headers()
                if not self.head_only:
                    self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
                index.requests.append(self.path)
                if index.user:
                    wanted = "Basic " + base64.b64encode(f"{index.user}:{index.password}".encode()).decode()
                    if self.headers.get("Authorization") != wanted:
                        self._send(401, b"credentials needed")
                        return
                parts = [part for part in self.path.split("?")[0].split("/") if part]
                wheels = sorted(index.directory.glob("*.whl"))
                if parts[:1] == ["simple"] and len(parts) == 3 and (index.directory / parts[2]).is_file():
                    if index.downloads is not None and not self.head_only:
                        index.downloads.wait(300)
                    # Files below the project's page, as many private indexes serve them (and
                    # where installers send the index's credentials too).
                    self._send(200, (index.directory / parts[2]).read_bytes(), "application/octet-stream")
                elif parts[:1] == ["simple"] and len(parts) == 2:
                    project = re.sub(r"[-_.]+", "-", parts[1]).lower()
                    links = [w for w in wheels if re.sub(r"[-_.]+", "-", w.name.split("-")[0]).lower() == project]
                    if not links:
                        self._send(404, b"no such project")
                        return
                    body = "".join(
                        f'<a href="/simple/{parts[1]}/{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
                        for w in links
                    )
                    self._send(200, f"<html><body>{body}</body></html>".encode())
                else:
                    self._send(404, b"not found")

        return Handler

    @contextmanager
    def serving(self) -> Iterator[SimpleIndex]:
        self._server = http.server.ThreadingHTTPServer((self.host, 0), self._handler())
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
