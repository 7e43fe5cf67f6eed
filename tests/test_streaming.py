"""The streaming executor (.npy in, .npy out) gives the same bits as the in-memory path, in bounded memory."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli.cli import cli
from dmlcli.errors import DmlcliWarning, InputError
from dmlcli.feature_levels import ALL_FEATURE_LEVELS
from dmlcli.operators import ELEMENTWISE_OPERATORS as OPERATORS
from dmlcli.display.progress import progress_bar_factory, wants_progress_bar
from dmlcli.engine.streaming import (CHUNK_BYTES_VARIABLE, chunk_bytes_from_environment, is_streamable, row_boxes,
                              tile_boxes)

NEWEST = ALL_FEATURE_LEVELS[-1]
TINY_CHUNK = 40  # bytes: a few elements per chunk, so that every test crosses many chunk edges


def input_types(op):
    """Every data type the operator's first input accepts at the newest feature level."""
    return [t.numpy_dtype for t in op.row_at(NEWEST).tensors[op.inputs[0]].data_types]


def widest_type(op):
    return max(input_types(op), key=lambda d: (d.itemsize, d.kind == "f"))


def input_dtypes(op, dtype) -> list[np.dtype]:
    """`dtype` for the first input and the inputs tied to it; each other input its first allowed type."""
    row = op.row_at(NEWEST)
    tied = op.inputs[0] in op.same_data_type
    return [np.dtype(dtype) if name == op.inputs[0] or (tied and name in op.same_data_type)
            else row.tensors[name].data_types[0].numpy_dtype for name in op.inputs]


def make_inputs(op, dtype, shape, seed=0):
    """Random bit patterns (NaNs and infinities included), with zeros, equal pairs and small shift counts."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    arrays = [rng.integers(0, np.iinfo(f"uint{each.itemsize * 8}").max, size=shape,
                           dtype=f"uint{each.itemsize * 8}", endpoint=True).view(each)
              for each in input_dtypes(op, dtype)]
    for array in arrays:
        array.reshape(-1)[::4] = 0
    if len(arrays) == 2 and arrays[0].dtype == arrays[1].dtype:
        arrays[1].reshape(-1)[1::3] = arrays[0].reshape(-1)[1::3]
    if op.hooks:  # the shifts: counts at and past the width
        width = dtype.itemsize * 8
        arrays[1][...] = rng.integers(0, width + 3, size=shape).astype(dtype)
    return arrays


def in_memory_npy_bytes(op, arrays, **options) -> bytes:
    """What the in-memory path (dmlcli.run, then np.save as `run -o` does) writes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DmlcliWarning)
        result = dmlcli.run(op.name, *arrays, **options)
    buffer = io.BytesIO()
    np.save(buffer, result, allow_pickle=False)
    return buffer.getvalue()


def save_inputs(folder: Path, arrays, layout: str = "C") -> list[str]:
    paths = []
    for i, array in enumerate(arrays):
        if "F" in layout:
            array = np.asfortranarray(array)
        if "big" in layout:
            array = array.astype(array.dtype.newbyteorder(">"))
        path = folder / f"input{i}.npy"
        np.save(path, array)
        paths.append(str(path))
    return paths


def streamed_bytes(op, paths, folder: Path, chunk_bytes=TINY_CHUNK, **options) -> bytes:
    target = folder / "out.npy"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DmlcliWarning)
        dmlcli.run_files(op.name, paths, str(target), chunk_bytes=chunk_bytes, **options)
    return target.read_bytes()


def operator_cases(dtypes):
    return [pytest.param(op, dtype, id=f"{op.name.lower()}-{np.dtype(dtype).name}")
            for op in OPERATORS for dtype in dtypes(op)]


@pytest.mark.parametrize("op, dtype", operator_cases(input_types))
def test_every_operator_and_type_streams_the_same_bits(tmp_path, op, dtype):
    arrays = make_inputs(op, dtype, (7, 13))  # 91 elements: no chunk size divides it evenly
    paths = save_inputs(tmp_path, arrays)
    assert streamed_bytes(op, paths, tmp_path) == in_memory_npy_bytes(op, arrays)


