"""`/config`, `/version`, `/openapi.json`, and JSON 404s for unknown API paths."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from paddle_nbext.model.schema import effective_defaults, job_schema

from ..version import __version__
from .base import PaddleAPIHandler

API_VERSION = "v1"
OPENAPI_PATH = Path(__file__).resolve().parent.parent / "openapi.json"


@lru_cache(maxsize=1)
def _openapi_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(OPENAPI_PATH.read_text(encoding="utf-8"))
    return document


class ConfigHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        state = self.state
        settings = state.settings
        limits = settings.limits()
        await state.try_start()
        images = list(limits.allowed_images) if limits.allowed_images is not None else []
        if settings.default_image and settings.default_image not in images:
            images.insert(0, settings.default_image)
        backend = state.describe_backend()
        self.write_json(
            {
                "backend": backend,
                "defaults": effective_defaults(settings.job_defaults()),
                "job_schema": job_schema(limits, settings.job_defaults(), backend=str(backend["name"]), images=images),
                "limits": limits.to_dict(),
                "images": images,
                "default_image": settings.default_image,
                "version": __version__,
                "user": self.owner,
                "home": str(settings.home()),
            }
        )


class VersionHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.write_json({"version": __version__, "api": API_VERSION})


class OpenAPIHandler(PaddleAPIHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        document = dict(_openapi_document())
        base = url_path_join(self.base_url, "paddle", "api", API_VERSION)
        document["servers"] = [{"url": base}]
        self.write_json(document)


class NotFoundHandler(PaddleAPIHandler):
    """Any other path under the API base: a JSON 404 rather than an HTML page."""

    @web.authenticated
    def get(self, *args: Any) -> None:
        guide = url_path_join(self.base_url, "paddle/api/v1/openapi.json")
        raise web.HTTPError(404, f"no API route {self.request.path}; the routes are listed in {guide}")

    post = put = patch = delete = get
