"""Each user's notification settings: which events, and where they go (a webhook, an e-mail
address).  Set once (`PUT /notifications`, the panel's settings, `paddle_nbext.set_notifications`),
checked against the admin's rules before anything is written, kept as one small file per user in
the state dir.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import now_iso

from ..errors import BackendError
from .admin import EMAIL, WEBHOOK, PaddleNbextNotifications, WebhookRefused
from .store import owner_key, private_dir, read_json, write_json

#: The events a user may pick, with what each means (the API and the panel show these words).
EVENTS: dict[str, str] = {
    "failed": "the job failed",
    "succeeded": "the job ended successfully",
    "stalled": "a trainer made no progress for the job's stall time",
    "memory": "a replica nears its memory limit (before it is OOMKilled)",
    "started": "the job started after waiting in a queue",
}
DEFAULT_EVENTS = ("failed", "succeeded", "stalled", "memory")
WEBHOOK_FORMATS = ("json", "slack")
_MAX_URL = 2000
_MAX_ADDRESS = 254
_ADDRESS = re.compile(r"^[^@\s<>,;\"]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?\.[A-Za-z]{2,}$")
_FIELDS = ("events", "webhook_url", "webhook_format", "email")


class PrefsError(BackendError):
    """A setting that cannot be kept (400, naming the field and the fix)."""

    status = 400
    code = "bad_request"


@dataclass(frozen=True)
class Prefs:
    events: tuple[str, ...] = DEFAULT_EVENTS
    webhook_url: str | None = None
    webhook_format: str = "json"
    email: str | None = None
    updated: str = field(default_factory=now_iso)

    def channels(self) -> list[str]:
        """The channels this user has set up."""
        return [name for name, target in ((WEBHOOK, self.webhook_url), (EMAIL, self.email)) if target]

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": list(self.events),
            "webhook_url": self.webhook_url,
            "webhook_format": self.webhook_format,
            "email": self.email,
            "updated": self.updated,
        }

    @classmethod
    def from_stored(cls, data: Any) -> Prefs | None:
        """The settings a file holds (written by `save`); None for anything else."""
        if not isinstance(data, dict):
            return None
        events = tuple(e for e in data.get("events") or () if e in EVENTS)
        webhook, email = data.get("webhook_url"), data.get("email")
        return cls(
            events=events,
            webhook_url=webhook if isinstance(webhook, str) and webhook else None,
            webhook_format=str(data.get("webhook_format")) if data.get("webhook_format") in WEBHOOK_FORMATS else "json",
            email=email if isinstance(email, str) and email else None,
            updated=str(data.get("updated") or now_iso()),
        )


def validate(body: dict[str, Any], admin: PaddleNbextNotifications) -> Prefs:
    """The settings a request asks for, or `PrefsError` naming the first bad field and the fix."""
    unknown = sorted(set(body) - set(_FIELDS) - {"updated"})
    if unknown:
        raise PrefsError(f"unknown setting {unknown[0]!r}; the settings are {', '.join(_FIELDS)}", unknown[0])
    return Prefs(
        events=_events(body.get("events", list(DEFAULT_EVENTS))),
        webhook_url=_webhook(body.get("webhook_url"), admin),
        webhook_format=_format(body.get("webhook_format", "json")),
        email=_email(body.get("email"), admin),
    )


def _events(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PrefsError(f"events must be a list of event names ({', '.join(EVENTS)})", "events")
    unknown = [item for item in value if item not in EVENTS]
    if unknown:
        raise PrefsError(f"unknown event {unknown[0]!r}; pick from {', '.join(EVENTS)}", "events")
    return tuple(name for name in EVENTS if name in value)  # in one order, each once


def _webhook(value: Any, admin: PaddleNbextNotifications) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > _MAX_URL or any(c.isspace() for c in value):
        raise PrefsError(f"webhook_url must be a URL of at most {_MAX_URL} characters without spaces", "webhook_url")
    if not admin.enabled(WEBHOOK):
        raise PrefsError(
            "webhooks are not enabled on this server (c.PaddleNbextNotifications.channels); leave webhook_url empty", "webhook_url"
        )
    try:
        admin.check_webhook_url(value)
    except WebhookRefused as error:
        raise PrefsError(f"webhook_url: {error}", "webhook_url") from None
    return value


def _format(value: Any) -> str:
    if value not in WEBHOOK_FORMATS:
        raise PrefsError(
            f"webhook_format must be 'json' (the event as a JSON object) or 'slack' (Slack/Mattermost's {{\"text\": ...}}), got {value!r}",
            "webhook_format",
        )
    return str(value)


def _email(value: Any, admin: PaddleNbextNotifications) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > _MAX_ADDRESS or not _ADDRESS.match(value):
        raise PrefsError(f"email must be one address such as 'ada@example.org', got {str(value)[:80]!r}", "email")
    if not admin.enabled(EMAIL):
        raise PrefsError(
            "e-mail notifications are not enabled on this server (c.PaddleNbextNotifications.channels); leave email empty", "email"
        )
    domain = value.rsplit("@", 1)[1].lower()
    allowed = [d.lower().lstrip("@") for d in admin.email_domains]
    if allowed and domain not in allowed:
        raise PrefsError(f"notifications may only go to addresses at {', '.join(allowed)}", "email")
    return value


class PrefsStore:
    """The users' settings files under `<state dir>/users/` (blocking; call in a thread)."""

    def __init__(self, home: Path) -> None:
        self.dir = home / "users"

    def _path(self, owner: str) -> Path:
        return self.dir / f"{owner_key(owner)}.json"

    def load(self, owner: str) -> Prefs | None:
        data = read_json(self._path(owner))
        if not isinstance(data, dict) or data.get("owner") != owner:
            return None
        return Prefs.from_stored(data.get("settings"))

    def save(self, owner: str, prefs: Prefs) -> None:
        private_dir(self.dir)
        write_json(self._path(owner), {"owner": owner, "settings": prefs.to_dict()})

    def saved_at(self, owner: str) -> str | None:
        """When the user's settings were last saved (an API time), None when they never were."""
        try:
            stamp = self._path(owner).stat().st_mtime
        except OSError:
            return None
        return datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def all(self) -> dict[str, Prefs]:
        """Every user's settings (read once at start)."""
        found: dict[str, Prefs] = {}
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []:
            data = read_json(path)
            prefs = Prefs.from_stored(data.get("settings")) if isinstance(data, dict) else None
            if prefs is not None and isinstance(data, dict) and isinstance(data.get("owner"), str):
                found[data["owner"]] = prefs
        return found