@pytest.mark.parametrize("mode", ["either", "positive", "negative"])
def test_infinity_modes_stream_the_same_bits(tmp_path, mode):
    op = dmlcli.find_operator("is_infinity")
    x = np.array([np.inf, -np.inf, np.nan, 0.0, 1.0, -np.inf, 3.5] * 5, dtype=np.float32)
    paths = save_inputs(tmp_path, [x])
    assert (streamed_bytes(op, paths, tmp_path, infinity_mode=mode)
            == in_memory_npy_bytes(op, [x], infinity_mode=mode))


@pytest.mark.parametrize("layout", ["F", "big-endian", "F big-endian"])
@pytest.mark.parametrize("shape", [(1,), (1, 1, 1), (9, 11), (5, 3, 4, 2)], ids=str)
@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.name.lower())
def test_layouts_and_one_element_tensors_stream_the_same_bits(tmp_path, op, layout, shape):
    arrays = make_inputs(op, widest_type(op), shape, seed=len(shape))
    paths = save_inputs(tmp_path, arrays, layout)
    assert streamed_bytes(op, paths, tmp_path) == in_memory_npy_bytes(op, arrays)


@pytest.mark.parametrize("layout", ["C", "F", "F big-endian"])
@pytest.mark.parametrize("shapes", [((5, 1, 7), (3, 1)), ((1, 6), (4, 1)), ((2, 3, 4), (4,)), ((1,), (3, 5))],
                         ids=str)
@pytest.mark.parametrize("op", [op for op in OPERATORS if len(op.inputs) == 2], ids=lambda op: op.name.lower())
def test_broadcast_streams_the_same_bits(tmp_path, op, layout, shapes):
    dtype = widest_type(op)
    arrays = [make_inputs(op, dtype, shape, seed=i)[i] for i, shape in enumerate(shapes)]
    paths = save_inputs(tmp_path, arrays, layout)
    assert (streamed_bytes(op, paths, tmp_path, broadcast=True)
            == in_memory_npy_bytes(op, arrays, broadcast=True))


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 1 << 20])
def test_chunk_sizes_do_not_change_the_result(tmp_path, chunk_bytes):
    op = dmlcli.find_operator("bit_shift_left")
    arrays = make_inputs(op, np.uint16, (3, 17, 5))
    paths = save_inputs(tmp_path, arrays, "F")
    assert streamed_bytes(op, paths, tmp_path, chunk_bytes=chunk_bytes) == in_memory_npy_bytes(op, arrays)


def box_coverage(shape, boxes):
    covered = np.zeros(shape, dtype=np.int64)
    for box in boxes:
        covered[box] += 1
    return covered


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple), chunk=st.integers(1, 200))
def test_boxes_cover_the_output_once_and_fit_a_chunk(shape, chunk):
    for boxes in (list(row_boxes(shape, chunk)), list(tile_boxes(shape, chunk))):
        assert (box_coverage(shape, boxes) == 1).all()
        assert all(np.prod([s.stop - s.start for s in box]) <= chunk for box in boxes)


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple), chunk=st.integers(1, 200),
       weight=st.sampled_from([2, 4, 16]))
def test_weighted_tiles_cover_the_output_once_and_fit_a_chunk(shape, chunk, weight):
    # Fortran-order inputs get tiles cut across the last axis first (tile_weight); never an endless halving.
    boxes = list(tile_boxes(shape, chunk, weight))
    assert (box_coverage(shape, boxes) == 1).all()
    assert all(np.prod([s.stop - s.start for s in box]) <= chunk for box in boxes)


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple), chunk=st.integers(1, 200))
def test_row_boxes_are_contiguous_and_in_order(shape, chunk):
    flat_starts = []
    for box in row_boxes(shape, chunk):
        index = np.arange(int(np.prod(shape))).reshape(shape)[box].reshape(-1)
        assert (np.diff(index) == 1).all()
        flat_starts.append((int(index[0]), int(index[-1])))
    assert all(end + 1 == start for (_, end), (start, _) in zip(flat_starts, flat_starts[1:]))


