"""`c.PaddleNbextNotifications.*`: which notification channels the admin enables and where they
may reach.

Nothing is sent unless the admin turns a channel on.  A webhook only goes to a host on the
admin's allow-list, over HTTPS unless the admin allows plain HTTP for that host, and redirects
are never followed: the server must not become a way to reach arbitrary (internal) URLs on a
user's behalf.  E-mail leaves through the site's SMTP server only.

A bad value raises `TraitError` naming the trait; the extension then keeps running jobs and
answers `GET /notifications` with the message, as `/config` does for `c.PaddleNbext`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jupyter_core.paths import jupyter_data_dir
from traitlets import Enum, Float, Int, List, TraitError, Unicode, validate
from traitlets.config import LoggingConfigurable

WEBHOOK, EMAIL = "webhook", "email"
CHANNELS = (WEBHOOK, EMAIL)
TLS_MODES = ("starttls", "ssl", "none")
#: The port each `smtp_tls` mode uses when `smtp_port` is 0.
STANDARD_SMTP_PORTS = {"starttls": 587, "ssl": 465, "none": 25}


def _trait_error(trait: str, message: str) -> TraitError:
    return TraitError(f"PaddleNbextNotifications.{trait}: {message}")


class WebhookRefused(ValueError):
    """A webhook URL the admin's rules do not allow; the message says which rule and the fix."""


@dataclass(frozen=True)
class SmtpCredentials:
    username: str
    password: str


