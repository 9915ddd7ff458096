"""The job master's image obeys the site's image settings (issue 22): it holds an API token, so
it never runs an image the admin did not choose, not even the backend's built-in default."""

from __future__ import annotations

from traitlets.config import Config

from paddle_nbext_server.config import PaddleNbext
from paddle_nbext_server.state import ExtensionState


def state_for(paddle: dict[str, object], kubernetes: dict[str, object] | None = None) -> ExtensionState:
    config = Config({"PaddleNbext": {"backend": "kubernetes", **paddle}, "KubernetesBackend": kubernetes or {}})
    settings = PaddleNbext(config=config)
    settings.check_consistency()
    return ExtensionState(settings)


def master_image(state: ExtensionState) -> str:
    backend = state.backend
    assert backend is not None, state.error
    settings = backend.admission.manifest_settings("team-a")  # type: ignore[attr-defined]
    return str(settings.master_image or settings.default_image)


def test_the_sites_default_image_is_the_masters_too() -> None:
    state = state_for({"default_image": "registry.example.org/ml/paddle:3.0.0", "allowed_images": ["registry.example.org/ml/paddle:3.0.0"]})
    assert state.error is None
    assert master_image(state) == "registry.example.org/ml/paddle:3.0.0"  # not the built-in public image


def test_a_master_image_outside_the_allow_list_is_refused_naming_the_setting() -> None:
    state = state_for(
        {"default_image": "registry.example.org/ml/paddle:3.0.0", "allowed_images": ["registry.example.org/ml/paddle:3.0.0"]},
        {"master_image": "python:3.12-slim"},
    )
    assert state.backend is None
    assert state.error is not None and "master_image 'python:3.12-slim' is not in PaddleNbext.allowed_images" in state.error


def test_an_allowed_master_image_is_used() -> None:
    allowed = ["registry.example.org/ml/paddle:3.0.0", "registry.example.org/ml/master:1"]
    state = state_for({"default_image": allowed[0], "allowed_images": allowed}, {"master_image": allowed[1]})
    assert master_image(state) == "registry.example.org/ml/master:1"
