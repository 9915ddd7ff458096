"""The notification service: three tasks on the server's event loop, none of which blocks it.

* watch: every `check_interval` seconds, and at once when the backend announces a change of a
  watched user's job (an `updated` event on the hub), each user who set a channel has their jobs
  looked at (`detect`); what is found goes into the outbox, then the cursors are saved.
* listen: the hub subscription that wakes the watch (so an end is seen within one backend poll).
* deliver: sends what the outbox holds, each message in a worker thread (`channels`), marks it
  sent, or schedules a retry with a doubling wait; its outcome is what the API shows per channel.

Users' settings are read once at start and kept in memory; `save_prefs` writes them through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

from ..backends.base import Backend
from ..errors import BackendError
from ..events import UPDATED, EventHub
from . import channels
from .admin import CHANNELS, PaddleNbextNotifications
from .detect import TIMELINE_EVENTS, Cursors, Found, phase_event, timeline_events
from .messages import job_link
from .outbox import Delivery, Outbox
from .prefs import EVENTS, Prefs, PrefsStore

log = logging.getLogger(__name__)

#: Deliveries in flight at once (each holds a worker thread while it waits on the network).
MAX_CONCURRENT = 4


async def sleep_or_wake(wake: asyncio.Event, timeout: float) -> None:
    """Wait until `wake` is set or `timeout` passes, then clear it.  asyncio.wait, not wait_for:
    on Python 3.11 wait_for returns normally when a cancel arrives as the event is set, and the
    loop would then never stop (see the local backend's watcher)."""
    waiter = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()
    wake.clear()


class NotificationService:
    def __init__(self, admin: PaddleNbextNotifications, hub: EventHub, backend: Backend, server_url: str) -> None:
        self.admin = admin
        self.hub = hub
        self.backend = backend
        self.home: Path = admin.home()
        self.public_url = admin.public_url or server_url
        self.prefs_store = PrefsStore(self.home)
        self.outbox = Outbox(self.home)
        self.prefs: dict[str, Prefs] = {}
        self._cursors: dict[str, Cursors] = {}
        self._look_now = asyncio.Event()
        self._deliver_now = asyncio.Event()
        self._in_flight: set[str] = set()
        self._slots = asyncio.Semaphore(MAX_CONCURRENT)
        self._tasks: list[asyncio.Task[None]] = []
        self._attempts: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        await asyncio.to_thread(self.outbox.open)
        self.prefs = await asyncio.to_thread(self.prefs_store.all)
        self._tasks = [
            asyncio.create_task(
                self._forever(self._watch_once, self._look_now, self.admin.check_interval), name="paddle-nbext-notify-watch"
            ),
            asyncio.create_task(self._listen(), name="paddle-nbext-notify-listen"),
            asyncio.create_task(self._deliver_loop(), name="paddle-nbext-notify-deliver"),
        ]

    async def stop(self) -> None:
        """Stop looking and sending; a message being sent finishes its thread but is marked sent
        only if this returns after it (else the next start sends it again, with the same id)."""
        for task in [*self._tasks, *self._attempts]:
            task.cancel()
        for task in [*self._tasks, *self._attempts]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks, self._attempts = [], set()

    # ------------------------------------------------------------------ the API's side
    async def save_prefs(self, owner: str, prefs: Prefs) -> None:
        await asyncio.to_thread(self.prefs_store.save, owner, prefs)
        self.prefs[owner] = prefs
        self._look_now.set()

    def prefs_of(self, owner: str) -> Prefs:
        return self.prefs.get(owner) or Prefs()

    async def describe(self, owner: str) -> dict[str, Any]:
        """`GET /notifications`: the user's settings, what the admin offers, and per channel how
        delivery goes (its last error in words)."""
        prefs = self.prefs_of(owner)
        status, pending = await asyncio.to_thread(lambda: (self.outbox.channel_status(owner), self.outbox.pending_count(owner)))
        set_up = prefs.channels()
        channel_answers = {
            name: {
                "available": self.admin.enabled(name),
                "set": name in set_up,
                "ok": status.get(name, {}).get("ok"),
                "last_error": status.get(name, {}).get("last_error"),
                "failing_since": status.get(name, {}).get("failing_since"),
                "gave_up": bool(status.get(name, {}).get("gave_up")),
                "last_attempt": status.get(name, {}).get("last_attempt"),
                "last_delivered": status.get(name, {}).get("last_delivered"),
                "pending": pending.get(name, 0),
            }
            for name in CHANNELS
        }
        return {
            "enabled": bool(self.admin.channels),
            "error": None,
            "events": dict(EVENTS),
            "settings": prefs.to_dict(),
            "channels": channel_answers,
        }

    # ------------------------------------------------------------------ watching jobs
    async def _forever(self, step: Any, wake: asyncio.Event, interval: float) -> None:
        while True:
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception:  # one bad job or a backend hiccup must not end notifications
                log.exception("paddle-nbext: notifications: %s failed; trying again", step.__name__)
            await sleep_or_wake(wake, interval)

    async def _listen(self) -> None:
        async with self.hub.subscribe() as queue:
            while True:
                event = await queue.get()
                if event.kind == UPDATED and event.owner in self.prefs:
                    self._look_now.set()

    async def _watch_once(self) -> None:
        for owner, prefs in list(self.prefs.items()):
            if prefs.channels() and prefs.events:
                await self.look(owner, prefs)

    async def look(self, owner: str, prefs: Prefs) -> None:
        """One look at the user's jobs: new events into the outbox, then the cursors saved."""
        cursors = self._cursors.get(owner)
        if cursors is None:
            since = await asyncio.to_thread(self.prefs_store.saved_at, owner)
            cursors = self._cursors[owner] = await asyncio.to_thread(Cursors, self.home, owner, since)
        jobs = await self.backend.list_jobs(owner)
        with_timeline = bool(TIMELINE_EVENTS & set(prefs.events))
        found: list[Found] = []
        for job in jobs:
            cursor = cursors.cursor(job)
            if with_timeline and (not job.terminal or cursor.phase != str(job.phase)):  # running, or its last look
                try:
                    answer = await self.backend.timeline(job.name, owner, max(cursor.seq, 0))
                except BackendError:
                    continue  # deleted meanwhile
                found += timeline_events(job, cursor, list(answer.get("entries") or []))
            ended = phase_event(job, cursor)
            cursor.phase = str(job.phase)
            if ended is not None:
                found.append(ended)
        cursors.forget_others({job.name for job in jobs})
        deliveries = [
            self._delivery(event, prefs, channel) for event in found if event.kind in prefs.events for channel in prefs.channels()
        ]
        deliveries = [d for d in deliveries if self.admin.enabled(d.channel)]
        added = await asyncio.to_thread(self._keep, deliveries, cursors)
        if added:
            self._deliver_now.set()

    def _delivery(self, event: Found, prefs: Prefs, channel: str) -> Delivery:
        target = prefs.webhook_url if channel == "webhook" else prefs.email
        shape = prefs.webhook_format if channel == "webhook" else "email"
        return Delivery(f"{event.id}-{channel}", event.owner, channel, target or "", shape, job_link(self.public_url, event), event)

    def _keep(self, deliveries: list[Delivery], cursors: Cursors) -> int:
        """The outbox first, the cursors after: a crash between them finds the events again,
        and the outbox drops the copies."""
        added = sum(self.outbox.add(delivery) for delivery in deliveries)
        cursors.save()
        return added

    # ------------------------------------------------------------------ delivering
    async def _deliver_loop(self) -> None:
        first = True
        while True:
            waiting = await asyncio.to_thread(self.outbox.waiting)
            now = time.time()
            soonest = 30.0
            for delivery in waiting:
                if delivery.id in self._in_flight:
                    continue
                if first or delivery.next_try <= now:  # after a restart: try at once
                    self._in_flight.add(delivery.id)
                    task = asyncio.create_task(self._attempt(delivery), name=f"paddle-nbext-notify-{delivery.id}")
                    self._attempts.add(task)
                    task.add_done_callback(self._attempts.discard)
                else:
                    soonest = min(soonest, delivery.next_try - now)
            first = False
            await sleep_or_wake(self._deliver_now, max(0.05, soonest))

    async def _attempt(self, delivery: Delivery) -> None:
        try:
            async with self._slots:
                try:
                    await asyncio.to_thread(channels.send, delivery, self.admin)
                except channels.DeliveryError as error:
                    await asyncio.to_thread(self._failed, delivery, str(error), error.permanent)
                    return
                await asyncio.to_thread(self._sent, delivery)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("paddle-nbext: notifications: delivering %s failed", delivery.id)
        finally:
            self._in_flight.discard(delivery.id)
            self._deliver_now.set()

    def _sent(self, delivery: Delivery) -> None:
        self.outbox.mark_sent(delivery)
        self.outbox.record(delivery, None)

    def _failed(self, delivery: Delivery, error: str, permanent: bool) -> None:
        delivery.attempts += 1
        delivery.last_error = error
        if permanent or delivery.attempts >= self.admin.max_attempts:
            words = error if permanent else f"{error} (given up after {delivery.attempts} attempts)"
            log.warning(
                "paddle-nbext: notifications: %s to %s for %s given up: %s", delivery.channel, delivery.owner, delivery.event.job, words
            )
            self.outbox.give_up(delivery)
            self.outbox.record(delivery, words, gave_up=True)
            return
        wait = min(self.admin.max_retry_seconds, self.admin.retry_seconds * 2 ** (delivery.attempts - 1))
        delivery.next_try = time.time() + wait
        self.outbox.update(delivery)
        self.outbox.record(delivery, f"{error} (attempt {delivery.attempts}; next in {wait:.0f} s)")
