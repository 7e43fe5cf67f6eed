"""Shaped operators on Dask: REDUCE block by block with the reduced axes whole, JOIN as Dask's concatenate;
the in-memory bits; Zarr stores through the command line; a clear refusal for operators that do not run there."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("dask.array", reason="the [dask] extra (dask[array]) is not installed")
zarr = pytest.importorskip("zarr", reason="the [dask] extra (zarr) is not installed")

import dask.array as da  # noqa: E402

import dmlcli  # noqa: E402
import dmlcli.dask  # noqa: E402
from dmlcli.cli import cli  # noqa: E402


@pytest.fixture(autouse=True)
def _no_scheduler_from_the_environment(monkeypatch):
    monkeypatch.delenv("DMLCLI_SCHEDULER", raising=False)


@pytest.mark.parametrize("function", ["sum", "average", "l2", "log_sum_exp", "max", "argmin", "multiply"])
@pytest.mark.parametrize("axes", [(0,), (1,), (0, 2), None])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_reduce_on_dask_gives_the_in_memory_bits(function, axes, dtype):
    x = (np.random.default_rng(3).random((23, 17, 4)) + 0.5).astype(dtype)
    lazy = dmlcli.dask.run("reduce", da.from_array(x, chunks=(5, 6, 3)), function=function, axes=axes)
    got = lazy.compute()
    want = dmlcli.run("reduce", x, function=function, axes=axes)
    assert got.dtype == want.dtype and got.shape == want.shape
    if function in ("max", "argmin"):
        assert got.tobytes() == want.tobytes()
    else:
        # NumPy's float32 sums add in an order that depends on the block's layout: within the tolerance,
        # which grows with the elements reduced (2 ULP each).
        count = x.size // want.size
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=2 * count * np.finfo(dtype).eps)


def test_join_on_dask_is_concatenate():
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    b = np.arange(8, dtype=np.int16).reshape(2, 4)
    got = dmlcli.dask.run("join", da.from_array(a, chunks=2), da.from_array(b, chunks=3), axis=0).compute()
    assert got.tobytes() == np.concatenate([a, b]).tobytes()


def test_reduce_zarr_store_through_the_command_line(tmp_path):
    x = np.random.default_rng(5).random((40, 30)).astype(np.float32)
    source = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=x.shape, chunks=(8, 8), dtype=x.dtype)
    source[...] = x
    result = CliRunner().invoke(cli, ["run", "reduce", str(tmp_path / "x.zarr"), "--axes", "1", "--function", "max",
                                      "-o", str(tmp_path / "out.zarr")])
    assert result.exit_code == 0, result.output
    got = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")[...]
    assert got.tobytes() == dmlcli.run("reduce", x, function="max", axes=[1]).tobytes()


def test_a_shaped_operator_without_a_dask_layout_is_refused_in_words():
    from dmlcli.distributed import graph
    from dmlcli.errors import InputError
    from dmlcli.operators.reduction.entries import REDUCE
    from dmlcli.records import replace

    plain = replace(REDUCE, dask_layout=None, dask_axes=None)
    verdict = dmlcli.engine.plan(dmlcli.engine.request(plain), [(dmlcli.data_types.FLOAT32, (4, 4))])
    with pytest.raises(InputError, match="does not run on Dask; the shaped operators that do are .*reduce"):
        graph.build(verdict.call, [da.zeros((4, 4), dtype=np.float32)])


@pytest.mark.parametrize("op,params", [
    ("slice", {"offsets": [1, 0, 2], "sizes": [4, 3, 2], "strides": [2, 1, 1]}),
    ("slice1", {"input_window_offsets": [0, 1, 0], "input_window_sizes": [9, 5, 4], "input_window_strides": [-2, 2, 1]}),
    ("cumulative_summation", {"axis": 1}),
    ("activation_softmax1", {"axes": [0, 2]}),
])
def test_slicing_and_axis_wise_operators_on_dask(op, params):
    x = np.random.default_rng(9).random((9, 7, 4)).astype(np.float32)
    got = dmlcli.dask.run(op, da.from_array(x, chunks=(2, 3, 2)), **params).compute()
    want = dmlcli.run(op, x, **params)
    assert got.dtype == want.dtype and got.shape == want.shape
    if op.startswith("slice"):
        assert got.tobytes() == want.tobytes()
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5)