def test_output_may_be_one_of_the_inputs(tmp_path):
    op = dmlcli.find_operator("bit_xor")
    arrays = make_inputs(op, np.int32, (50, 9))
    paths = save_inputs(tmp_path, arrays)
    expected = in_memory_npy_bytes(op, arrays)
    dmlcli.run_files("bit_xor", paths, paths[0], chunk_bytes=TINY_CHUNK)
    assert Path(paths[0]).read_bytes() == expected
    assert (np.load(paths[1]) == arrays[1]).all()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input0.npy", "input1.npy"]


def test_output_may_be_a_fortran_ordered_input(tmp_path):
    op = dmlcli.find_operator("logical_or")
    arrays = make_inputs(op, np.uint32, (12, 10))
    paths = save_inputs(tmp_path, arrays, "F big-endian")
    expected = in_memory_npy_bytes(op, arrays)
    dmlcli.run_files("logical_or", paths, paths[1], chunk_bytes=TINY_CHUNK)
    assert Path(paths[1]).read_bytes() == expected


class FailingBackend:
    """Gives one chunk, then fails, as a backend might half-way through a big file."""

    name = "failing"

    def execute_chunks(self, operator, chunks, out_dtype, parameters):
        for number, chunk in enumerate(chunks):
            if number == 1:
                raise OSError(28, "No space left on device")
            yield operator.cpu_kernel(chunk, out_dtype, parameters)


def test_a_failed_run_leaves_the_target_as_it_was(tmp_path):
    op = dmlcli.find_operator("bit_or")
    paths = save_inputs(tmp_path, make_inputs(op, np.uint8, (40,)))
    target = tmp_path / "out.npy"
    target.write_bytes(b"previous result")
    with pytest.raises(InputError, match="left as it was"):
        dmlcli.run_files("bit_or", paths, str(target), chunk_bytes=8, backend=FailingBackend())
    assert target.read_bytes() == b"previous result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input0.npy", "input1.npy", "out.npy"]


def test_shift_count_warning_is_counted_over_all_chunks(tmp_path):
    op = dmlcli.find_operator("bit_shift_right")
    arrays = make_inputs(op, np.uint8, (31, 3))
    paths = save_inputs(tmp_path, arrays)
    with pytest.warns(DmlcliWarning) as in_memory:
        dmlcli.run("bit_shift_right", *arrays)
    with pytest.warns(DmlcliWarning) as streamed:
        dmlcli.run_files("bit_shift_right", paths, str(tmp_path / "out.npy"), chunk_bytes=TINY_CHUNK)
    assert [str(w.message) for w in streamed] == [str(w.message) for w in in_memory]
    assert " of 93 shift counts are >= the element width 8" in str(streamed[0].message)


def test_cli_streams_npy_to_npy_and_quiet_hides_the_warning(tmp_path, monkeypatch):
    monkeypatch.setenv(CHUNK_BYTES_VARIABLE, "16")
    op = dmlcli.find_operator("bit_shift_left")
    arrays = make_inputs(op, np.uint32, (10, 7))
    paths = save_inputs(tmp_path, arrays, "big-endian")
    target = tmp_path / "out.npy"
    loud = CliRunner().invoke(cli, ["run", "bit_shift_left", *paths, "-o", str(target)])
    assert loud.exit_code == 0, loud.output
    assert "dmlcli: warning: BIT_SHIFT_LEFT:" in loud.output
    assert target.read_bytes() == in_memory_npy_bytes(op, arrays)
    quiet = CliRunner().invoke(cli, ["run", "bit_shift_left", *paths, "-o", str(target), "--quiet"])
    assert quiet.exit_code == 0 and quiet.output == ""


def test_cli_streaming_reports_bad_input_in_one_line(tmp_path):
    paths = save_inputs(tmp_path, [np.zeros(4, np.uint8), np.zeros(5, np.uint8)])
    result = CliRunner().invoke(cli, ["run", "bit_and", *paths, "-o", str(tmp_path / "out.npy")])
    assert result.exit_code == 3
    assert result.output.count("\n") == 1 and "differ" in result.output
    assert not (tmp_path / "out.npy").exists()
    result = CliRunner().invoke(cli, ["run", "bit_and", paths[0], str(tmp_path / "missing.npy"), "-o",
                                      str(tmp_path / "out.npy")])
    assert result.exit_code == 2 and "input 2" in result.output and "no such file" in result.output


