"""The pinned Helm for tests/deploy: built through the control plane's cached builder when
`controlplane build` has not made it yet (the "rest" line of scripts/test.sh may run first; a
lock makes a second builder wait for the first), skipped only where no Go can build it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.controlplane.build import helm_binary
from support.controlplane.errors import ControlPlaneError


@pytest.fixture(scope="session")
def helm_path() -> Path:
    try:
        return helm_binary()
    except ControlPlaneError as error:
        if "needs Go" in str(error) or "cannot start Go" in str(error):
            pytest.skip(f"Helm is not built and cannot be here: {error}")
        raise
