"""JSON text written piece by piece (issue 21d) gives the very bytes the whole-text writer gave.

OLD_TO_JSON_TEXT below is dmlcli's writer before the change, kept here as the reference: every element
through format_json_value, the nesting by recursion, the whole text built in memory. The piece-by-piece
writer (io/json_tensor.JsonTextWriter, used by to_json_text, -o x.json, -o - and the streamed runs from .npy
inputs) must give the same bytes for every data type and shape, with NaN, infinities, -0.0, subnormals and
the integer types' extremes, whatever the pieces' sizes and wherever the chunks end.
"""

import json
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.data_types import from_numpy
from dmlcli.errors import DmlcliWarning
from dmlcli.io import json_tensor
from dmlcli.io.json_tensor import JsonTextWriter, format_json_value, to_json_text
from dmlcli.io.npy import to_native

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def OLD_TO_JSON_TEXT(array) -> str:  # noqa: N802 - the reference, verbatim but for the warning
    array = to_native(np.asarray(array))
    dtype = array.dtype

    def nested(sub) -> str:
        if sub.ndim == 0:
            return format_json_value(sub[()], dtype)
        if sub.ndim == 1:
            return "[" + ", ".join(format_json_value(v, dtype) for v in sub) + "]"
        return "[" + ", ".join(nested(part) for part in sub) + "]"

    data_type = from_numpy(dtype)
    shape = ", ".join(str(s) for s in array.shape)
    return f'{{"dtype": "{data_type.numpy_name}", "shape": [{shape}], "data": {nested(array)}}}\n'


def _specials(dtype: str) -> list[int]:
    """Bit patterns worth writing: NaNs of both signs and payloads, infinities, zeros, subnormals, extremes."""
    kind, width = np.dtype(dtype).kind, np.dtype(dtype).itemsize * 8
    if kind == "f":
        finfo = np.finfo(dtype)
        values = [0.0, -0.0, np.inf, -np.inf, finfo.max, finfo.min, finfo.smallest_subnormal,
                  -finfo.smallest_subnormal, finfo.smallest_normal, 0.1, 1 / 3, 1e-7, 123456.789, 65504.0]
        with np.errstate(all="ignore"):
            patterns = [int(np.array(v).astype(dtype).view(f"uint{width}")) for v in values]
        quiet = 1 << (finfo.nmant - 1)
        exponent = ((1 << (width - 1 - finfo.nmant)) - 1) << finfo.nmant
        patterns += [exponent | quiet, exponent | 1, exponent | quiet | (1 << (width - 1)), exponent | 3]
        return patterns
    info = np.iinfo(dtype)
    return [int(np.array(v).astype(dtype).view(f"uint{width}")) for v in (info.min, info.max, 0, 1, -1 % (1 << width))]


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=0, max_size=4)))
    width = np.dtype(dtype).itemsize * 8
    count = int(np.prod(shape))
    element = st.one_of(st.integers(0, (1 << width) - 1), st.sampled_from(_specials(dtype)))
    patterns = draw(st.lists(element, min_size=count, max_size=count))
    return np.array(patterns, dtype=f"uint{width}").view(dtype).reshape(shape)


def _quiet(function, *args, **keywords):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DmlcliWarning)
        return function(*args, **keywords)


@SETTINGS
@given(array=tensors(), piece=st.integers(1, 7))
def test_pieces_give_the_old_writers_bytes(monkeypatch, array, piece):
    monkeypatch.setattr(json_tensor, "JSON_PIECE_ELEMENTS", piece)  # pieces end anywhere, rows included
    assert _quiet(to_json_text, array) == _quiet(OLD_TO_JSON_TEXT, array)


@SETTINGS
@given(array=tensors(), data=st.data())
def test_chunks_ending_anywhere_give_the_old_writers_bytes(array, data):
    """As a streamed run feeds it: the C-order elements in chunks of any sizes."""
    pieces: list[str] = []
    writer = JsonTextWriter(pieces.append, array.shape, array.dtype)
    flat, done = array.reshape(-1), 0
    while done < flat.size:
        size = data.draw(st.integers(1, flat.size - done))
        _quiet(writer.add, flat[done:done + size])
        done += size
    _quiet(writer.close)
    assert "".join(pieces) == _quiet(OLD_TO_JSON_TEXT, array)


def test_layouts_and_zero_sizes():
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for array in (base.T, base[:, ::2], np.asfortranarray(base), base.astype(">f4"), np.zeros((2, 0, 3), np.int8),
                  np.zeros(0, np.uint64), np.float16(-0.0).reshape(())):
        assert to_json_text(array) == OLD_TO_JSON_TEXT(array)


def test_long_rows_cross_pieces():
    rng = np.random.default_rng(21)
    for shape in ((json_tensor.JSON_PIECE_ELEMENTS * 2 + 3,), (3, json_tensor.JSON_PIECE_ELEMENTS + 1)):
        array = rng.standard_normal(shape).astype(np.float32)
        assert to_json_text(array) == OLD_TO_JSON_TEXT(array)


def test_the_nan_warning_counts_every_piece(monkeypatch):
    monkeypatch.setattr(json_tensor, "JSON_PIECE_ELEMENTS", 2)
    array = np.array([np.nan, 1, 2, 3, 4], np.float32)
    array.view(np.uint32)[[1, 4]] = 0xFFC00001  # two NaNs with a sign and a payload, in different pieces
    with pytest.warns(DmlcliWarning, match=r"2 NaN value\(s\) lose"):
        assert to_json_text(array) == OLD_TO_JSON_TEXT(array)


def test_writer_refuses_a_wrong_count():
    writer = JsonTextWriter(lambda text: None, (2, 2), np.uint8)
    writer.add(np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="3 elements given for a tensor of 4"):
        writer.close()
    with pytest.raises(ValueError, match="5 elements given"):
        writer.add(np.zeros(2, np.uint8))


@pytest.mark.parametrize("fortran", [False, True], ids=["C order", "Fortran order"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "uint64", "int8"])
def test_streamed_runs_write_the_old_text(tmp_path, dtype, fortran):
    """.npy in, JSON out: streamed chunk by chunk (chunks of 5 bytes here), the same file as before."""
    rng = np.random.default_rng(3)
    width = np.dtype(dtype).itemsize
    array = np.frombuffer(rng.bytes(7 * 9 * width), dtype=dtype).reshape(7, 9)
    np.save(tmp_path / "a.npy", np.asfortranarray(array) if fortran else array)
    _quiet(dmlcli.run_files, "identity", [tmp_path / "a.npy"], tmp_path / "out.json", chunk_bytes=5)
    expected = _quiet(OLD_TO_JSON_TEXT, _quiet(dmlcli.run, "identity", array))
    assert (tmp_path / "out.json").read_text() == expected
    assert json.loads(expected)["shape"] == [7, 9]
