"""The durable outbox: every message to deliver is a file before anything tries to send it, so a
server restart loses none, and a message is marked sent before its file goes, so none is sent
twice.

    <state dir>/outbox/pending/<id>.json   a message waiting for (another) attempt
    <state dir>/outbox/sent/<id>           delivered (kept `SENT_KEEP_DAYS`, for the dedup)
    <state dir>/outbox/failed/<id>.json    given up, with its last error (for the admin)
    <state dir>/delivery/<user>.json       per channel: the last attempt, delivery and error

A message id is its event's id and the channel, so the same event derived twice (the cursors of a
look that was cut short) is enqueued once.  The one window left is a crash after the receiver
took a message and before it was marked sent: that message goes again, with the same `id` (in the
JSON body, and in the e-mail's Message-ID) for the receiver to drop.

Blocking file work; the service calls it through `asyncio.to_thread`.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paddle_nbext.model.contract import now_iso

from .detect import Found
from .store import owner_key, private_dir, read_json, sync_dir, write_json

SENT_KEEP_DAYS = 30


@dataclass
class Delivery:
    """One message for one channel of one user."""

    id: str
    owner: str
    channel: str  # admin.WEBHOOK | admin.EMAIL
    target: str  # the webhook URL or the e-mail address, as set when the event happened
    shape: str  # the webhook's format ("json" | "slack"); "email" for e-mail
    link: str
    event: Found
    attempts: int = 0
    next_try: float = 0.0  # epoch seconds
    last_error: str | None = None
    created: str = field(default_factory=now_iso)

    def to_dict(self) -> dict[str, Any]:
        return {**{key: value for key, value in vars(self).items() if key != "event"}, "event": self.event.to_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> Delivery | None:
        try:
            values = {key: data[key] for key in ("id", "owner", "channel", "target", "shape", "link")}
            return cls(
                **values,
                event=Found.from_dict(data["event"]),
                attempts=int(data.get("attempts") or 0),
                next_try=float(data.get("next_try") or 0.0),
                last_error=data.get("last_error"),
                created=str(data.get("created") or now_iso()),
            )
        except (KeyError, TypeError, ValueError):
            return None


class Outbox:
    def __init__(self, home: Path) -> None:
        self.pending = home / "outbox" / "pending"
        self.sent = home / "outbox" / "sent"
        self.failed = home / "outbox" / "failed"
        self.delivery = home / "delivery"

    def open(self) -> None:
        """Make the dirs; finish what a crash left half done (sent but still pending); forget
        sent marks older than `SENT_KEEP_DAYS`."""
        for directory in (self.pending, self.sent, self.failed, self.delivery):
            private_dir(directory)
        for path in self.pending.glob("*.json"):
            if (self.sent / path.stem).exists():
                path.unlink(missing_ok=True)
        oldest = time.time() - SENT_KEEP_DAYS * 86400
        for marker in self.sent.iterdir():
            with contextlib.suppress(OSError):
                if marker.stat().st_mtime < oldest:
                    marker.unlink()

    def add(self, delivery: Delivery) -> bool:
        """Keep `delivery` unless it is known already (pending, sent or given up); True if added."""
        if any(path.exists() for path in self._paths(delivery.id)):
            return False
        write_json(self.pending / f"{delivery.id}.json", delivery.to_dict())
        return True

    def _paths(self, message_id: str) -> tuple[Path, Path, Path]:
        return self.pending / f"{message_id}.json", self.sent / message_id, self.failed / f"{message_id}.json"

    def waiting(self) -> list[Delivery]:
        """Every pending message, oldest first."""
        found = [Delivery.from_dict(read_json(path)) for path in self.pending.glob("*.json")]
        return sorted((d for d in found if d is not None), key=lambda d: (d.created, d.id))

    def update(self, delivery: Delivery) -> None:
        """Keep a failed attempt's count, next try and error."""
        write_json(self.pending / f"{delivery.id}.json", delivery.to_dict())

    def mark_sent(self, delivery: Delivery) -> None:
        """Delivered: the sent mark first, then the pending file goes (a crash between them is
        finished by `open`)."""
        marker = self.sent / delivery.id
        with open(marker, "w", encoding="utf-8") as handle:
            handle.write(now_iso())
            handle.flush()
            os.fsync(handle.fileno())
        sync_dir(self.sent)
        (self.pending / f"{delivery.id}.json").unlink(missing_ok=True)
        sync_dir(self.pending)

    def give_up(self, delivery: Delivery) -> None:
        write_json(self.failed / f"{delivery.id}.json", delivery.to_dict())
        (self.pending / f"{delivery.id}.json").unlink(missing_ok=True)
        sync_dir(self.pending)

    # ---- per user and channel: how delivery goes (what the API and the panel show)
    def _status_path(self, owner: str) -> Path:
        return self.delivery / f"{owner_key(owner)}.json"

    def channel_status(self, owner: str) -> dict[str, dict[str, Any]]:
        data = read_json(self._status_path(owner))
        if not isinstance(data, dict) or data.get("owner") != owner:
            return {}
        return {name: value for name, value in (data.get("channels") or {}).items() if isinstance(value, dict)}

    def record(self, delivery: Delivery, error: str | None, gave_up: bool = False) -> None:
        """One attempt's outcome for its user's channel."""
        channels = self.channel_status(delivery.owner)
        now = now_iso()
        entry = dict(channels.get(delivery.channel) or {})
        entry["last_attempt"] = now
        if error is None:
            entry.update(ok=True, last_delivered=now, last_error=None, failing_since=None, gave_up=False)
        else:
            entry.update(ok=False, last_error=error, failing_since=entry.get("failing_since") or now, gave_up=gave_up)
        channels[delivery.channel] = entry
        write_json(self._status_path(delivery.owner), {"owner": delivery.owner, "channels": channels})

    def pending_count(self, owner: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for delivery in self.waiting():
            if delivery.owner == owner:
                counts[delivery.channel] = counts.get(delivery.channel, 0) + 1
        return counts
