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
# Tests run `python -m dmlcli` in temporary folders: a relative PYTHONPATH (`PYTHONPATH=.`) would make those
# processes import whatever dmlcli is installed instead of this checkout's, so its root goes first, absolute.
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
# The reference data (DirectML pages, peer test vectors, DxDispatch models) lives beside the clone as
# ../shared; DMLCLI_SHARED points elsewhere. Without it the tests that read it skip, saying why.
SHARED = Path(os.environ.get("DMLCLI_SHARED") or REPO.parent / "shared").resolve()  # absolute: tests change folder
SHARED_MISSING = (f"{SHARED} not found: these tests read the reference data in ../shared beside the clone "
                  "(or set DMLCLI_SHARED to its folder)")


def shared_params(paths: list) -> list:
    """Parameters drawn from ../shared; without it, one skipped parameter that says why."""
    if SHARED.is_dir():
        return paths
    return [pytest.param(None, id="no-shared", marks=pytest.mark.skip(reason=SHARED_MISSING))]


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(SHARED_MISSING)
    return SHARED


@pytest.fixture(autouse=True)
def _no_colour(monkeypatch):
    # Rich would otherwise pick up the developer's terminal settings.
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("DMLCLI_DEBUG", raising=False)
    yield


@pytest.fixture(scope="module")
def gpu_backend():
    """The GPU backend, or a skip saying why no device can run it (a GPU test module asks for it by name, after
    `pytest.importorskip("cupy")`)."""
    from dmlcli.backends import gpu
    from dmlcli.errors import BackendUnavailableError

    try:
        return gpu.create()
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


@pytest.fixture(scope="module")
def gpu_usable(gpu_backend):
    """Skips a GPU test module where CuPy is installed but no device (or driver) can run it: a module asks for it
    with `pytestmark = pytest.mark.usefixtures("gpu_usable")` after `pytest.importorskip("cupy")`."""