def test_chunk_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(CHUNK_BYTES_VARIABLE, "4M")
    assert chunk_bytes_from_environment() == 4 << 20
    monkeypatch.setenv(CHUNK_BYTES_VARIABLE, "4096")
    assert chunk_bytes_from_environment() == 4096
    for bad in ("0", "-5", "lots", "4T"):
        monkeypatch.setenv(CHUNK_BYTES_VARIABLE, bad)
        with pytest.raises(InputError, match=CHUNK_BYTES_VARIABLE):
            chunk_bytes_from_environment()


def test_only_npy_to_npy_runs_stream():
    assert is_streamable(["a.npy", "b.NPY"], "out.npy")
    assert not is_streamable(["a.npy", "[1, 2]"], "out.npy")
    assert not is_streamable(["a.npy"], "out.json")
    assert not is_streamable(["a.npy"], None)
    assert not is_streamable(["-"], "out.npy")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal_for_big_work_and_not_when_quiet():
    big = 1 << 40
    assert wants_progress_bar(big, quiet=False, stream=FakeTerminal())
    assert not wants_progress_bar(big, quiet=True, stream=FakeTerminal())
    assert not wants_progress_bar(big, quiet=False, stream=io.StringIO())
    assert not wants_progress_bar(1 << 10, quiet=False, stream=FakeTerminal())
    terminal = FakeTerminal()
    with progress_bar_factory(quiet=False, stream=terminal, description="bit_xor")(big) as advance:
        advance(big // 2)
    assert "bit_xor" in terminal.getvalue()
    silent = FakeTerminal()
    with progress_bar_factory(quiet=True, stream=silent)(big) as advance:
        advance(big)
    assert silent.getvalue() == ""


MEASURE_CHILD = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.stderr.strip())
"""


@pytest.mark.parametrize("fortran_order", [False, True], ids=["C", "F"])
def test_a_streamed_run_stays_well_below_the_input_size_in_memory(tmp_path, fortran_order):
    """A real `dmlcli run` on 2 x 160 MiB inputs with 256 KiB chunks peaks far below their size."""
    shape = (40960, 4096)  # 160 MiB of uint8
    for name, fill in (("a", 0x0F), ("b", 0xF0)):
        array = np.lib.format.open_memmap(tmp_path / f"{name}.npy", mode="w+", dtype=np.uint8, shape=shape,
                                          fortran_order=fortran_order)
        array[:] = fill
        if name == "b":
            array[-1, -1] = 0x0F
        array.flush()
        del array
    target = tmp_path / "out.npy"
    command = [sys.executable, "-c", MEASURE_CHILD, sys.executable, "-m", "dmlcli", "run", "bit_xor",
               str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "-o", str(target)]
    env = {**os.environ, CHUNK_BYTES_VARIABLE: "256K"}
    returncode, peak_kib, stderr = subprocess.run(command, capture_output=True, text=True, env=env,
                                                   check=True).stdout.split(" ", 2)
    assert int(returncode) == 0, stderr
    peak_mib = int(peak_kib) / 1024
    assert peak_mib < 100, f"peak RSS {peak_mib:.0f} MiB for 320 MiB of input"
    out = np.load(target, mmap_mode="r")
    assert out.shape == shape and not np.isfortran(out)
    assert out[0, 0] == 0xFF and out[-1, -2] == 0xFF and out[-1, -1] == 0
    assert int(np.count_nonzero(out != 0xFF)) == 1


class RecordingBackend:
    """The CPU kernels, noting what each chunk looked like when the executor handed it over."""

    name = "recording"

    def __init__(self):
        self.chunks = []

    def execute_chunks(self, operator, chunks, out_dtype, parameters):
        for chunk in chunks:
            self.chunks.append([(c.shape, c.dtype.isnative) for c in chunk])
            yield operator.cpu_kernel(chunk, out_dtype, parameters)


@pytest.mark.parametrize("layout", ["big-endian", "F big-endian"])
def test_backends_get_native_equal_shaped_chunks_of_bounded_size(tmp_path, layout):
    op = dmlcli.find_operator("logical_equals")
    arrays = [make_inputs(op, np.int64, shape)[i] for i, shape in enumerate([(6, 1, 5), (4, 1)])]
    paths = save_inputs(tmp_path, arrays, layout)
    backend = RecordingBackend()
    dmlcli.run_files("logical_equals", paths, str(tmp_path / "out.npy"), chunk_bytes=64, broadcast=True, backend=backend)
    assert len(backend.chunks) > 1
    for (a_shape, a_native), (b_shape, b_native) in backend.chunks:
        assert a_native and b_native and a_shape == b_shape and int(np.prod(a_shape)) <= 64 // 8
    assert (tmp_path / "out.npy").read_bytes() == in_memory_npy_bytes(op, arrays, broadcast=True)


def gpu_or_skip():
    pytest.importorskip("cupy")
    from dmlcli.backends import get_backend
    from dmlcli.errors import BackendUnavailableError

    try:
        return get_backend("gpu")
    except BackendUnavailableError as why:
        pytest.skip(f"no usable GPU: {why}")


@pytest.mark.parametrize("layout", ["C", "F big-endian"])
@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.cli_name)
def test_gpu_backend_streams_the_same_bits(tmp_path, op, layout):
    """The GPU streamed against the CPU in memory, by the GPU tests' parity rule (test_gpu._assert_parity)."""
    from test_gpu import _assert_parity

    backend = gpu_or_skip()
    arrays = make_inputs(op, widest_type(op), (37, 29), seed=3)
    paths = save_inputs(tmp_path, arrays, layout)
    streamed = np.load(io.BytesIO(streamed_bytes(op, paths, tmp_path, chunk_bytes=1000, backend=backend)))
    in_memory = np.load(io.BytesIO(in_memory_npy_bytes(op, arrays)))
    data_types = {name: dmlcli.data_types.from_numpy(a.dtype) for name, a in zip(op.inputs, arrays)}
    data_types[op.output] = dmlcli.data_types.from_numpy(in_memory.dtype)
    defaults = {p.field: p.parse({}, data_types) for p in op.parameters}
    _assert_parity(op, streamed, in_memory, defaults, f"{op.cli_name} {layout}", arrays)


