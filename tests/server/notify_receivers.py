"""Real receivers for notification tests, bound to 127.0.0.1: an HTTP server that records each
webhook POST (and answers with the status the test sets), and an SMTP server (aiosmtpd) that
records each e-mail."""

from __future__ import annotations

import email
import email.policy
import json
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller


@dataclass
class Hook:
    """One webhook POST as received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class WebhookReceiver:
    """`answer` is the status every POST gets (200 unless a test says otherwise)."""

    port: int
    answer: int = 200
    received: list[Hook] = field(default_factory=list)  # every POST, also those answered with an error
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/paddle?token=t0ken"

    def accepted(self) -> list[Hook]:
        return [hook for hook in self.received if hook.headers.get("x-answered") == "200"]

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status = receiver.answer
                answered = {"x-answered": str(status), "x-arrived": repr(time.time())}
                headers = {key.lower(): value for key, value in self.headers.items()} | answered
                receiver.received.append(Hook(self.path, headers, body))
                payload = b"ok" if status == 200 else b"the receiver is down for maintenance"
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
                """Quiet: the test asserts on what arrived."""

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.recipients: list[list[str]] = []
        self.arrived: list[float] = []  # when each message arrived (epoch seconds)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        self.arrived.append(time.time())
        self.messages.append(message)
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 Message accepted for delivery"


@dataclass
class SmtpReceiver:
    port: int
    inbox: _Inbox = field(default_factory=_Inbox)
    _controller: Controller | None = None

    @property
    def messages(self) -> list[EmailMessage]:
        return self.inbox.messages

    def start(self) -> SmtpReceiver:
        self._controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None


def body_text(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert part is not None, message
    return str(part.get_content())
