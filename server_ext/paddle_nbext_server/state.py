"""What the extension holds while the server runs: its settings, the event hub and the backend
(or why there is none), shared by every handler under `STATE_KEY` in the web app's settings.

Its own module so that the app (which creates it) and the handlers (which read it) both import
it and neither imports the other.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any

from traitlets import TraitError

from .backends.base import Backend
from .config import PaddleNbext
from .errors import BackendUnavailable
from .events import EventHub
from .feeds.health import HealthTicker
from .feeds.metrics import MetricsTicker
from .notify import admin as notify_admin
from .notify.service import NotificationService

STATE_KEY = "paddle_nbext_state"  # web-app settings key of the ExtensionState

#: backend name -> (module, class), imported only when chosen so the other's dependencies
#: (e.g. the Kubernetes client) are never needed.
BACKEND_CLASSES = {
    "local": ("paddle_nbext_server.backends.local", "LocalBackend"),
    "kubernetes": ("paddle_nbext_server.backends.kubernetes", "KubernetesBackend"),
}
START_RETRY_SECONDS = 30.0


class ExtensionState:
    """What every handler shares: settings, the event hub and the backend (or why there is none)."""

    def __init__(self, settings: PaddleNbext, error: str | None = None) -> None:
        self.settings = settings
        self.hub = EventHub()
        self.shutting_down = asyncio.Event()
        self.backend: Backend | None = None
        self.error = error
        self._started = False
        self._start_failed_at: float | None = None
        self._lock: asyncio.Lock | None = None
        self._metrics: asyncio.Task[None] | None = None  # metric events (feeds/metrics.py)
        self._health: asyncio.Task[None] | None = None  # usage and timeline events (feeds/health.py)
        # Outbound notifications (notify/): the admin's settings, or why they are off.
        self.notify_settings, self.notify_error = notify_admin.load(settings)
        self.notifications: NotificationService | None = None
        self.server_url = ""  # the server's own URL (app.py), the links' base without `public_url`
        if error is None:
            self._construct()

    def _backend_class(self) -> type[Backend]:
        """`c.PaddleNbext.backend_class` when the site plugs in its own, else the shipped class
        `c.PaddleNbext.backend` names (imported only now: the other's dependencies are not needed)."""
        if self.settings.backend_class is not None:
            return self.settings.backend_class
        module_name, class_name = BACKEND_CLASSES[self.settings.backend]
        return getattr(importlib.import_module(module_name), class_name)  # type: ignore[no-any-return]

    def _construct(self) -> None:
        try:
            cls = self._backend_class()
            self.backend = cls(events=self.hub, parent=self.settings, **self._site_image(cls))
        except Exception as error:  # any failure must leave the server usable
            self.error = f"the {self.settings.backend_name} backend could not be created: {type(error).__name__}: {error}"
            self.settings.log.error("paddle-nbext: %s", self.error, exc_info=not isinstance(error, TraitError))
            return
        self._adopt_backend_image()

    def _site_image(self, cls: type[Backend]) -> dict[str, str]:
        """`c.PaddleNbext.default_image`, when set, as the backend's own `default_image` from the
        start (see `_adopt_backend_image`): a backend freezes its settings when it is made."""
        if self.settings.default_image and "default_image" in cls.class_trait_names():
            return {"default_image": self.settings.default_image}
        return {}

    def _adopt_backend_image(self) -> None:
        """One default image for everything a backend runs.  `c.PaddleNbext.default_image`, when
        set, is also the backend's own (`c.KubernetesBackend.default_image`, which the job master
        runs in unless `master_image` says otherwise): the master never runs a built-in public
        image the admin did not choose.  Unset, the backend's own becomes the job default, so the
        image allow-list covers jobs that name no image, and `/config` shows the image jobs really
        get.  A `master_image` outside the allow-list is a configuration error too."""
        backend_image = getattr(self.backend, "default_image", None)
        if backend_image is None:
            return
        if self.settings.default_image:
            if backend_image != self.settings.default_image:  # a backend whose default_image is no trait
                self.backend.default_image = self.settings.default_image  # type: ignore[union-attr]
        else:
            self.settings.default_image = backend_image
            try:
                self.settings.check_consistency()
            except TraitError as error:
                self._refuse(f"{error} (it is the default image of the {self.settings.backend_name} backend)")
                return
        master_image = getattr(self.backend, "master_image", "")
        allowed = self.settings.allowed_images
        if master_image and allowed is not None and master_image not in allowed:
            self._refuse(
                f"c.KubernetesBackend.master_image {master_image!r} is not in PaddleNbext.allowed_images; "
                "add it there or leave master_image empty (the master then runs in the default image)"
            )

    def _refuse(self, error: str) -> None:
        """A configuration the backend must not run with: job routes answer 503 with this cause."""
        self.error = error
        self.settings.log.error("paddle-nbext: %s", error)
        self.backend = None  # never started

    @property
    def started(self) -> bool:
        """True once the backend has started (read fresh: it changes while callers await)."""
        return self._started

    async def try_start(self) -> None:
        """Start the backend once; after a failure try again at most every 30 s."""
        if self.backend is None or self._started or self.shutting_down.is_set():
            return
        if self._start_failed_at is not None and time.monotonic() - self._start_failed_at < START_RETRY_SECONDS:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.started:  # another request started it while this one waited for the lock
                return
            try:
                await self.backend.start()
            except Exception as error:
                self._start_failed_at = time.monotonic()
                self.error = f"the {self.settings.backend_name} backend could not start: {type(error).__name__}: {error}"
                self.settings.log.error("paddle-nbext: %s", self.error, exc_info=True)
                return
            self._started, self.error, self._start_failed_at = True, None, None
            self._metrics = asyncio.create_task(MetricsTicker(self.hub, self.backend).run(), name="paddle-nbext-metric-events")
            self._health = asyncio.create_task(HealthTicker(self.hub, self.backend).run(), name="paddle-nbext-health-events")
            await self._start_notifications(self.backend)

    async def _start_notifications(self, backend: Backend) -> None:
        """Notifications run beside the backend; failing to start them leaves jobs running and
        `GET /notifications` saying why."""
        if self.notify_error is not None or not self.notify_settings.channels:
            return
        service = NotificationService(self.notify_settings, self.hub, backend, self.server_url)
        try:
            await service.start()
        except Exception as error:
            self.notify_error = f"notifications could not start: {type(error).__name__}: {error}"
            self.settings.log.error("paddle-nbext: %s", self.notify_error, exc_info=True)
            return
        self.notifications = service

    async def ready_backend(self) -> Backend:
        await self.try_start()
        if self.shutting_down.is_set():
            raise BackendUnavailable("the server is shutting down")
        if self.backend is None or not self._started:
            raise BackendUnavailable(f"paddle-nbext cannot run jobs: {self.error}")
        return self.backend

    def describe_backend(self) -> dict[str, Any]:
        facts: dict[str, Any] = {}
        if self.backend is not None:
            try:
                facts = dict(self.backend.describe())
            except Exception as error:
                facts = {"describe_error": str(error)}
        # The backend's own verdict counts too (e.g. Kubernetes: started, but its API is unreachable).
        backend_ok = facts.get("ok", True) is not False
        ok = self.backend is not None and self._started and self.error is None and backend_ok
        problem = self.error or (None if backend_ok else facts.get("error"))
        return {**facts, "name": self.settings.backend_name, "ok": ok, "error": None if ok else problem}

    async def stop(self) -> None:
        """End open streams, then release the backend's watches (jobs keep running)."""
        self.shutting_down.set()
        if self._metrics is not None:
            self._metrics.cancel()
            self._metrics = None
        if self._health is not None:
            self._health.cancel()
            self._health = None
        if self.notifications is not None:
            await self.notifications.stop()
            self.notifications = None
        if self.backend is not None and self._started:
            self._started = False
            try:
                await self.backend.stop()
            except Exception:
                self.settings.log.exception("paddle-nbext: stopping the backend failed")
