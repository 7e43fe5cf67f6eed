import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"{SHARED} is missing: the tests need ../shared beside the repository")
    return SHARED


@pytest.fixture(autouse=True)
def _no_colour(monkeypatch):
    # Rich would otherwise pick up the developer's terminal settings.
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("DMLCLI_DEBUG", raising=False)
    yield
