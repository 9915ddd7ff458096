"""REST client for the paddle-nbext server extension (`{base_url}paddle/api/v1`).

Every kernel-side entry point (magics, Python API, widgets, CLI) goes through this one class, so
they all see the same jobs and report the same errors.  The errors are written for people: the
three situations users actually hit — the extension is not enabled, the server cannot be reached,
the credentials are refused — each get a sentence saying what to do, never a raw HTTP trace.

Discovery (docs/architecture.md, "Kernel discovery"): an explicit URL/token, else the
`PADDLE_NBEXT_API_URL` + `PADDLE_NBEXT_TOKEN` variables the server extension sets for kernels,
else the running-server list, choosing the server whose root dir contains the current directory.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from .model.contract import Role
from .model.status import JobStatus, SubmitPlan

if TYPE_CHECKING:  # requests is imported on the first request, keeping `%load_ext` cheap
    import requests

__all__ = [
    "Client",
    "PaddleNbextError",
    "ApiError",
    "ServerNotFound",
    "ServerUnreachable",
    "ExtensionMissing",
    "UnexpectedAnswer",
    "ServerVersion",
    "discover",
    "API_PATH",
    "ENV_URL",
    "ENV_TOKEN",
]

API_PATH = "paddle/api/v1"
ENV_URL = "PADDLE_NBEXT_API_URL"
ENV_TOKEN = "PADDLE_NBEXT_TOKEN"
ENABLE_HINT = "jupyter server extension enable paddle_nbext_server"
_TIMEOUT = 30.0
T = TypeVar("T")


class PaddleNbextError(Exception):
    """Base of every error the kernel side reports; `str()` is one complete sentence."""


class ServerNotFound(PaddleNbextError):
    """No server URL was given, set in the environment, or found among running servers."""


class ServerUnreachable(PaddleNbextError):
    """The server URL is known but nothing answers there."""


class ExtensionMissing(PaddleNbextError):
    """The Jupyter server answers but the paddle-nbext API is not there (extension disabled)."""


class UnexpectedAnswer(PaddleNbextError):
    """The API answered 2xx with a body that is not what the endpoint returns."""


@dataclass(frozen=True)
class ServerVersion:
    """`GET /version`: the server's package version and the API version it speaks."""

    version: str
    api: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerVersion:
        return cls(version=str(data.get("version", "")), api=str(data.get("api", "")))


