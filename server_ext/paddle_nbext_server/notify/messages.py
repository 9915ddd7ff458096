"""What a notification says: a title ("bert-3 failed"), the job's own words (its status message,
or the timeline entry: "trainer 1 raised IndexError: list index out of range"), and a link that
opens the job's view in JupyterLab.  One wording for every channel; each channel only shapes it
(a JSON object, Slack/Mattermost's `{"text": ...}`, an e-mail).
"""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any
from urllib.parse import quote

from .detect import Found

#: The query parameter of a JupyterLab (or Notebook 7) URL that opens a job's view (the panel's router).
JOB_LINK_PARAMETER = "paddle-job"

_TITLES = {
    "failed": "{job} failed",
    "succeeded": "{job} succeeded",
    "stalled": "{job} stalled",
    "memory": "{job} is near its memory limit",
    "started": "{job} started after waiting in the queue",
}


def title(event: Found) -> str:
    return _TITLES.get(event.kind, "{job}: " + event.kind).format(job=event.job)


def job_link(public_url: str, event: Found) -> str:
    """The URL that opens the job's view: `<server>/lab?paddle-job=<name>`."""
    base = public_url.replace("{username}", quote(event.owner, safe=""))
    base = base if base.endswith("/") else f"{base}/"
    return f"{base}lab?{JOB_LINK_PARAMETER}={quote(event.job, safe='')}"


def text(event: Found, link: str) -> str:
    """The plain words every channel carries."""
    return f"{title(event)}: {event.words}\n{link}"


def webhook_body(event: Found, link: str, shape: str) -> dict[str, Any]:
    """The JSON a webhook receives: Slack/Mattermost's incoming-webhook `{"text": ...}`, or the
    event itself (its `id` is stable, so a receiver can drop a repeat)."""
    if shape == "slack":
        return {"text": text(event, link)}
    return {
        "id": event.id,
        "event": event.kind,
        "job": event.job,
        "owner": event.owner,
        "phase": event.phase,
        "title": title(event),
        "message": event.words,
        "time": event.time,
        "link": link,
        "text": text(event, link),
    }


def email(event: Found, link: str, sender: str, recipient: str) -> EmailMessage:
    """The e-mail: the title as subject, the words and the link as body; its Message-ID carries
    the event id, so a repeat is recognisable."""
    message = EmailMessage()
    message["Subject"] = f"[paddle-nbext] {title(event)}"
    message["From"] = sender
    message["To"] = recipient
    message["Date"] = formatdate(localtime=True)
    message["Message-ID"] = make_msgid(idstring=event.id, domain=sender.rsplit("@", 1)[-1])
    message.set_content(
        f"{title(event)}.\n\n{event.words}\n\nWhen: {event.time}\nOpen the job: {link}\n\n"
        "You get this because you turned on paddle-nbext notifications (the panel's Notifications settings).\n"
    )
    return message
