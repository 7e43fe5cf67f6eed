"""Zarr arrays in and out: local folders and fsspec URLs (memory://, s3://, ...), Zarr v3 and v2.

Inputs are opened read-only from their metadata (dtype, shape, chunks); no chunk is read until
Dask asks for it. Each chunk read goes through `ChunkReader`, so a chunk that fails to decode is
reported as bad input naming the store and the region, not as a traceback from a codec.

Outputs never read as a complete result before they are one:
- a local folder is built beside the target (`.NAME.PID.RANDOM.tmp` in the same parent) and renamed
  over it once every chunk is written and synced; an existing target is renamed aside first and
  deleted only after the new one is in place;
- an fsspec URL (object stores have no rename) gets its chunks first and the array's metadata last,
  so a reader sees no array until the end; a failed run removes what it wrote.

zarr and fsspec are imported only when a Zarr store is used (`pip install 'dmlcli[dask]'`).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

import numpy as np

from ..data_types import DataType, from_numpy, is_four_bit_dtype
from ..errors import BackendUnavailableError, InputError, first_line, quoted, raise_interruption
from .atomic import sync_folder
from .remote import store_failure
from .zarr_names import is_url, is_zarr_source  # noqa: F401 - part of this module's interface

# shutil and secrets are imported where a store is written: shutil alone pulls in bz2 and lzma.
INSTALL_HINT = "pip install 'dmlcli[dask]'"
_METADATA_KEYS = ("zarr.json", ".zarray", ".zattrs", ".zgroup")


def require_zarr():
    """The zarr module, or exit 4 with the install command."""
    try:
        import zarr
    except ImportError as error:
        raise_interruption(error)
        raise BackendUnavailableError(f"Zarr stores need zarr, which is not installed; install it with "
                                      f"{INSTALL_HINT}") from None
    return zarr


# ---------------------------------------------------------------- reading


def open_input(source: str, *, label: str, dtype: DataType | None = None):
    """Open a Zarr array read-only from its metadata; missing or corrupt stores are InputErrors (exit 2)."""
    zarr = require_zarr()
    where = f"{label} {quoted(source)}"
    if not is_url(source) and not Path(source).exists():
        raise InputError(f"{where}: no such Zarr store")
    try:
        array = zarr.open_array(store=source, mode="r")
    except Exception as error:  # noqa: BLE001 - zarr and fsspec's back ends raise many kinds
        # Unreachable, or its fsspec back end missing: the environment's fault (exit 4), not the store's.
        failure = store_failure(error, source, where) if is_url(source) else None
        if failure is not None:
            raise failure from None
        if isinstance(error, (FileNotFoundError, KeyError)):
            raise InputError(f"{where}: is not a Zarr array (no zarr.json or .zarray metadata found)") from None
        if isinstance(error, ImportError):
            raise BackendUnavailableError(f"{where}: {first_line(error)}") from None
        raise InputError(f"{where}: malformed Zarr metadata ({first_line(error)})") from None
    try:
        data_type = from_numpy(np.dtype(array.dtype))
    except (InputError, TypeError) as error:
        raise InputError(f"{where}: {error}") from None
    if dtype is not None and data_type != dtype:
        raise InputError(f"{where}: holds {data_type.name} but --dtype says {dtype.name}")
    return array


def zarr_format(array) -> int:
    return int(array.metadata.zarr_format)


class ChunkReader:
    """A Zarr array as Dask's `from_array` reads it, with decoding failures named as bad input.

    Picklable (the zarr array pickles with its store and metadata), so workers read the chunks themselves.
    """

    def __init__(self, array, where: str, url: str | None = None):
        self.array = array
        self.where = where
        self.url = url  # the store's URL where it is remote: its failures may be the network's
        self.shape = tuple(array.shape)
        self.dtype = np.dtype(array.dtype)
        self.ndim = len(self.shape)

    def __getitem__(self, region):
        try:
            return self.array[region]
        except Exception as error:  # noqa: BLE001 - codecs and stores raise many kinds
            failure = store_failure(error, self.url, self.where) if self.url else None
            if failure is not None:  # the store went away during the run
                raise failure from None
            raise InputError(f"{self.where}: a chunk in {_region_text(region)} cannot be read or decoded "
                             f"({type(error).__name__}: {first_line(error)})") from None


def _region_text(region) -> str:
    parts = region if isinstance(region, tuple) else (region,)
    return "[" + ", ".join(f"{s.start or 0}:{s.stop}" if isinstance(s, slice) else str(s) for s in parts) + "]"


# ---------------------------------------------------------------- writing


class OutputStore:
    """A Zarr array being written: `array` takes the chunks; `commit` makes it the target, `discard` removes it.

    """

    def __init__(self, target: str, array, local_folder: Path | None, metadata: dict[str, bytes]):
        self.target = target
        self.array = array  # zarr.Array
        self.local_folder = local_folder  # the temporary folder beside a local target; None for a URL
        self.metadata = metadata  # for a URL: the metadata documents, written by commit

    def commit(self) -> None:
        if self.local_folder is not None:
            _sync_tree(self.local_folder)
            _replace_folder(self.local_folder, Path(self.target))
        else:
            mapper = _mapper(self.target)
            for key, value in self.metadata.items():  # last: until now no reader sees an array here
                mapper[key] = value

    def discard(self) -> None:
        import shutil

        if self.local_folder is not None:
            shutil.rmtree(self.local_folder, ignore_errors=True)
        else:
            _remove_url(self.target)


def check_output_store(target: str) -> None:
    """Refuse a local output the run could not write, before any work (as atomic.check_output_path does)."""
    if is_url(target):
        return
    path = Path(target.rstrip("/\\"))
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"output {quoted(target)}: folder {quoted(folder)} does not exist")
    if path.exists() and not path.is_dir():
        raise InputError(f"output {quoted(target)}: is a file, not a Zarr store (a folder)")
    if not os.access(folder, os.W_OK):
        raise InputError(f"output {quoted(target)}: folder {quoted(folder)} is not writable")


@contextlib.contextmanager
def output_store(target: str, *, shape, chunks, dtype: np.dtype, zarr_format: int = 3) -> Iterator[OutputStore]:
    """A new Zarr array for `target`, committed when the block ends normally and removed when it fails.

    The compressor is Zarr's default for the format.
    """
    if is_four_bit_dtype(np.dtype(dtype)):
        raise InputError(f"{target}: Zarr has no 4-bit data type, so an INT4 or UINT4 result cannot be a Zarr store; "
                         "write it to a .npy file (dmlcli keeps int4 and uint4 there)")
    zarr = require_zarr()
    check_output_store(target)
    settings = dict(shape=tuple(shape), chunks=tuple(chunks), dtype=np.dtype(dtype), zarr_format=zarr_format)
    if is_url(target):
        store = _start_url(zarr, target, settings)
    else:
        store = _start_local(zarr, target, settings)
    try:
        yield store
        store.commit()
    except BaseException as error:
        with contextlib.suppress(Exception):  # an unreachable store cannot be cleaned either; the failure says why
            store.discard()
        failure = store_failure(error, target, f"output {quoted(target)}") if is_url(target) else None
        if failure is not None:
            raise failure from None
        if isinstance(error, OSError) and not isinstance(error, ConnectionError):
            raise InputError(f"output {quoted(target)}: write failed ({error.strerror or first_line(error)}); "
                             "the target was left as it was and the partial store removed") from None
        raise


def _start_local(zarr, target: str, settings: dict) -> OutputStore:
    import secrets
    import shutil

    path = Path(os.path.abspath(target.rstrip("/\\")))
    remove_stale_folders(path)
    folder = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        array = zarr.create_array(store=str(folder), **settings)
    except OSError as error:
        shutil.rmtree(folder, ignore_errors=True)
        raise InputError(f"output {quoted(target)}: cannot create a Zarr store in {quoted(path.parent)} "
                         f"({error.strerror or first_line(error)})") from None
    return OutputStore(target, array, folder, {})


def _start_url(zarr, target: str, settings: dict) -> OutputStore:
    # The array is made in a memory store first, for its metadata documents; the array object that
    # writes the chunks points at the URL, where no metadata are written until commit: a reader sees
    # no array there until every chunk is in.
    from zarr.core.array import AsyncArray
    from zarr.storage import FsspecStore, MemoryStore, StorePath

    documents: dict = {}
    scratch = zarr.create_array(store=MemoryStore(store_dict=documents), **settings)
    try:
        _remove_url(target)  # an old array here stops reading as complete before its chunks are replaced
        store = FsspecStore.from_url(target, read_only=False)
    except Exception as error:  # noqa: BLE001 - object stores raise their own kinds
        # Unreachable, or the URL's protocol needs a package (aiohttp, s3fs, gcsfs, ...): exit 4.
        failure = store_failure(error, target, f"output {quoted(target)}")
        if failure is not None:
            raise failure from None
        raise InputError(f"output {quoted(target)}: cannot open the store ({first_line(error)})") from None
    array = zarr.Array(AsyncArray(metadata=scratch.metadata, store_path=StorePath(store)))
    metadata = {key: value.to_bytes() for key, value in documents.items()}
    return OutputStore(target, array, None, metadata)


def _mapper(url: str):
    import fsspec

    return fsspec.get_mapper(url)


def _remove_url(url: str) -> None:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    path = path.rstrip("/")
    # The metadata first: from then on what is left no longer reads as an array, whatever order the rest goes in.
    for key in _METADATA_KEYS:
        with contextlib.suppress(FileNotFoundError, OSError):
            fs.rm(f"{path}/{key}")
    with contextlib.suppress(FileNotFoundError, OSError):
        if fs.exists(path):
            fs.rm(path, recursive=True)


def _sync_tree(folder: Path) -> None:
    """fsync every file and folder of a finished local store, so that the rename publishes durable data."""
    for root, _dirs, files in os.walk(folder):
        for name in files:
            descriptor = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        sync_folder(Path(root))


def _replace_folder(new: Path, target: Path) -> None:
    """Rename `new` over `target`: an existing target goes aside first and is deleted only once `new` is in."""
    import secrets
    import shutil

    aside = None
    if target.exists() or target.is_symlink():
        aside = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.old"
        os.rename(target, aside)
    try:
        os.rename(new, target)
    except OSError:
        if aside is not None:
            os.rename(aside, target)
        raise
    sync_folder(target.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def remove_stale_folders(path: Path) -> None:
    """Remove the temporary and set-aside folders of earlier runs on `path` whose process is gone.

    A set-aside old store is put back if the target is missing (a run killed between its two renames).
    """
    import shutil

    from .atomic import _process_exists

    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    prefix = f".{path.name}."
    for name in names:
        if not name.startswith(prefix) or not name.endswith((".tmp", ".old")):
            continue
        pid_text = name[len(prefix):].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _process_exists(int(pid_text)):
            continue
        stale = path.parent / name
        if name.endswith(".old") and not path.exists():
            with contextlib.suppress(OSError):
                os.rename(stale, path)
                continue
        shutil.rmtree(stale, ignore_errors=True)
