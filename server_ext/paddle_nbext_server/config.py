"""`c.PaddleNbext.*`: which backend runs jobs, the job defaults and the server's limits.

The values are checked when the extension loads.  A bad value raises `TraitError` whose message
names the trait (`PaddleNbext.max_trainers ...`); the extension catches it, keeps JupyterLab
working, and reports the message through `GET /config` and every job route (503).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Type, Unicode, validate
from traitlets.config import LoggingConfigurable

from paddle_nbext.model.quantity import Quantity, QuantityError
from paddle_nbext.model.spec import JobSpec, Limits, SpecError, parse_duration

BACKENDS = ("local", "kubernetes")


def _trait_error(trait: str, message: str) -> TraitError:
    return TraitError(f"PaddleNbext.{trait}: {message}")


class PaddleNbext(LoggingConfigurable):
    """Server-side settings of paddle-nbext (set them in `jupyter_server_config.py`)."""

    backend = Enum(
        BACKENDS,
        default_value="local",
        config=True,
        help="Where jobs run: 'local' (processes on this machine) or 'kubernetes' (the user's namespace).",
    )
    backend_class = Type(
        default_value=None,
        allow_none=True,
        klass="paddle_nbext_server.backends.base.Backend",
        config=True,
        help=(
            "A backend class of the site's own, a subclass of paddle_nbext_server.backends.base.Backend given as "
            "'package.module.Class' (its `name` is what /config reports); when set it runs jobs instead of `backend`, "
            "whose 'local' and 'kubernetes' are shorthands for the shipped classes."
        ),
    )

    @property
    def backend_name(self) -> str:
        """The running backend's name: a plugged class's `name` (else its class name), or `backend`."""
        if self.backend_class is not None:
            return str(getattr(self.backend_class, "name", "") or self.backend_class.__name__)
        return str(self.backend)

    defaults = Dict(
        config=True,
        help="Job fields used when a request leaves them out, e.g. {'trainers': 2, 'trainer_mem': '2Gi'}.",
    )
    max_pservers = Int(16, config=True, help="Most parameter servers one job may ask for.")
    max_trainers = Int(64, config=True, help="Most trainers one job may ask for.")
    max_gpu_per_replica = Int(8, config=True, help="Most GPUs one trainer may ask for.")
    max_procs_per_trainer = Int(64, config=True, help="Most processes (ranks) one trainer may run (procs_per_trainer, GPUs).")
    max_gpu_per_job = Int(None, allow_none=True, config=True, help="Most GPUs one job may use in total (None: no limit).")
    max_cpu_per_replica = Unicode(None, allow_none=True, config=True, help="Largest CPU quantity per replica, e.g. '8' (None: no limit).")
    max_mem_per_replica = Unicode(
        None, allow_none=True, config=True, help="Largest memory quantity per replica, e.g. '32Gi' (None: no limit)."
    )
    max_restarts = Int(10, config=True, help="Largest number of whole-job restarts after failures a job may ask for.")
    max_timeout = Int(None, allow_none=True, config=True, help="Longest wall-clock limit in seconds (None: no limit).")
    allowed_images = List(
        Unicode(),
        default_value=None,
        allow_none=True,
        config=True,
        help="Images jobs may use (None: any image).",
    )
    default_image = Unicode(None, allow_none=True, config=True, help="Image used when a job names none (Kubernetes).")
    home_dir = Unicode(
        "",
        config=True,
        help="The users' home directory; trainer packages must live under it [the server's $HOME].",
    )
    secret_env = List(
        Unicode(),
        config=True,
        help=(
            "Environment variables of the server that jobs must never see, besides the Jupyter and Hub tokens "
            "(always kept out): names or shell-style patterns, e.g. ['AWS_SECRET_ACCESS_KEY', 'VAULT_*']."
        ),
    )
    pip_index_url = Unicode(
        "",
        config=True,
        help=(
            "Package index a job's requirements.txt is installed from (e.g. the site's mirror); empty: the user's "
            "pip.conf, else the installer's default. May hold a credential: it is kept out of logs, records and dry runs."
        ),
    )
    pip_extra_index_urls = List(Unicode(), config=True, help="More package indexes for jobs' requirements (pip's --extra-index-url).")
    pip_find_links = List(Unicode(), config=True, help="Directories or pages of wheels for jobs' requirements (pip's --find-links).")
    pip_trusted_hosts = List(
        Unicode(), config=True, help="Index hosts served without valid HTTPS (pip's --trusted-host, uv's --allow-insecure-host)."
    )
    pip_no_index = Bool(False, config=True, help="Install jobs' requirements only from pip_find_links (air-gapped sites).")
    pip_installer = Enum(
        ["auto", "uv", "pip"],
        "auto",
        config=True,
        help="Installer of jobs' requirements: 'auto' uses uv where the job's image (or Python environment) has it, else pip.",
    )
    max_streams_per_user = Int(
        32,
        config=True,
        help="Open event and log-follow streams one user may hold at once; one more is refused with 429.",
    )
    stream_ping_interval = Float(
        15.0,
        config=True,
        help="Seconds between keep-alive comments on open event streams (proxies close idle connections).",
    )

    # ---- validation: every message names the trait and what is allowed
    @validate("max_pservers", "max_trainers", "max_gpu_per_replica", "max_procs_per_trainer", "max_restarts", "max_streams_per_user")
    def _non_negative(self, proposal: dict[str, Any]) -> int:
        name = proposal["trait"].name
        value: int = proposal["value"]
        lowest = 1 if name in ("max_pservers", "max_trainers", "max_procs_per_trainer", "max_streams_per_user") else 0
        if value < lowest:
            raise _trait_error(name, f"must be at least {lowest}, got {value}")
        return value

    @validate("max_gpu_per_job", "max_timeout")
    def _optional_positive(self, proposal: dict[str, Any]) -> int | None:
        value: int | None = proposal["value"]
        if value is not None and value < 0:
            raise _trait_error(proposal["trait"].name, f"must be zero or more (or None for no limit), got {value}")
        return value

    @validate("max_cpu_per_replica", "max_mem_per_replica")
    def _quantity(self, proposal: dict[str, Any]) -> str | None:
        value: str | None = proposal["value"]
        if value is None:
            return None
        try:
            quantity = Quantity.parse(value)
        except QuantityError as error:
            raise _trait_error(proposal["trait"].name, f"{error} (e.g. '8' CPUs or '32Gi')") from None
        if quantity.value <= 0:
            raise _trait_error(proposal["trait"].name, f"must be positive, got {value!r}")
        return value

    @validate("stream_ping_interval")
    def _ping(self, proposal: dict[str, Any]) -> float:
        if not proposal["value"] > 0:
            raise _trait_error("stream_ping_interval", f"must be a positive number of seconds, got {proposal['value']}")
        value: float = proposal["value"]
        return value

    @validate("default_image")
    def _image(self, proposal: dict[str, Any]) -> str | None:
        value = proposal["value"] or None
        if value is not None and (any(c.isspace() for c in value)):
            raise _trait_error("default_image", f"{value!r} is not an image reference")
        return value

    @validate("defaults")
    def _defaults(self, proposal: dict[str, Any]) -> dict[str, Any]:
        value = dict(proposal["value"])
        unknown = sorted(set(value) - set(JobSpec.FIELDS))
        if unknown:
            raise _trait_error("defaults", f"unknown job field(s) {', '.join(unknown)}; allowed: {', '.join(JobSpec.FIELDS)}")
        if "job_name" in value:
            raise _trait_error("defaults", "job_name cannot have a default (names are unique per job)")
        # Each default must be a valid value for its field (checked with a placeholder command).
        errors = JobSpec.check({"entry_point": "python train.py", **value})
        bad = {field: message for field, message in errors.items() if field in value}
        if bad:
            field, message = next(iter(bad.items()))
            raise _trait_error("defaults", f"{field}: {message}")
        return value

    def check_consistency(self) -> None:
        """Cross-trait rules, run once after all values are loaded."""
        if self.allowed_images is not None and self.default_image and self.default_image not in self.allowed_images:
            raise _trait_error("default_image", f"{self.default_image!r} is not in PaddleNbext.allowed_images")
        if self.max_timeout is not None and self.defaults.get("timeout") is not None:
            try:
                seconds = parse_duration(self.defaults["timeout"])
            except SpecError as error:
                raise _trait_error("defaults", f"timeout: {error.message}") from None
            if seconds is not None and seconds > self.max_timeout:
                raise _trait_error("defaults", f"timeout {seconds}s exceeds PaddleNbext.max_timeout ({self.max_timeout}s)")
        errors = JobSpec.check({"entry_point": "python train.py", **self.job_defaults()}, limits=self.limits())
        if errors:
            field, message = next(iter(errors.items()))
            raise _trait_error("defaults", f"{field}: {message} (the defaults must fit the limits)")

    # ---- what the handlers use
    def limits(self) -> Limits:
        return Limits(
            max_pservers=self.max_pservers,
            max_trainers=self.max_trainers,
            max_gpu_per_replica=self.max_gpu_per_replica,
            max_procs_per_trainer=self.max_procs_per_trainer,
            max_gpu_per_job=self.max_gpu_per_job,
            max_cpu_per_replica=self.max_cpu_per_replica,
            max_mem_per_replica=self.max_mem_per_replica,
            max_restarts=self.max_restarts,
            max_timeout=self.max_timeout,
            allowed_images=tuple(self.allowed_images) if self.allowed_images is not None else None,
        )

    def job_defaults(self) -> dict[str, Any]:
        """`defaults` plus `default_image` as the image default."""
        merged = dict(self.defaults)
        if self.default_image and "image" not in merged:
            merged["image"] = self.default_image
        return merged

    def home(self) -> Path:
        return Path(os.path.expanduser(self.home_dir or "~"))
