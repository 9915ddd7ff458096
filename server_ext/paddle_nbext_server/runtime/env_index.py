"""Where a job's packages come from: the site's index settings (the server's `pip_*` settings,
in the file the job runner writes) merged with the user's own `pip.conf`.

Why one value for both installers: uv and pip run without their own configuration files (so a
stray config in the image changes nothing the key does not know about), and get these settings
as flags; their credentials are masked in every record and log (`masked`, `secrets`) and never
written anywhere.

Standard library only: this file is shipped into every job beside the launcher.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

if __package__:  # imported from the installed package (the server, the local backend)
    from . import env_status
else:  # a plain script: the bundle's files beside this one
    import env_status  # type: ignore[import-not-found,no-redef]

INDEX_FILE_VAR = "PADDLE_NBEXT_PIP_INDEX_FILE"  # the site's index settings (JSON), optional


@dataclass(frozen=True)
class IndexSettings:
    """Where packages come from: the site's settings merged with the user's pip.conf."""

    index_url: str = ""
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    no_index: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IndexSettings:
        def words(key: str) -> tuple[str, ...]:
            value = data.get(key) or ()
            return tuple(str(each) for each in ([value] if isinstance(value, str) else value) if str(each).strip())

        return cls(
            str(data.get("index_url") or ""),
            words("extra_index_urls"),
            words("find_links"),
            words("trusted_hosts"),
            bool(data.get("no_index")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "index_url": self.index_url,
            "extra_index_urls": list(self.extra_index_urls),
            "find_links": list(self.find_links),
            "trusted_hosts": list(self.trusted_hosts),
            "no_index": self.no_index,
        }

    def merged(self, user: IndexSettings) -> IndexSettings:
        """The site's settings, with the user's pip.conf filling what the site leaves open and
        adding its extra indexes, links and trusted hosts."""
        return IndexSettings(
            self.index_url or user.index_url,
            _unique(self.extra_index_urls + user.extra_index_urls),
            _unique(self.find_links + user.find_links),
            _unique(self.trusted_hosts + user.trusted_hosts),
            self.no_index or user.no_index,
        )

    def secrets(self) -> list[str]:
        """The passwords and tokens in the URLs, to keep out of every log."""
        found = []
        for url in (self.index_url, *self.extra_index_urls, *self.find_links):
            parts = urlsplit(url)
            for secret in (parts.password, parts.username if parts.password is None else None):
                if secret and len(secret) >= 4:
                    found.append(secret)
        return found

    def masked(self) -> dict[str, Any]:
        """`to_json` with credentials replaced by `***` (for records, logs and the dry run)."""
        data = self.to_json()
        data["index_url"] = mask_url(self.index_url)
        data["extra_index_urls"] = [mask_url(url) for url in self.extra_index_urls]
        data["find_links"] = [mask_url(url) for url in self.find_links]
        return data

    def args(self, installer: str) -> list[str]:
        """The same settings as either installer's flags."""
        words: list[str] = []
        if self.no_index:
            words.append("--no-index")
        if self.index_url:
            words += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            words += ["--extra-index-url", url]
        for link in self.find_links:
            words += ["--find-links", link]
        for host in self.trusted_hosts:
            words += ["--allow-insecure-host" if installer == "uv" else "--trusted-host", host]
        return words


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def mask_url(url: str) -> str:
    """`url` with its password (or a lone token) replaced by `***`."""
    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = f"{parts.username}:***" if parts.password is not None else "***"
    return urlunsplit((parts.scheme, f"{user}@{host}", parts.path, parts.query, parts.fragment))


def pip_conf_files(env: Mapping[str, str]) -> list[str]:
    """The pip configuration files of the user, in pip's order (later ones win)."""
    if env.get("PIP_CONFIG_FILE"):
        return [env["PIP_CONFIG_FILE"]] if env["PIP_CONFIG_FILE"] != os.devnull else []
    home = env.get("HOME", "")
    config_home = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    files = ["/etc/pip.conf"]
    if home:
        files.append(os.path.join(home, ".pip", "pip.conf"))
    if config_home:
        files.append(os.path.join(config_home, "pip", "pip.conf"))
    return files


def read_pip_conf(env: Mapping[str, str]) -> IndexSettings:
    """The index settings of the user's pip.conf ([global] and [install]); empty when none."""
    parser = configparser.RawConfigParser()
    with contextlib.suppress(configparser.Error, OSError):
        parser.read([path for path in pip_conf_files(env) if os.path.isfile(path)], encoding="utf-8")

    def value(key: str) -> str:
        for section in ("install", "global"):
            if parser.has_option(section, key):
                return parser.get(section, key).strip()
        return ""

    def many(key: str) -> tuple[str, ...]:
        return tuple(word for word in value(key).split() if word)

    return IndexSettings(
        value("index-url"),
        many("extra-index-url"),
        many("find-links"),
        many("trusted-host"),
        value("no-index").lower() in ("1", "true", "yes", "on"),
    )


def site_settings(env: Mapping[str, str]) -> IndexSettings:
    """The site's settings from the file the job runner wrote (`INDEX_FILE_VAR`); empty when none."""
    path = env.get(INDEX_FILE_VAR, "").strip()
    if not path:
        return IndexSettings()
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return IndexSettings()
    return IndexSettings.from_json(data) if isinstance(data, dict) else IndexSettings()


def site_installer(env: Mapping[str, str]) -> str:
    """The installer the site asks for: `uv`, `pip` or `auto` (uv when there is one) [auto]."""
    path = env.get(INDEX_FILE_VAR, "").strip()
    data = env_status.read_json(path) if path else None
    chosen = str((data or {}).get("installer") or "auto")
    return chosen if chosen in ("uv", "pip", "auto") else "auto"
