"""Streamed .npy runs on the GPU through engine/file_pipeline.py: each input chunk read straight into the backend's
pinned memory, the output file the same bytes as the CPU backend's. They need CuPy and a CUDA device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dmlcli
from dmlcli.errors import InputError

cupy = pytest.importorskip("cupy")


def save(tmp_path: Path, arrays, byteorder: str = "=") -> list[str]:
    paths = []
    for i, array in enumerate(arrays):
        path = tmp_path / f"in{i}.npy"
        np.save(path, array.astype(array.dtype.newbyteorder(byteorder)))
        paths.append(str(path))
    return paths


def random_bits(dtype, shape, seed: int):
    count = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.random.default_rng(seed).integers(0, 256, size=count, dtype=np.uint8).view(dtype).reshape(shape)


# Exact operators (bits compare): bitwise, comparisons, integer arithmetic, a float classification.
CASES = [("bit_xor", np.uint8, 2), ("bit_and", np.uint64, 2), ("logical_equals", np.float32, 2),
         ("is_infinity", np.float32, 1), ("add", np.int32, 2), ("bit_not", np.uint16, 1)]


@pytest.mark.parametrize("byteorder", ["=", ">"])
@pytest.mark.parametrize("shape,chunk_bytes", [((3_000_001,), 1 << 20), ((1000, 997), 3 << 20), ((7, 5), 1 << 20)])
@pytest.mark.parametrize("op,dtype,count", CASES, ids=[case[0] for case in CASES])
def test_the_gpus_file_output_has_the_cpus_bytes(tmp_path, gpu_backend, op, dtype, count, shape, chunk_bytes,
                                                    byteorder):
    paths = save(tmp_path, [random_bits(dtype, shape, seed) for seed in range(count)], byteorder)
    dmlcli.run_files(op, paths, str(tmp_path / "cpu.npy"), backend="cpu")
    dmlcli.run_files(op, paths, str(tmp_path / "gpu.npy"), backend=gpu_backend, chunk_bytes=chunk_bytes)
    assert (tmp_path / "gpu.npy").read_bytes() == (tmp_path / "cpu.npy").read_bytes()


def test_no_staging_copy_is_made(tmp_path, gpu_backend, monkeypatch):
    """The chunks are read into pinned memory, so the backend copies none of them into its staging buffers."""
    paths = save(tmp_path, [random_bits(np.uint8, (40 << 20,), seed) for seed in range(2)])
    staged = []
    real = type(gpu_backend)._host_copy
    monkeypatch.setattr(gpu_backend, "_host_copy", lambda target, source: (staged.append(target.nbytes),
                                                                       real(gpu_backend, target, source)))
    dmlcli.run_files("bit_xor", paths, str(tmp_path / "gpu.npy"), backend=gpu_backend, chunk_bytes=8 << 20)
    assert staged == []
    expected = np.load(paths[0]) ^ np.load(paths[1])
    np.testing.assert_array_equal(np.load(tmp_path / "gpu.npy"), expected)


def test_a_truncated_input_leaves_the_target_as_it_was(tmp_path, gpu_backend):
    paths = save(tmp_path, [random_bits(np.uint8, (8 << 20,), seed) for seed in range(2)])
    with open(paths[1], "r+b") as handle:  # the header says 8 MiB, the file holds less
        handle.truncate(5 << 20)
    target = tmp_path / "out.npy"
    target.write_bytes(b"previous")
    with pytest.raises(InputError, match="ended early|truncated|smaller"):
        dmlcli.run_files("bit_xor", paths, str(target), backend=gpu_backend, chunk_bytes=1 << 20)
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in0.npy", "in1.npy", "out.npy"]
