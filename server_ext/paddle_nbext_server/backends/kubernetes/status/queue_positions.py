"""Where each waiting Kueue Workload stands in its LocalQueue ("position 3 of 7").

Kueue's Workload objects say why a job waits but not who is ahead of it; that is what Kueue's
visibility API answers (``visibility.kueue.x-k8s.io``, an aggregated API served by Kueue itself:
``GET .../namespaces/<ns>/localqueues/<lq>/pendingworkloads`` lists the LocalQueue's pending
Workloads in admission order).  Asking it for every job list would cost one API call per list
and per queue, so positions are refreshed here in the background instead: only while some job of
ours waits in a queue this server sends jobs to, at most once per ``interval`` (sooner, but at
most once a second, after a Workload changes), one request per LocalQueue, in a thread.  Lists
read the cached positions.

Each failure says why once (``problem``, shown by ``GET /config``) and status falls back to the
words without a position: a Role without ``get`` on ``localqueues/pendingworkloads`` (403), a
Kueue without the visibility API or with it switched off (404), its APIService unavailable
(503), an unreachable API.  Then the next try waits ``retry`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ..client.cache import describe_failure
from . import queue_status

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # newest first; Kueue v0.17 serves both, older releases only v1beta1
#: Places shown per LocalQueue (Kueue's own default page); one more is asked for, to tell a queue
#: of exactly this many from a longer one ("position 7 of more than 1000").
LIMIT = 1000
REQUEST_TIMEOUT = 10.0
MIN_GAP = 1.0  # seconds between two refreshes, however often Workloads change

Changed = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Position:
    """1-based place of a Workload among its LocalQueue's pending ones, and how many there are."""

    position: int
    total: int

    def words(self) -> str:
        total = f"more than {LIMIT}" if self.total > LIMIT else str(self.total)
        return f"position {self.position} of {total}"