def test_streaming_refuses_a_device_named_like_an_npy_file(tmp_path):
    from click.testing import CliRunner

    from dmlcli.cli import cli

    device = tmp_path / "zero.npy"
    device.symlink_to("/dev/zero")
    result = CliRunner().invoke(cli, ["run", "bit_not", str(device), "-o", str(tmp_path / "out.npy")])
    assert result.exit_code == 2
    assert "is not a regular file (a device or socket)" in result.stderr
    assert not (tmp_path / "out.npy").exists()


def test_the_backend_chooses_the_default_chunk_size(tmp_path, monkeypatch):
    from dmlcli.backends.cpu import CpuBackend

    class SmallChunks(CpuBackend):
        preferred_chunk_bytes = 64

        def __init__(self):
            self.chunk_sizes = []

        def execute_chunks(self, operator, chunks, out_dtype, parameters):
            for chunk in chunks:
                self.chunk_sizes.append(chunk[0].size)
                yield from super().execute_chunks(operator, [chunk], out_dtype, parameters)

    monkeypatch.delenv("DMLCLI_CHUNK_BYTES", raising=False)
    x = np.arange(1000, dtype=np.uint32)
    np.save(tmp_path / "x.npy", x)
    engine = SmallChunks()
    dmlcli.run_files("bit_not", [str(tmp_path / "x.npy")], str(tmp_path / "out.npy"), backend=engine)
    assert max(engine.chunk_sizes) <= 16 and sum(engine.chunk_sizes) == 1000
    assert np.load(tmp_path / "out.npy").tolist() == (~x).tolist()