class PaddleNbextNotifications(LoggingConfigurable):
    """Outbound notifications of job events (set them in `jupyter_server_config.py`)."""

    channels = List(
        Enum(CHANNELS),
        config=True,
        help="Notification channels users may use: 'webhook' and/or 'email' (empty: notifications are off).",
    )
    webhook_hosts = List(
        Unicode(),
        config=True,
        help=(
            "Hosts webhooks may be sent to over HTTPS: 'host' (any port), 'host:port', or '*.example.org' "
            "(its subdomains); a user's webhook to any other host is refused."
        ),
    )
    webhook_http_hosts = List(
        Unicode(),
        config=True,
        help="Hosts (same forms as webhook_hosts) webhooks may also reach over plain HTTP, e.g. a chat server inside the site.",
    )
    webhook_timeout = Float(10.0, config=True, help="Seconds one webhook delivery may take before it counts as failed.")
    smtp_host = Unicode("", config=True, help="The site's SMTP server that sends notification e-mails (needed for 'email').")
    smtp_port = Int(0, config=True, help="The SMTP server's port (0: 587 for starttls, 465 for ssl, 25 for none).")
    smtp_tls = Enum(list(TLS_MODES), "starttls", config=True, help="How the SMTP connection is protected: 'starttls', 'ssl' or 'none'.")
    smtp_from = Unicode(
        "", config=True, help="The From address of notification e-mails, e.g. 'paddle-nbext@example.org' (needed for 'email')."
    )
    smtp_credentials_file = Unicode(
        "",
        config=True,
        help="A file whose first line is the SMTP user name and second line its password (empty: no login); readable by the server only.",
    )
    smtp_timeout = Float(30.0, config=True, help="Seconds one SMTP delivery may take before it counts as failed.")
    email_domains = List(
        Unicode(),
        config=True,
        help="Domains users' notification addresses must be in, e.g. ['example.org'] (empty: any address).",
    )
    public_url = Unicode(
        "",
        config=True,
        help=(
            "The Jupyter server's address as users open it, for the link to the job in each message; '{username}' "
            "is replaced by the job's owner, e.g. 'https://hub.example.org/user/{username}/' (empty: the server's own URL)."
        ),
    )
    state_dir = Unicode(
        "",
        config=True,
        help="Directory holding users' notification settings and the outbox of undelivered messages (empty: paddle-nbext in Jupyter's data dir).",
    )
    max_attempts = Int(
        10, config=True, help="Deliveries of one message tried before it is given up (a 4xx answer other than 408 or 429 gives up at once)."
    )
    retry_seconds = Float(
        5.0, config=True, help="Seconds before the first retry of a failed delivery; each further retry waits twice as long."
    )
    max_retry_seconds = Float(600.0, config=True, help="The longest wait between two retries of a delivery.")
    check_interval = Float(
        1.0, config=True, help="Seconds between looks at the jobs of users who set notifications (their timelines: stalls, memory, queue)."
    )

    @validate("webhook_hosts", "webhook_http_hosts")
    def _hosts(self, proposal: dict[str, Any]) -> list[str]:
        cleaned = []
        for entry in proposal["value"]:
            host = entry.strip().lower()
            if not host or "/" in host or "@" in host or any(c.isspace() for c in host):
                raise _trait_error(proposal["trait"].name, f"{entry!r} is not a host name ('hooks.example.org', 'chat.example.org:8443')")
            cleaned.append(host)
        return cleaned

    @validate("smtp_port")
    def _port(self, proposal: dict[str, Any]) -> int:
        value: int = proposal["value"]
        if not 0 <= value <= 65535:
            raise _trait_error("smtp_port", f"must be a port number (or 0 for the standard one), got {value}")
        return value

    @validate("webhook_timeout", "smtp_timeout", "retry_seconds", "max_retry_seconds", "check_interval")
    def _positive(self, proposal: dict[str, Any]) -> float:
        value: float = proposal["value"]
        if not value > 0:
            raise _trait_error(proposal["trait"].name, f"must be a positive number of seconds, got {value}")
        return value

    @validate("max_attempts")
    def _attempts(self, proposal: dict[str, Any]) -> int:
        value: int = proposal["value"]
        if value < 1:
            raise _trait_error("max_attempts", f"must be at least 1, got {value}")
        return value

    def check_consistency(self) -> None:
        """What e-mail needs, checked once all values are loaded."""
        if EMAIL in self.channels:
            if not self.smtp_host:
                raise _trait_error("smtp_host", "is needed when 'email' is in channels")
            if "@" not in self.smtp_from:
                raise _trait_error("smtp_from", f"must be an e-mail address when 'email' is in channels, got {self.smtp_from!r}")
        if WEBHOOK in self.channels and not (self.webhook_hosts or self.webhook_http_hosts):
            raise _trait_error("webhook_hosts", "is empty, so no webhook could be sent; name the hosts users may send webhooks to")
        if self.smtp_credentials_file:
            self.smtp_credentials()

    # ---- what the rest of the package uses
    def enabled(self, channel: str) -> bool:
        return channel in self.channels

    def home(self) -> Path:
        """Where settings and the outbox live (made private on first use)."""
        return Path(os.path.expanduser(self.state_dir)) if self.state_dir else Path(jupyter_data_dir()) / "paddle-nbext"

    def port(self) -> int:
        return self.smtp_port or STANDARD_SMTP_PORTS[self.smtp_tls]

    def smtp_credentials(self) -> SmtpCredentials | None:
        """The login from `smtp_credentials_file` (read at each delivery, so a rotated password
        needs no restart); None without a file."""
        if not self.smtp_credentials_file:
            return None
        path = Path(os.path.expanduser(self.smtp_credentials_file))
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as error:
            raise _trait_error("smtp_credentials_file", f"cannot be read ({error.strerror or error})") from None
        if len(lines) < 2 or not lines[0].strip():
            raise _trait_error("smtp_credentials_file", f"{path} must hold the user name on its first line and the password on its second")
        return SmtpCredentials(lines[0].strip(), lines[1])

    def check_webhook_url(self, url: str) -> None:
        """Refuse a URL the admin's rules do not allow (`WebhookRefused` says why and the fix)."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("https", "http") or not parts.hostname:
            raise WebhookRefused(f"{url!r} is not an https:// URL")
        if parts.username is not None or parts.password is not None:
            raise WebhookRefused("a webhook URL may not hold a user name or password; put a token in its path or query instead")
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise WebhookRefused(f"{url!r} has an invalid port") from None
        host = parts.hostname.lower()
        if scheme == "http":
            if not host_allowed(host, port, self.webhook_http_hosts):
                raise WebhookRefused(
                    f"plain http is not allowed for {host}; use https, or ask the admin to add it to "
                    "c.PaddleNbextNotifications.webhook_http_hosts"
                )
            return
        if not host_allowed(host, port, [*self.webhook_hosts, *self.webhook_http_hosts]):
            allowed = ", ".join(self.webhook_hosts + self.webhook_http_hosts) or "none"
            raise WebhookRefused(
                f"webhooks to {host} are not allowed on this server (allowed hosts: {allowed}); "
                "ask the admin to add it to c.PaddleNbextNotifications.webhook_hosts"
            )


def host_allowed(host: str, port: int, entries: list[str]) -> bool:
    """Whether `host` (lower case) on `port` matches one allow-list entry: 'host' (any port),
    'host:port', '*.domain' (its subdomains, any port)."""
    for entry in entries:
        name, _, wanted_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if wanted_port and str(port) != wanted_port:
            continue
        if name.startswith("*."):
            if host.endswith(name[1:]) and host != name[2:]:
                return True
        elif host == name.strip("[]"):
            return True
    return False


def load(parent: Any) -> tuple[PaddleNbextNotifications, str | None]:
    """`c.PaddleNbextNotifications` checked (its config is `parent`'s); on a bad value the
    defaults (nothing enabled) plus the message naming the trait."""
    try:
        admin = PaddleNbextNotifications(parent=parent)
        admin.check_consistency()
        return admin, None
    except TraitError as error:
        message = f"notifications are off: invalid configuration: {error}"
        parent.log.error("paddle-nbext: %s", message)
        return PaddleNbextNotifications(), message