def waiting_queues(workloads: Iterable[dict[str, Any]], queues: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """LocalQueue -> the Workloads that wait in it (queued, or preempted and queued again; not
    admitted, stopped or finished), for the LocalQueues in ``queues`` only."""
    wanted = set(queues)
    found: dict[str, list[dict[str, Any]]] = {}
    for workload in workloads:
        queue = str((workload.get("spec") or {}).get("queueName") or "")
        if queue not in wanted or queue_status.finished(workload):
            continue
        if queue_status.words(workload).state in (queue_status.QUEUED, queue_status.PREEMPTED):
            found.setdefault(queue, []).append(workload)
    return found


def positions_of(summary: dict[str, Any]) -> dict[str, Position]:
    """Workload name -> Position, from a ``PendingWorkloadsSummary`` of one LocalQueue (its items
    in admission order; ``positionInLocalQueue`` counts from 0); the first LIMIT of them."""
    items = [item for item in summary.get("items") or [] if isinstance(item, dict)]
    found: dict[str, Position] = {}
    for index, item in enumerate(items[:LIMIT]):
        name = str((item.get("metadata") or {}).get("name") or "")
        place = item.get("positionInLocalQueue")
        if name:
            found[name] = Position((place if isinstance(place, int) else index) + 1, len(items))
    return found


def _not_found_kind(error: ApiException) -> str:
    """The kind a 404 names: "localqueue" when Kueue does not know the LocalQueue, "" when the
    API server does not serve the path at all (no such group or version)."""
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        return str((json.loads(error.body or "{}").get("details") or {}).get("kind") or "")
    return ""


def _get(api: client.ApiClient, path: str) -> dict[str, Any]:
    """One authenticated GET of ``path`` (blocking: call it in a thread)."""
    method, url, headers, body, post = api.param_serialize(
        "GET", path, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
    )
    response = api.call_api(method, url, headers, body, post, _request_timeout=REQUEST_TIMEOUT)
    response.read()
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    found = json.loads(response.data or b"{}")
    return found if isinstance(found, dict) else {}


class QueuePositions:
    """The cached positions of one namespace's waiting Workloads and the loop that refreshes them."""

    def __init__(self, *, interval: float = 3.0, retry: float = 30.0, log: logging.Logger | None = None) -> None:
        self.interval = interval
        self.retry = retry
        self.log = log or logging.getLogger(__name__)
        self.version: str | None = None  # the visibility API version in use, once one answered
        self.problem: str | None = None  # why positions are not shown, while they are not
        self.refreshes = 0  # completed refreshes (each one request per LocalQueue with waiting jobs)
        self._positions: dict[str, Position] = {}  # Workload name -> its place
        self._seen: dict[str, dict[str, Any]] = {}  # Workload name -> the Workload it was computed for
        self._poked = asyncio.Event()

    def position_of(self, workload: dict[str, Any]) -> Position | None:
        return self._positions.get(str((workload.get("metadata") or {}).get("name") or ""))

    def words_of(self, workload: dict[str, Any]) -> str | None:
        """ "position 3 of 7" for `workload`, None while its place is not known."""
        place = self.position_of(workload)
        return place.words() if place else None

    def poke(self) -> None:
        """A Workload changed: refresh soon (at most once per MIN_GAP)."""
        self._poked.set()

    def describe(self) -> dict[str, Any]:
        """For ``GET /config``: where positions come from and, while they cannot be read, why."""
        return {"api": f"{GROUP}/{self.version}" if self.version else None, "error": self.problem}

    async def run(
        self, api: client.ApiClient, namespace: str, workloads: Callable[[], Iterable[dict[str, Any]]], queues: list[str], changed: Changed
    ) -> None:
        """Refresh until cancelled; ``changed(workload)`` for every Workload whose position moved,
        appeared or went (the backend then recomputes its job's status)."""
        while True:
            waiting = waiting_queues(workloads(), queues)
            delay = self.interval
            if waiting:
                try:
                    found = await asyncio.to_thread(self._fetch, api, namespace, sorted(waiting))
                except ApiException as error:
                    self._failed(self._explain(error, namespace), changed)
                    delay = self.retry
                except Exception as error:  # noqa: BLE001 - connection refused, timeouts, bad JSON
                    self._failed(f"Kueue's visibility API could not be reached ({describe_failure(error)})", changed)
                    delay = self.retry
                else:
                    if self.problem:
                        self.log.info("paddle-nbext: Kueue queue positions are shown again")
                    self.problem = None
                    self.refreshes += 1
                    self._update(found, {str((w.get("metadata") or {}).get("name")): w for ws in waiting.values() for w in ws}, changed)
            else:
                self._update({}, {}, changed)
            await asyncio.sleep(MIN_GAP)
            self._poked.clear()
            # asyncio.wait, not wait_for, which on Python 3.11 can lose a cancel that arrives as
            # the event is set (the loop would then outlive its stop).
            poked = asyncio.ensure_future(self._poked.wait())
            try:
                await asyncio.wait({poked}, timeout=max(delay - MIN_GAP, 0.0))
            finally:
                poked.cancel()

    # ------------------------------------------------------------------ pieces

    def _fetch(self, api: client.ApiClient, namespace: str, queues: list[str]) -> dict[str, Position]:
        """Every LocalQueue's positions (blocking).  The version is found once: a 404 that names
        no LocalQueue means the version is not served, so the next older one is tried."""
        found: dict[str, Position] = {}
        for queue in queues:
            for version in [self.version] if self.version else list(VERSIONS):
                path = f"/apis/{GROUP}/{version}/namespaces/{namespace}/localqueues/{queue}/pendingworkloads?limit={LIMIT + 1}"
                try:
                    found.update(positions_of(_get(api, path)))
                except ApiException as error:
                    if error.status != 404:
                        raise
                    if _not_found_kind(error) == "localqueue":
                        break  # Kueue knows no such LocalQueue (yet): no positions in it
                    if version == VERSIONS[-1] or self.version:
                        self.version = None
                        raise
                    continue
                self.version = version
                break
        return found

    def _explain(self, error: ApiException, namespace: str) -> str:
        cause = describe_failure(error)
        if error.status in (401, 403):
            return (
                f"the notebook's service account may not read Kueue's pending workloads in namespace {namespace} ({cause}); "
                f"grant get on localqueues/pendingworkloads in API group {GROUP} (deploy/rbac/notebook-role-queues.yaml)"
            )
        if error.status == 404:
            return (
                f"the cluster serves no Kueue visibility API ({GROUP}, {cause}): Kueue is older than v0.9 or runs "
                "with its VisibilityOnDemand feature gate off"
            )
        if error.status == 503:
            return f"Kueue's visibility API is unavailable ({cause}): its APIService has no ready server"
        return f"Kueue's visibility API failed ({cause})"

    def _failed(self, problem: str, changed: Changed) -> None:
        if problem != self.problem:
            self.log.warning("paddle-nbext: queue positions are not shown: %s", problem)
        self.problem = problem
        self._update({}, {}, changed)

    def _update(self, found: dict[str, Position], workloads: dict[str, dict[str, Any]], changed: Changed) -> None:
        before, seen = self._positions, self._seen
        self._positions = {name: place for name, place in found.items() if name in workloads}
        self._seen = {name: workloads[name] for name in self._positions}
        for name in set(before) | set(self._positions):
            if before.get(name) != self._positions.get(name):
                changed(self._seen.get(name) or seen[name])


__all__ = ["GROUP", "LIMIT", "VERSIONS", "Position", "QueuePositions", "positions_of", "waiting_queues"]
