import os
from pathlib import Path

import pytest
from hypothesis import settings

# In CI (CI=true) property tests draw the same examples every run, so that a red build is reproducible
# and never depends on the luck of a random seed; on a developer's machine they explore freely.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

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