class ApiError(PaddleNbextError):
    """The API answered with an error body `{error, message, field}`."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None):
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


def _api_base_from_server(info: Mapping[str, Any]) -> str:
    url = str(info.get("url") or "")
    if not url:
        host = info.get("hostname") or "127.0.0.1"
        url = f"http://{host}:{info.get('port')}{info.get('base_url') or '/'}"
    return url.rstrip("/") + "/" + API_PATH


def discover(cwd: str | None = None) -> tuple[str, str | None]:
    """(API base URL, token) from the environment, else from the running-server list: the server
    whose root holds `cwd` (the deepest one), else the user's only running server.

    The running-server list is consulted only when the variables are absent (a kernel started by
    some other server, or a terminal), and only then is `jupyter_server` imported — it is slow to
    import and kernels started by our extension never need it."""
    url = os.environ.get(ENV_URL)
    if url:
        return url.rstrip("/"), os.environ.get(ENV_TOKEN) or None
    try:
        from jupyter_server.serverapp import list_running_servers
    except ImportError:  # a bare kernel environment without jupyter_server
        servers: list[dict[str, Any]] = []
    else:
        servers = list(list_running_servers())
    here = os.path.realpath(cwd or os.getcwd())
    best: tuple[int, dict[str, Any]] | None = None
    for info in servers:
        root = os.path.realpath(str(info.get("root_dir") or info.get("notebook_dir") or ""))
        if root and (here == root or here.startswith(root.rstrip(os.sep) + os.sep)):
            if best is None or len(root) > best[0]:
                best = (len(root), info)
    if best is None and len(servers) == 1:
        # A terminal anywhere (say /tmp) beside the user's one running server: that is the one.
        best = (0, servers[0])
    if best is None:
        listed = "; ".join(str(info.get("url") or info.get("port")) for info in servers)
        which = f" (running: {listed}; none serves {here} or a parent of it)" if servers else " (none is running)"
        raise ServerNotFound(
            f"No Jupyter server found for {here}{which}: set {ENV_URL} (e.g. http://127.0.0.1:8888/{API_PATH}) "
            f"and {ENV_TOKEN}, or pass --url/--token, or run this from a directory the server serves."
        )
    return _api_base_from_server(best[1]), best[1].get("token") or None


class Client:
    """Thin, thread-safe wrapper over the REST API; one method per endpoint.

    `request_count` counts HTTP requests made; the benchmark uses it to prove the widgets make at
    most one request per refresh interval."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = _TIMEOUT):
        if url:
            url = url.rstrip("/")
            if not url.endswith(API_PATH):
                url = f"{url}/{API_PATH}"
            token = token or os.environ.get(ENV_TOKEN) or None
        else:
            url, found_token = discover()
            token = token or found_token
        self.url = url
        self.token = token
        self.timeout = timeout
        self.request_count = 0
        self._lock = threading.Lock()
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # ---- transport
    @property
    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            import requests

            session = requests.Session()
            session.trust_env = False  # loopback/cluster-internal URLs must not go through a proxy
            if self.token:
                session.headers["Authorization"] = f"token {self.token}"
            self._local.session = session
        return session

    def _request(self, method: str, path: str, *, stream: bool = False, **kwargs: Any) -> requests.Response:
        import requests

        url = f"{self.url}{path}"
        with self._lock:
            self.request_count += 1
        try:
            response = self._session.request(method, url, timeout=kwargs.pop("timeout", self.timeout), stream=stream, **kwargs)
        except requests.ConnectionError as error:
            raise ServerUnreachable(
                f"Cannot reach the Jupyter server at {self.url} ({_short_cause(error)}); is it running? Check the URL ({ENV_URL} or --url)."
            ) from None
        except requests.Timeout:
            raise ServerUnreachable(f"The Jupyter server at {self.url} did not answer within {self.timeout:g} s.") from None
        if response.status_code >= 400:
            self._raise_for(response)
        return response

    def _raise_for(self, response: requests.Response) -> None:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and "error" in body and "message" in body:
            message = str(body["message"]).rstrip(".")
            if response.status_code == 403:
                message += f" (403): set {ENV_TOKEN} or --token to the Jupyter server's token"
            raise ApiError(response.status_code, str(body["error"]), message, body.get("field"))
        if response.status_code == 404:
            raise ExtensionMissing(
                f"The Jupyter server at {self.url.removesuffix('/' + API_PATH)} has no paddle-nbext API "
                f"({API_PATH} answered 404): the server extension is not enabled. Enable it with "
                f"`{ENABLE_HINT}` and restart Jupyter."
            )
        if response.status_code == 403:
            raise ApiError(
                403,
                "forbidden",
                f"The Jupyter server at {self.url} refused the credentials (403): set {ENV_TOKEN} (or --token) to the server's token.",
            )
        raise ApiError(
            response.status_code,
            "http_error",
            f"The server answered {response.status_code} {response.reason} for {response.request.method} {response.url}.",
        )

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._request(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ExtensionMissing(
                f"{self.url}{path} did not return JSON; the paddle-nbext server extension is probably not enabled there (`{ENABLE_HINT}`)."
            ) from None

    def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """The JSON object an endpoint answers (each of them answers one)."""
        body = self._json(method, path, **kwargs)
        if not isinstance(body, dict):
            raise UnexpectedAnswer(
                f"{method} {self.url}{path} answered {type(body).__name__}, not a JSON object; is this a paddle-nbext server?"
            )
        return body

    def _status(self, method: str, path: str, **kwargs: Any) -> JobStatus:
        return _read(JobStatus.from_dict, self._object(method, path, **kwargs), f"{method} {self.url}{path}")

    # ---- endpoints
    def version(self) -> ServerVersion:
        return ServerVersion.from_dict(self._object("GET", "/version"))

    def config(self) -> dict[str, Any]:
        """Backend, defaults, limits and images: what forms are built from."""
        return self._object("GET", "/config")

    def list_jobs(self) -> list[JobStatus]:
        where = f"GET {self.url}/jobs"
        return [_read(JobStatus.from_dict, item, where) for item in self._object("GET", "/jobs").get("jobs") or []]

    def get_job(self, name: str) -> JobStatus:
        return self._status("GET", f"/jobs/{_quote(name)}")

    @overload
    def submit(self, spec: Mapping[str, Any], *, entry_script: str | None = None, dry_run: Literal[False] = False) -> JobStatus: ...

    @overload
    def submit(self, spec: Mapping[str, Any], *, entry_script: str | None = None, dry_run: Literal[True]) -> SubmitPlan: ...

    @overload
    def submit(self, spec: Mapping[str, Any], *, entry_script: str | None = None, dry_run: bool) -> JobStatus | SubmitPlan: ...

    def submit(self, spec: Mapping[str, Any], *, entry_script: str | None = None, dry_run: bool = False) -> JobStatus | SubmitPlan:
        """POST the spec; returns the new job's status (or, for a dry run, the plan: nothing is created)."""
        body = {k: v for k, v in spec.items() if v is not None}
        if entry_script is not None:
            body["entry_script"] = entry_script
        if dry_run:
            answer = self._object("POST", "/jobs", json=body, params={"dry_run": "true"})
            return _read(SubmitPlan.from_dict, answer, f"POST {self.url}/jobs?dry_run=true")
        return self._status("POST", "/jobs", json=body)

    def cancel(self, name: str) -> JobStatus:
        return self._status("POST", f"/jobs/{_quote(name)}/cancel")

    def delete(self, name: str, *, keep_checkpoints: bool = False) -> dict[str, Any] | None:
        """Delete the job; with `keep_checkpoints` its checkpoints are moved to
        `~/paddle-checkpoints/` first and the answer says where (`{"kept", "size"}`)."""
        if not keep_checkpoints:
            self._json("DELETE", f"/jobs/{_quote(name)}")
            return None
        return self._object("DELETE", f"/jobs/{_quote(name)}", params={"keep_checkpoints": "true"})

    def resume(self, name: str, **changes: Any) -> JobStatus:
        """Start a Cancelled or Failed job again as a new job from its latest checkpoint
        (`POST /jobs/{name}/resume`); `changes` are job fields to change (`job_name` too)."""
        body = {k: v for k, v in changes.items() if v is not None}
        return self._status("POST", f"/jobs/{_quote(name)}/resume", json=body)

    def checkpoints(self, name: str) -> dict[str, Any]:
        """The job's checkpoints (`GET /jobs/{name}/checkpoints`): `checkpoints` (step, time,
        size, path), `latest`, `size`, `job_size` (what a delete frees) and `resumed_from`."""
        return self._object("GET", f"/jobs/{_quote(name)}/checkpoints")

    def environments(self) -> dict[str, Any]:
        """Your jobs' Python environments (`GET /environments`): per environment its key,
        requirements, installed `packages`, `size`, `built`, `last_used` and the running jobs
        using it (`in_use_by`); and the totals `count`, `bytes`, `cache_bytes`."""
        return self._object("GET", "/environments")

    def prune_environments(self, *, unused_days: int = 30, dry_run: bool = False, cache: bool = False) -> dict[str, Any]:
        """Remove the environments no job started with for `unused_days` days and no running job
        uses (`POST /environments/prune`); `cache` also empties the download cache; `dry_run`
        removes nothing.  The answer lists what was (or would be) `removed` and `kept`, and `freed` bytes."""
        body = {"unused_days": unused_days, "dry_run": dry_run, "cache": cache}
        return self._object("POST", "/environments/prune", json=body)

    def notifications(self) -> dict[str, Any]:
        """Your notification settings, the channels the admin enabled, and how each channel's
        deliveries go (`GET /notifications`: `settings`, `channels` with `ok`, `last_error`, `pending`)."""
        return self._object("GET", "/notifications")

    def set_notifications(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Replace your notification settings (`PUT /notifications`); the answer is `notifications()`'s."""
        return self._object("PUT", "/notifications", json=dict(settings))

    def remove_environment(self, key: str) -> dict[str, Any]:
        """Remove one environment (`DELETE /environments/{key}`): `{"key", "size"}`."""
        return self._object("DELETE", f"/environments/{_quote(key)}")

    def logs(
        self,
        name: str,
        *,
        role: str = Role.TRAINER,
        index: int = 0,
        tail: int | None = None,
        previous: bool = False,
    ) -> str:
        params = _log_params(role, index, tail, previous, follow=False)
        return self._request("GET", f"/jobs/{_quote(name)}/logs", params=params).text

    def metrics(self, name: str, *, points: int | None = None, since: str | None = None) -> dict[str, Any]:
        """What the job's replicas `report()`ed (`GET /jobs/{name}/metrics`): per replica and
        metric, at most `points` points each (downsampled keeping first, last and extremes),
        only those after `since` (the `cursor` of an earlier answer)."""
        params = {key: str(value) for key, value in (("points", points), ("since", since)) if value is not None}
        return self._object("GET", f"/jobs/{_quote(name)}/metrics", params=params)

    def compare(self, names: Sequence[str]) -> dict[str, Any]:
        """Runs side by side (`GET /compare?jobs=a,b`): the spec fields and snapshot files that
        differ, and each job's final and best metrics, progress and colour."""
        return self._object("GET", "/compare", params={"jobs": ",".join(names)})

    def usage(self, name: str) -> dict[str, Any]:
        """CPU and memory in use per replica beside request and limit, peaks and recent samples
        (`GET /jobs/{name}/usage`); `available` false with the `reason` when there are none."""
        return self._object("GET", f"/jobs/{_quote(name)}/usage")

    def timeline(self, name: str, *, since: int = 0) -> dict[str, Any]:
        """What happened to the job, oldest first (`GET /jobs/{name}/timeline`): `entries`
        (`seq`, `t`, `kind`, `text`), only those after `since`, and `last`, the next `since`."""
        params = {"since": str(since)} if since else {}
        return self._object("GET", f"/jobs/{_quote(name)}/timeline", params=params)

    def follow_logs(self, name: str, *, role: str = Role.TRAINER, index: int = 0, tail: int | None = None) -> Iterator[str]:
        """Yield log text as it is written, until the replica ends (the server closes the stream)."""
        params = _log_params(role, index, tail, False, follow=True)
        response = self._request("GET", f"/jobs/{_quote(name)}/logs", params=params, stream=True, timeout=(self.timeout, None))
        with response:
            for chunk in response.iter_content(chunk_size=None, decode_unicode=True):
                if chunk:
                    yield chunk if isinstance(chunk, str) else chunk.decode("utf-8", "replace")


def _read(build: Callable[[Mapping[str, Any]], T], body: Mapping[str, Any], where: str) -> T:
    """`build(body)`, or one sentence naming the answer when it lacks what identifies the object."""
    try:
        return build(body)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise UnexpectedAnswer(
            f"{where} answered a body this client cannot read ({type(error).__name__}: {error}); is the server a compatible paddle-nbext?"
        ) from None


def _log_params(role: str, index: int, tail: int | None, previous: bool, *, follow: bool) -> dict[str, str]:
    params = {"role": role, "index": str(index)}
    if tail is not None:
        params["tail"] = str(tail)
    if previous:
        params["previous"] = "true"
    if follow:
        params["follow"] = "true"
    return params


def _quote(name: str) -> str:
    from urllib.parse import quote

    return quote(str(name), safe="")


def _short_cause(error: Exception) -> str:
    text = str(error)
    for marker in ("Connection refused", "Name or service not known", "No route to host", "timed out"):
        if marker in text:
            return marker.lower()
    return type(error).__name__


def dumps(data: Any) -> str:
    """Pretty JSON used by the CLI and the dry-run output."""
    return json.dumps(data, indent=2, sort_keys=False, default=str)
