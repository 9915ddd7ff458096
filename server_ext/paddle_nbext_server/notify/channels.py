"""The blocking senders, run in worker threads (never on the server's event loop).

A webhook is one HTTP POST of JSON with `http.client`: no redirect is followed and no
environment proxy is used, so it reaches exactly the host the admin allowed (checked again here,
in case the allow-list changed since the user saved the URL).  An e-mail goes through the site's
SMTP server with `smtplib` (STARTTLS, TLS or plain as the admin says; a login when a
credentials file is set).

Each raises `DeliveryError` with words a user can act on ("the receiver answered 500 Internal
Server Error", "cannot connect to smtp.example.org:587: Connection refused"); `permanent` says
that retrying cannot help (a 4xx other than 408 and 429, a refused recipient).
"""

from __future__ import annotations

import http.client
import json
import smtplib
import socket
import ssl
from urllib.parse import urlsplit

from traitlets import TraitError

from . import messages
from .admin import PaddleNbextNotifications, WebhookRefused
from .outbox import Delivery

_RETRYABLE_4XX = frozenset({408, 425, 429})
_MAX_BODY_WORDS = 200


class DeliveryError(Exception):
    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


def send(delivery: Delivery, admin: PaddleNbextNotifications) -> None:
    """Deliver one message (blocking), or raise `DeliveryError`."""
    if delivery.channel == "webhook":
        post_webhook(delivery, admin)
    else:
        send_email(delivery, admin)


def post_webhook(delivery: Delivery, admin: PaddleNbextNotifications) -> None:
    try:
        admin.check_webhook_url(delivery.target)
    except WebhookRefused as error:
        raise DeliveryError(f"not sent: {error}", permanent=True) from None
    parts = urlsplit(delivery.target)
    body = json.dumps(messages.webhook_body(delivery.event, delivery.link, delivery.shape)).encode("utf-8")
    host, port = parts.hostname or "", parts.port
    if parts.scheme == "https":
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=admin.webhook_timeout, context=ssl.create_default_context()
        )
    else:
        connection = http.client.HTTPConnection(host, port, timeout=admin.webhook_timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"Content-Type": "application/json", "User-Agent": "paddle-nbext-notifications", "X-Paddle-Nbext-Event": delivery.event.id}
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        answer = response.read(4096).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as error:
        raise DeliveryError(f"cannot reach {host}: {_cause(error)}") from None
    finally:
        connection.close()
    status = response.status
    if 200 <= status < 300:
        return
    said = " ".join(answer.split()[:_MAX_BODY_WORDS])[:300]
    words = f"the receiver answered {status} {response.reason}" + (f": {said}" if said else "")
    if 300 <= status < 400:
        raise DeliveryError(
            f"{words} (a redirect to {response.getheader('Location') or 'elsewhere'}; redirects are not followed: fix the URL)", True
        )
    raise DeliveryError(words, permanent=400 <= status < 500 and status not in _RETRYABLE_4XX)


def send_email(delivery: Delivery, admin: PaddleNbextNotifications) -> None:
    message = messages.email(delivery.event, delivery.link, admin.smtp_from, delivery.target)
    where = f"{admin.smtp_host}:{admin.port()}"
    try:
        credentials = admin.smtp_credentials()
        smtp: smtplib.SMTP
        if admin.smtp_tls == "ssl":
            smtp = smtplib.SMTP_SSL(admin.smtp_host, admin.port(), timeout=admin.smtp_timeout, context=ssl.create_default_context())
        else:
            smtp = smtplib.SMTP(admin.smtp_host, admin.port(), timeout=admin.smtp_timeout)
        with smtp:
            if admin.smtp_tls == "starttls":
                smtp.starttls(context=ssl.create_default_context())
            if credentials is not None:
                smtp.login(credentials.username, credentials.password)
            smtp.send_message(message)
    except smtplib.SMTPRecipientsRefused as error:
        raise DeliveryError(f"the SMTP server {where} refused {delivery.target}: {_smtp_words(error.recipients)}", permanent=True) from None
    except smtplib.SMTPAuthenticationError as error:
        raise DeliveryError(f"the SMTP server {where} refused the login: {error.smtp_code} {_decode(error.smtp_error)}") from None
    except smtplib.SMTPResponseException as error:
        raise DeliveryError(
            f"the SMTP server {where} answered {error.smtp_code} {_decode(error.smtp_error)}", permanent=500 <= error.smtp_code < 600
        ) from None
    except (OSError, smtplib.SMTPException) as error:
        raise DeliveryError(f"cannot send through {where}: {_cause(error)}") from None
    except (TraitError, ValueError) as error:  # the credentials file, a bad address
        raise DeliveryError(str(error)) from None


def _cause(error: BaseException) -> str:
    if isinstance(error, socket.timeout):
        return "timed out"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def _decode(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _smtp_words(recipients: dict[str, tuple[int, bytes]]) -> str:
    return "; ".join(f"{code} {_decode(said)}" for code, said in recipients.values())
