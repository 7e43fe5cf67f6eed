"""Shaped operators that stream (REDUCE over leading or trailing axes, JOIN along axis 0): the same results as
in memory, across chunk boundaries, in bounded memory; the others run in memory."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dmlcli
from dmlcli import engine

FUNCTIONS = ["SUM", "AVERAGE", "L1", "L2", "SUM_SQUARE", "LOG_SUM", "LOG_SUM_EXP", "MULTIPLY", "MAX", "MIN",
             "ARGMAX", "ARGMIN"]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setenv("DMLCLI_CHUNK_BYTES", "512")  # many chunks even for small test files


def streamed(tmp_path, op, arrays, **params):
    sources = []
    for i, array in enumerate(arrays):
        path = tmp_path / f"in{i}.npy"
        np.save(path, array)
        sources.append(str(path))
    target = tmp_path / "out.npy"
    outcome = engine.run_sources(engine.request(op, **params), sources, output=str(target))
    return outcome, np.load(target)


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("axes", [(0,), (0, 1), (1, 2), (2,), None])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_reduce_streams_and_matches_the_in_memory_result(tmp_path, function, axes, dtype):
    rng = np.random.default_rng(7)
    x = (rng.random((40, 6, 5)) + 0.5).astype(dtype)
    outcome, got = streamed(tmp_path, "reduce", [x], function=function, axes=axes)
    assert outcome.output is None  # went through the streaming path
    want = dmlcli.run("reduce", x, function=function, axes=axes)
    assert got.dtype == want.dtype and got.shape == want.shape
    if function in ("MAX", "MIN", "ARGMAX", "ARGMIN"):
        np.testing.assert_array_equal(got, want)
    else:
        count = x.size // want.size
        tolerance = 2 * count * np.finfo(dtype).eps
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tolerance, atol=0)


def test_argmax_keeps_the_first_index_across_chunks_and_skips_nan(tmp_path):
    x = np.zeros((300, 3), np.float32)
    x[5, 0] = x[250, 0] = 9.0  # a tie between an early and a late chunk: the first wins
    x[:, 1] = np.nan
    x[299, 1] = -1.0  # the one number in a column of NaN
    x[:, 2] = np.nan  # every element NaN: index 0
    _, got = streamed(tmp_path, "reduce", [x], function="argmax", axes=[0])
    assert got.tolist() == [[5, 299, 0]]


def test_integer_sums_wrap_as_in_memory(tmp_path):
    x = np.full((1000, 2), 2**31 - 1, np.int32)
    _, got = streamed(tmp_path, "reduce", [x], function="sum", axes=[0])
    np.testing.assert_array_equal(got, dmlcli.run("reduce", x, function="sum", axes=[0]))


@given(st.lists(st.integers(1, 30), min_size=1, max_size=4), st.sampled_from(["<u2", ">u2", "<f4", ">f8"]))
@settings(max_examples=25, deadline=None)
def test_join_along_axis_0_streams_the_bytes(rows, dtype):
    import tempfile
    from pathlib import Path

    arrays = [np.arange(n * 3, dtype=dtype).reshape(n, 3) for n in rows]
    with tempfile.TemporaryDirectory() as folder:
        outcome, got = streamed(Path(folder), "join", arrays, axis=0)
    assert outcome.output is None
    want = np.concatenate([a.astype(np.dtype(dtype).newbyteorder("=")) for a in arrays])
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_other_calls_run_in_memory(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    outcome, got = streamed(tmp_path, "reduce", [x], function="sum", axes=[1])  # a middle axis
    assert outcome.output is not None
    np.testing.assert_array_equal(got, dmlcli.run("reduce", x, function="sum", axes=[1]))
    outcome, _ = streamed(tmp_path, "join", [x, x], axis=1)
    assert outcome.output is not None


MEASURE = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "dmlcli", *sys.argv[1:]], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def peak(args, cwd) -> int:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DMLCLI_CHUNK_BYTES", None)
    done = subprocess.run([sys.executable, "-c", MEASURE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=True)
    return int(done.stdout)


def test_a_streamed_reduction_takes_constant_memory(tmp_path):
    x = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float32, shape=(4096, 4096))  # 64 MiB
    x[:] = 1.0
    del x
    baseline = peak(["--version"], tmp_path)
    grown = peak(["run", "reduce", "x.npy", "--axes", "0", "-o", "out.npy"], tmp_path) - baseline
    assert np.load(tmp_path / "out.npy").ravel()[0] == 4096.0
    assert grown < 40 << 20, f"grew {grown / 2**20:.1f} MiB streaming a 64 MiB input"
