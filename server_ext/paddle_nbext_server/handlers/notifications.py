"""`GET /notifications` (the user's notification settings, what the admin offers, and how each
channel's deliveries go) and `PUT /notifications` (set them once, for all the user's jobs).

A setting the admin's rules refuse (a webhook host not on the allow-list, plain http, a channel
that is off) is a 400 naming the field before anything is written.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..errors import InvalidState
from ..notify import prefs
from ..notify.admin import CHANNELS
from ..notify.service import NotificationService
from .base import PaddleAPIHandler


class NotificationsHandler(PaddleAPIHandler):
    async def _service(self) -> NotificationService | None:
        await self.backend()  # started with the backend (503 with the cause when there is none)
        return self.state.notifications

    def _off(self) -> dict[str, object]:
        """The answer of a server whose admin enabled no channel (or whose settings are bad)."""
        return {
            "enabled": False,
            "error": self.state.notify_error or "no notification channel is enabled on this server (c.PaddleNbextNotifications.channels)",
            "events": dict(prefs.EVENTS),
            "settings": prefs.Prefs().to_dict(),
            "channels": {
                name: {
                    "available": False,
                    "set": False,
                    "ok": None,
                    "last_error": None,
                    "failing_since": None,
                    "gave_up": False,
                    "last_attempt": None,
                    "last_delivered": None,
                    "pending": 0,
                }
                for name in CHANNELS
            },
        }

    @web.authenticated
    @authorized
    async def get(self) -> None:
        service = await self._service()
        self.set_header("Cache-Control", "no-cache")
        self.write_json(await service.describe(self.owner) if service is not None else self._off())

    @web.authenticated
    @authorized
    async def put(self) -> None:
        body = self.json_body()
        service = await self._service()
        chosen = prefs.validate(body, service.admin if service is not None else self.state.notify_settings)
        if service is None:  # nothing could ever be sent: say so rather than keep settings in vain
            raise InvalidState(f"notifications are off: {self._off()['error']}")
        await service.save_prefs(self.owner, chosen)
        self.write_json(await service.describe(self.owner))
