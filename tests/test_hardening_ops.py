"""Reliability, round four (issue 34), the shaped operators' part: work far past the data, memory of the output's size
in validation and in kernels, the room check of a run and of a suite's case, internal errors where a usage or
validation error belongs, two output options naming one file, and numbers in other scripts' digits.

Every test reproduces an item of the issue at a scaled-down size: the ratio (peak over output, reads over data) is
what is held, each test's peak stays under a few hundred MiB and its time under a few seconds.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmlcli
from dmlcli import engine
from dmlcli.cli import cli
from dmlcli.data_types import FLOAT32, UINT32
from dmlcli.errors import InputError, ValidationError
from dmlcli.io import room
from dmlcli.operators.movement.entries import padding_runs
from dmlcli.operators.pooling.entries import first_padding_only_window
from dmlcli.suite.runner import VERDICTS, Settings, run_file

from conftest import REPO, SHARED

MiB = 1 << 20


def invoke(*args, **kwargs):
    return CliRunner().invoke(cli, [str(a) for a in args], **kwargs)


def traced_peak(call) -> tuple[object, int]:
    """(call's result, the peak of the memory NumPy and Python allocated during it)."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def broadcast_json(size: int, value: float = 1.0) -> str:
    """A {1, 1, size, size} FLOAT32 tensor of one element, broadcast by zero strides (as the issue's input)."""
    return json.dumps({"dtype": "float32", "shape": [1, 1, size, size], "strides": [0, 0, 0, 0], "data": [value]})


# ---------------------------------------------------------------- padding: the output's memory and no more


def reference_index(mode: str, coordinates: np.ndarray, size: int) -> np.ndarray:
    """The page's folding, one coordinate at a time (what PADDING's runs must copy)."""
    if mode == "EDGE" or size == 1:
        return np.clip(coordinates, 0, size - 1)
    if mode == "WRAP":
        return coordinates % size
    period = 2 * (size - 1) if mode == "REFLECTION" else 2 * size
    folded = coordinates % period
    last = period if mode == "REFLECTION" else period - 1
    return np.where(folded < size, folded, last - folded)


@settings(max_examples=300, deadline=None)
@given(mode=st.sampled_from(["EDGE", "REFLECTION", "SYMMETRIC", "WRAP"]), size=st.integers(1, 6),
       before=st.booleans(), gap=st.integers(0, 20), count=st.integers(1, 40))
def test_padding_runs_copy_what_the_folding_rule_says(mode, size, before, gap, count):
    """A padding slab's coordinates (before the input, or after it), `gap` away from it."""
    offset = -(count + gap) if before else size + gap
    copied = []
    for length, source, step in padding_runs(mode, offset, count, size):
        copied += [source + step * i for i in range(length)]
    assert copied == reference_index(mode, np.arange(offset, offset + count), size).tolist()


@settings(max_examples=80, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       mode=st.sampled_from(["edge", "reflection", "symmetric", "wrap"]), data=st.data())
def test_padding_longer_than_the_input_matches_the_rule(shape, mode, data):
    longest = (lambda n: n) if mode == "wrap" else (lambda n: 25)  # WRAP: at most one period (the entry's rule)
    start = [data.draw(st.integers(0, longest(n))) for n in shape]
    end = [data.draw(st.integers(0, longest(n))) for n in shape]
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    got = dmlcli.run("padding", x, padding_mode=mode, start_padding=start, end_padding=end)
    index = [reference_index(mode.upper(), np.arange(-s, n + e), n) for s, n, e in zip(start, shape, end)]
    np.testing.assert_array_equal(got, x[np.ix_(*index)])


@pytest.mark.parametrize("mode", ["constant", "edge", "reflection", "symmetric"])
def test_padding_takes_the_output_s_memory(mode):
    """The issue's `padding [[1,2]] --padding-mode reflection --start-padding 0,10^8`: 8x its output before (index
    arrays of INT64 and a gathered copy), scaled to 10^7."""
    x = np.float32([[1, 2]])
    out, peak = traced_peak(lambda: dmlcli.run("padding", x, padding_mode=mode, start_padding=[0, 10 ** 7],
                                               end_padding=[0, 0]))
    assert out.nbytes == 4 * (10 ** 7 + 2)
    assert peak <= 1.1 * out.nbytes, (mode, peak / out.nbytes)
    assert out[0, -3:].tolist() == {"constant": [0, 1, 2], "edge": [1, 1, 2], "reflection": [2, 1, 2],
                                    "symmetric": [1, 1, 2]}[mode]


MEASURE = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "dmlcli", *sys.argv[1:]], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def peak_rss(args, cwd: Path) -> int:
    done = subprocess.run([sys.executable, "-c", MEASURE, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, NO_COLOR="1"))
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_the_issue_s_padding_run_peaks_within_1_5x_of_its_output(tmp_path):
    """The command line itself (ru_maxrss of the process), over a run of the same call with a tiny padding."""
    call = ["run", "padding", "[[1,2]]", "--dtype", "float32", "--padding-mode", "reflection", "--end-padding", "0,0"]
    baseline = peak_rss(call + ["--start-padding", "0,1", "-o", "small.npy"], tmp_path)
    growth = peak_rss(call + ["--start-padding", "0,20000000", "-o", "pad.npy"], tmp_path) - baseline
    output = (tmp_path / "pad.npy").stat().st_size
    assert growth <= 1.5 * output, growth / output
    assert np.load(tmp_path / "pad.npy", mmap_mode="r")[0, :4].tolist() == [1, 2, 1, 2]


# ---------------------------------------------------------------- pooling: validation without the output's size


def listed_first_padding_only_window(size, out_size, stride, window, dilation, start):
    taps = np.arange(out_size)[:, None] * stride + np.arange(window)[None, :] * dilation - start
    reads = ((taps >= 0) & (taps < size)).any(axis=1)
    return None if reads.all() else int(np.argmin(reads))


@settings(max_examples=500, deadline=None)
@given(size=st.integers(1, 8), stride=st.integers(1, 7), window=st.integers(1, 7), dilation=st.integers(1, 14),
       start=st.integers(0, 60), end=st.integers(0, 60))
def test_the_first_window_of_padding_alone_is_found_without_listing_the_windows(size, stride, window, dilation,
                                                                                start, end):
    extent = (window - 1) * dilation + 1
    if extent > size + start + end:
        return
    out_size = (size + start + end - extent) // stride + 1
    assert first_padding_only_window(size, out_size, stride, window, dilation, start) == \
        listed_first_padding_only_window(size, out_size, stride, window, dilation, start)


# Calls whose outputs hold 10^8 to 4 * 10^9 elements, each validated (with its lowest level and its report) in a
# process whose address space is capped: a rule that allocates anything of the output's size fails with
# MemoryError, not by taking the machine's memory.
VALIDATED = [
    ("max_pooling", [(1, 1, 4, 4)], dict(window_size=[2, 2], start_padding=[200_000_000, 0])),  # the issue's
    ("max_pooling", [(1, 1, 4, 4)], dict(window_size=[1, 2], end_padding=[200_000_000, 0])),
    ("max_pooling2", [(1, 1, 4, 4)], dict(window_size=[3, 2], start_padding=[10 ** 8, 0], end_padding=[10 ** 8, 0],
                                          dilations=[5 * 10 ** 7, 1])),
    ("average_pooling", [(1, 1, 4, 4)], dict(window_size=[2 * 10 ** 8 + 4, 2], start_padding=[10 ** 8, 0],
                                             end_padding=[10 ** 8, 0], include_padding=False)),
    ("average_pooling1", [(1, 1, 4, 4)], dict(window_size=[2, 2], start_padding=[2 * 10 ** 8, 0])),
    ("lp_pooling", [(1, 1, 4, 4)], dict(window_size=[2, 2], start_padding=[1, 0], end_padding=[2 * 10 ** 8, 0])),
    ("lp_pooling1", [(1, 1, 4, 4)], dict(window_size=[2, 2], strides=[3, 1], start_padding=[10 ** 8, 0],
                                         end_padding=[10 ** 8, 0], dilations=[10 ** 8, 1])),
    ("max_pooling", [(1, 1, 2048, 2048)], dict(window_size=[1024, 1024])),
    ("padding", [(4, 4)], dict(start_padding=[2 * 10 ** 8, 0], end_padding=[0, 0], padding_mode="reflection")),
    ("padding1", [(4, 4)], dict(start_padding=[2 * 10 ** 8, 0], end_padding=[0, 0], padding_mode="symmetric")),
    ("tile", [(4, 4)], dict(repeats=[2 * 10 ** 8, 1])),
    ("unfold", [(1, 1, 4, 4)], dict(window_sizes=[1, 1], start_padding=[2 * 10 ** 8, 0], end_padding=[0, 0])),
    ("resample", [(1, 1, 4, 4)], dict(scales=[1, 1, 5 * 10 ** 7, 1], interpolation_mode="linear")),
    ("upsample_2d", [(1, 1, 4, 4)], dict(scale_size=[5 * 10 ** 7, 1])),
    ("convolution", [(1, 1, 4, 4), (1, 1, 2, 2)], dict(start_padding=[2 * 10 ** 8, 0], end_padding=[0, 0])),
    ("convolution", [(1, 1, 4, 4), (1, 1, 2, 2)], dict(direction="backward", strides=[5 * 10 ** 7, 1])),
    ("fill_value_sequence", [], dict(output_shape=(4 * 10 ** 9,))),
    ("diagonal_matrix", [], dict(output_shape=(1, 1, 2 * 10 ** 8, 10))),
]


def test_validation_holds_nothing_of_the_output_s_size():
    script = textwrap.dedent("""
        import json, resource, sys, tracemalloc
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        from dmlcli.api import plan
        from dmlcli.cli.reports import validation_report
        from dmlcli.data_types import FLOAT32
        from dmlcli.errors import DmlcliError
        # The modules a first call imports (4.1 to 4.3 MiB at their peak, the code's, not the call's) before
        # anything is measured.
        warm = plan("max_pooling", [(FLOAT32, (1, 1, 4, 4))], window_size=[2, 2])
        validation_report(warm.call.operator, warm.feature_level, verdict=warm)
        peaks = []
        for name, shapes, params in json.loads(sys.argv[1]):
            tracemalloc.start()
            try:
                verdict = plan(name, [(FLOAT32, tuple(s)) for s in shapes], **params)
                verdict.lowest_feature_level
                validation_report(verdict.call.operator, verdict.feature_level, verdict=verdict)
                outcome = "ok"
            except DmlcliError as error:
                outcome = type(error).__name__
            peaks.append((name, outcome, tracemalloc.get_traced_memory()[1]))
            tracemalloc.stop()
        print(json.dumps(peaks))
    """)
    done = subprocess.run([sys.executable, "-c", script, json.dumps(VALIDATED)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    for name, outcome, peak in json.loads(done.stdout):
        assert outcome in ("ok", "ValidationError"), (name, outcome)
        assert peak < 4 * MiB, (name, peak)


def test_the_issue_s_validate_answers_at_once_in_words(tmp_path):
    result = invoke("validate", "max_pooling", "[[[[1,2,3,4],[5,6,7,8],[9,10,11,12],[13,14,15,16]]]]", "--dtype",
                    "float32", "--window-size", "2,2", "--start-padding", "200000000,0")
    assert result.exit_code == 3
    assert "output position 0 of spatial dimension 0 reads only padding" in result.stderr


# ---------------------------------------------------------------- the room check counts what a kernel holds


# Small inputs, large outputs: each kernel's peak (traced) within 1.5x of its outputs, as a streamed run's would be.
OUTPUT_BOUND = [
    ("tile", [np.float32([[1, 2]])], dict(repeats=[1, 4_000_000])),
    ("resample", [np.float32([[[[1, 2], [3, 4]]]])], dict(scales=[1, 1, 1400, 1400])),
    ("resample", [np.float32([[[[1, 2], [3, 4]]]])], dict(scales=[1, 1, 1400, 1400], interpolation_mode="linear")),
    ("resample3", [np.float32([[[[1, 2], [3, 4]]]])], dict(scales=[1, 1, 1400, 1400], interpolation_mode="linear",
                                                          antialiased=True)),
    ("upsample_2d", [np.float32([[[[1, 2], [3, 4]]]])], dict(scale_size=[1400, 1400], interpolation_mode="linear")),
    ("resample", [np.float16([[[[1, 2], [3, 4]]]])], dict(scales=[1, 1, 1400, 1400], interpolation_mode="linear")),
    ("fill_value_sequence", [], dict(output_shape=(8_000_000,), value_start=1, value_delta=1)),
    ("diagonal_matrix", [], dict(output_shape=(1, 1, 8000, 1000), offset=3)),
    ("diagonal_matrix", [], dict(output_shape=(2, 4000, 1000), output_dtype="uint8", offset=-3)),
]


@pytest.mark.parametrize("name, arrays, params", OUTPUT_BOUND, ids=[case[0] for case in OUTPUT_BOUND])
def test_a_small_input_s_large_output_takes_its_own_memory(name, arrays, params):
    out, peak = traced_peak(lambda: dmlcli.run(name, *arrays, **params))
    assert out.nbytes >= 4 * MiB
    assert peak <= 1.5 * out.nbytes + 10 * MiB, (name, peak / out.nbytes)


def test_resampling_in_blocks_gives_the_same_bits(monkeypatch):
    """LINEAR and the antialiased filter cut into blocks of 1 to 7 elements give the bits of one block."""
    from dmlcli.operators.resampling import entries as resampling

    rng = np.random.default_rng(34)
    cases = [(rng.standard_normal((1, 2, 5, 3)).astype(dtype), scales, params)
             for dtype in (np.float32, np.float16)
             for scales, params in (([1, 1, 2.5, 0.75], dict(interpolation_mode="linear")),
                                    ([1, 1, 0.4, 1.7], dict(interpolation_mode="linear", antialiased=True)))]
    cases.append(((rng.standard_normal((1, 2, 5, 3)) * 50).astype(np.int8), [1, 1, 2.5, 0.75],
                  dict(interpolation_mode="linear")))  # rounded and saturated block by block
    name = ["resample3"] * 4 + ["resample"]  # INT8: RESAMPLE (6_2)
    whole = [dmlcli.run(op, x, scales=scales, **params) for op, (x, scales, params) in zip(name, cases)]
    for block in (1, 3, 7):
        monkeypatch.setattr(resampling, "BLOCK_ELEMENTS", block)
        for op, (x, scales, params), expected in zip(name, cases, whole):
            got = dmlcli.run(op, x, scales=scales, **params)
            assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


# Kernels with an entry's own scratch (Operator.scratch): the traced peak within what the room check counts.
WITH_SCRATCH = [
    ("max_pooling", [np.ones((2, 8, 256, 256), np.float32)], dict(window_size=[3, 3], start_padding=[1, 1],
                                                                  end_padding=[1, 1])),
    ("max_pooling1", [np.ones((2, 8, 256, 256), np.float32)], dict(window_size=[3, 3], start_padding=[1, 1],
                                                                   end_padding=[1, 1])),
    ("average_pooling", [np.ones((2, 8, 256, 256), np.float16)], dict(window_size=[3, 3], start_padding=[1, 1],
                                                                      end_padding=[1, 1])),
    ("lp_pooling", [np.ones((2, 8, 256, 256), np.float32)], dict(window_size=[3, 3], p=3)),
    # Large strides over a large padding: a 4 KiB output from a padded copy of 42 MB.
    ("average_pooling", [np.ones((1, 256, 4, 4), np.float32)], dict(window_size=[100, 100], strides=[100, 100],
                                                                    start_padding=[99, 99], end_padding=[99, 99])),
    ("convolution", [np.ones((2, 8, 256, 256), np.float32), np.ones((8, 8, 3, 3), np.float32)],
     dict(start_padding=[1, 1], end_padding=[1, 1])),
    ("convolution", [np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 1, 1), np.float32)],
     dict(start_padding=[1000, 1000], end_padding=[1000, 1000])),
    ("convolution", [np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 1, 1), np.float32)],
     dict(direction="backward", strides=[1000, 1000], start_padding=[500, 500], end_padding=[0, 0])),
    ("convolution_integer", [np.ones((1, 2, 64, 64), np.uint8), np.ones((2, 2, 3, 3), np.uint8)], {}),
]


@pytest.mark.parametrize("name, arrays, params", WITH_SCRATCH, ids=[case[0] for case in WITH_SCRATCH])
def test_a_kernel_holds_no_more_than_its_entry_s_scratch(name, arrays, params):
    verdict = dmlcli.validate(name, *arrays, **params)
    outputs = sum(math.prod(t.shape) * t.data_type.numpy_dtype.itemsize for t in verdict.call.outputs)
    _, peak = traced_peak(lambda: dmlcli.run(name, *arrays, **params))
    assert peak <= verdict.call.operator.scratch(verdict.call) + outputs, (name, peak)


def test_a_padded_copy_that_does_not_fit_is_refused_before_any_work(monkeypatch):
    """16 KiB of output whose windows read a padded copy of 167 MB: counted (Operator.scratch), refused."""
    monkeypatch.setattr(room, "available_memory", lambda: 96 * MiB)
    x = np.ones((1, 1024, 4, 4), np.float32)
    params = dict(window_size=[100, 100], strides=[100, 100], start_padding=[99, 99], end_padding=[99, 99])
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="needs about .* of memory"):
            dmlcli.run("average_pooling", x, **params)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MiB


def test_available_memory_counts_the_process_s_own_limits_and_a_suite_worker_s_share():
    script = textwrap.dedent("""
        import resource
        from dmlcli.io import room
        everything = room.available_memory()
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, resource.RLIM_INFINITY))
        limited = room.available_memory()
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        room.share_memory(4)
        print(everything, limited, room.available_memory())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    everything, limited, shared = map(int, done.stdout.split())
    assert limited < 2 << 30 and limited < everything
    assert abs(shared - everything / 4) < everything / 40  # the machine's memory may move meanwhile


# ---------------------------------------------------------------- work far past the data


def test_validate_states_the_work_of_the_issue_s_window():
    arguments = ("validate", "max_pooling", broadcast_json(2048), "--window-size", "1024,1024")
    text = invoke(*arguments)
    assert text.exit_code == 0
    reads, elements = 1025 * 1025 * 1024 * 1024, 2048 * 2048 + 1025 * 1025
    assert f"work: {reads:,} element reads (output elements x window elements)" in text.stdout
    report = json.loads(invoke(*arguments, "--format", "json").stdout)
    assert report["work"] == {"element_reads": reads, "tensor_elements": elements}
    assert json.loads(invoke("validate", "bit_not", "[1]", "--dtype", "uint8", "--format", "json").stdout)["work"] \
        is None


def test_a_kernel_far_past_its_data_advances_the_run_s_progress():
    seen = {}

    def progress(total_bytes):
        import contextlib

        @contextlib.contextmanager
        def bar():
            seen["total"], seen["done"] = total_bytes, 0

            def advance(count):
                seen["done"] += count
            yield advance
        return bar()

    x = np.broadcast_to(np.float32(1), (1, 1, 64, 64))
    req = engine.request("max_pooling", window_size=[32, 32])
    engine.run(req, [x], progress=progress)
    assert seen["total"] == seen["done"] == 33 * 33 * 32 * 32 * 4  # reads of 4-byte elements
    seen.clear()
    engine.run(engine.request("max_pooling", window_size=[2, 2]), [np.ones((1, 1, 64, 64), np.float32)],
               progress=progress)
    assert not seen  # about its data: no bar


def in_a_terminal_until(args, cwd: Path, seen: bytes, then: int) -> tuple[bytes, int, float]:
    """Run dmlcli with stderr on a pty; once `seen` appears, send signal `then`: (what it wrote, exit code, seconds
    from the signal to the exit)."""
    import pty

    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "dmlcli", *args], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=slave, cwd=cwd,
                               env={**os.environ, "TERM": "xterm", "PYTHONPATH": str(REPO)})
    os.close(slave)
    received = b""
    deadline = time.monotonic() + 60
    try:
        while seen not in received:
            assert time.monotonic() < deadline, received[-500:]
            if select.select([master], [], [], 1)[0]:
                received += os.read(master, 65536)
        sent = time.monotonic()
        process.send_signal(then)
        code = process.wait(timeout=30)
        return received, code, time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)


@pytest.mark.parametrize("signal_number, exit_code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_the_issue_s_pooling_shows_progress_and_stops_promptly(tmp_path, signal_number, exit_code):
    """A one-element input, a 512 x 512 window over 1024 x 1024: 69 * 10^9 reads (minutes). On a terminal the bar
    shows; a signal stops it after the NumPy call in hand, with nothing written."""
    args = ["run", "max_pooling", broadcast_json(1024), "--window-size", "512,512", "-o", "out.npy"]
    received, code, took = in_a_terminal_until(args, tmp_path, b"GiB", signal_number)
    assert b"max_pooling" in received
    assert code == exit_code and took < 5
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- suite cases: the case's error, never the run's


def _onnx_case_files() -> list[Path]:
    folders = [SHARED / "onnx_operators", SHARED / "onnx_operators_complete"]
    return sorted(path for folder in folders if folder.is_dir() for path in folder.glob("onnx__*.json"))


CASE_FILES = _onnx_case_files()
WITH_ATTRIBUTES = [path for path in CASE_FILES if json.loads(path.read_text()).get("attributes")]
MUTATIONS = [float("nan"), float("inf"), float("-inf"), None, [1, 2], [], [[1]], ["a"], "x", "", 0, -1, 2 ** 40,
             1e300, True, {"a": 1}]


@pytest.mark.skipif(not WITH_ATTRIBUTES, reason=f"{SHARED}: no ONNX cases (../shared beside the clone)")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_case_is_that_case_s_result(tmp_path_factory, data):
    path = data.draw(st.sampled_from(WITH_ATTRIBUTES))
    document = json.loads(path.read_text())
    name = data.draw(st.sampled_from(sorted(document["attributes"])))
    document["attributes"][name] = data.draw(st.sampled_from(MUTATIONS))
    mutated = tmp_path_factory.mktemp("mutated") / path.name
    mutated.write_text(json.dumps(document))
    selected, results = run_file(mutated, path.stem, ("cpu",), Settings())
    assert selected and len(results) == 1
    assert results[0].verdict in VERDICTS
    assert "internal error" not in results[0].message, results[0].message


def _mutated(name: str, change) -> dict:
    document = json.loads((SHARED / "onnx_operators" / name).read_text())
    change(document)
    return document


def _set_input(index: int, value):
    def change(document):
        document["inputs"][index]["data"] = value
    return change


def _set_attribute(name: str, value):
    def change(document):
        document["attributes"][name] = value
    return change


# The issue's cases, each beside the good case it was made from.
ISSUE_CASES = {
    "onnx__test_range_float_type_positive_delta.json": [_set_input(1, "inf"), _set_input(1, "nan")],
    "onnx__test_onehot_without_axis.json": [_set_input(1, "nan"), _set_input(1, "inf")],
    "onnx__test_top_k.json": [_set_input(1, "nan")],
    "onnx__test_split_1d_uneven_split_opset18.json": [_set_attribute("num_outputs", 0)],
    "onnx__test_averagepool_2d_pads.json": [_set_attribute("pads", None)],
    "onnx__test_l2normalization_axis_0.json": [_set_attribute("axis", [0])],
    "onnx__test_simple_rnn_reverse.json": [_set_attribute("direction", 1)],
}


@pytest.mark.skipif(not (SHARED / "onnx_operators").is_dir(), reason=f"{SHARED}: no ONNX cases")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_bad_cases_among_good_ones_are_errors_and_the_run_reports_every_case(tmp_path, jobs):
    folder = tmp_path / "cases"
    folder.mkdir()
    count = 0
    for name, changes in ISSUE_CASES.items():
        (folder / name).write_text((SHARED / "onnx_operators" / name).read_text())
        for index, change in enumerate(changes):
            (folder / f"bad{index}_{name}").write_text(json.dumps(_mutated(name, change)))
        count += 1 + len(changes)
    result = invoke("test", folder, "-j", jobs, "--junit-xml", tmp_path / "junit.xml", "--report",
                    tmp_path / "report.json")
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.output
    report = json.loads((tmp_path / "report.json").read_text())
    verdicts = {Path(case["file"]).name: case["verdict"] for case in report["results"]}
    assert len(verdicts) == count
    assert all(verdict == "error" for name, verdict in verdicts.items() if name.startswith("bad"))
    assert all(verdict in ("passed", "skipped") for name, verdict in verdicts.items() if not name.startswith("bad"))
    assert (tmp_path / "junit.xml").read_text().count("<testcase") == count


def test_a_suite_case_past_the_memory_is_refused_by_the_room_check(tmp_path, monkeypatch):
    case = tmp_path / "big.json"
    case.write_text(json.dumps({"op": "fill_value_sequence", "params": {"output_shape": [10 ** 9],
                                                                        "value_start": 0, "value_delta": 1},
                                "inputs": [], "expected": {"dtype": "float32", "data": [0]}}))
    monkeypatch.setattr(room, "available_memory", lambda: 256 * MiB)
    _, results = run_file(case, "big", ("cpu",), Settings())
    assert results[0].verdict == "error" and "of memory" in results[0].message


def test_onnx_attribute_kinds_are_onnx_s():
    """ATTRIBUTE_KINDS against ONNX's own schemas, for every version of every operator of the table."""
    defs = pytest.importorskip("onnx.defs")
    from dmlcli.suite.onnx.adapters import attribute_kinds
    from dmlcli.suite.onnx.table import TABLE

    for schema in defs.get_all_schemas_with_history():
        if schema.name not in TABLE:
            continue
        for name, attribute in schema.attributes.items():
            kind = str(attribute.type).rsplit(".", 1)[-1]
            assert attribute_kinds(name), (schema.name, name, kind)
            assert kind in attribute_kinds(name) or (name == "p" and kind == "INT"), (schema.name, name, kind)


# ---------------------------------------------------------------- a rank no level takes: a validation error


SHAPED = [op for op in dmlcli.operators.all_operators() if not op.is_elementwise]


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_any_ranks_any_types_are_validated_or_refused_in_words(data):
    """Every shaped operator, inputs of random DimensionCounts and types: a verdict or a DmlcliError, never an
    IndexError from a rule that reads a dimension the input does not have (VALUE_SCALE_2D, UPSAMPLE_2D, the
    convolutions, the recurrent operators did)."""
    from dmlcli.data_types import INT32, UINT8

    op = data.draw(st.sampled_from(SHAPED))
    count = data.draw(st.sampled_from(sorted({len(op.required_inputs), len(op.inputs)})))
    inputs = [(data.draw(st.sampled_from([FLOAT32, UINT32, UINT8, INT32])),
               tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=8)))) for _ in range(count)]
    try:
        dmlcli.api.plan(op.name, inputs).lowest_feature_level
    except dmlcli.DmlcliError:
        pass


def test_value_scale_2d_of_a_1d_input_in_words_on_every_route(tmp_path):
    for command in ("run", "validate"):
        result = invoke(command, "value_scale_2d", "[1,2,3]", "--dtype", "float32", "--scale", "2")
        assert result.exit_code == 3, result.output
        assert result.stderr.strip() == ("dmlcli: error: VALUE_SCALE_2D: InputTensor dimension count 1 is not "
                                         "supported at any feature level (allowed: 4); no feature level accepts "
                                         "this call")
    model = {
        "resources": {"in": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2, 3]},
                      "out": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 3, "value": 0}}},
        "dispatchables": {"scale": {"type": "DML_OPERATOR_VALUE_SCALE_2D", "desc": {
            "InputTensor": {"DataType": "FLOAT32", "Sizes": [3]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [3]}, "Scale": 2.0, "ChannelCount": 1,
            "Bias": [0.0]}}},
        "commands": [{"type": "dispatch", "dispatchable": "scale", "bindings": {"InputTensor": "in",
                                                                                "OutputTensor": "out"}}],
    }
    (tmp_path / "model.json").write_text(json.dumps(model))
    result = invoke("dispatch", tmp_path / "model.json", "--no-timing")
    assert result.exit_code == 3 and "dimension count 1 is not supported at any feature level" in result.stderr


def test_a_negative_size_stated_for_an_output_is_a_validation_error():
    with pytest.raises(ValidationError, match="contain a negative size"):
        dmlcli.api.plan("max_unpooling", [(FLOAT32, (1, 1, 2, 2)), (UINT32, (1, 1, 2, 2))],
                        output_shapes={"OutputTensor": (1, 1, -4, 4)})


# ---------------------------------------------------------------- the command line: outputs and digits


@pytest.mark.parametrize("options", [
    ["-o", "c.json", "--save-case", "c.json"],
    ["-o", "./c.json", "--save-case", "sub/../c.json"],
    ["--check", "[3]", "--report", "r.json", "--save-case", "r.json"],
    ["-o", "r.json", "--check", "[3]", "--report", "r.json"],
    ["-o", "c.expected.npy", "--save-case", "c.json"],
    ["-o", "c.input2.npy", "--save-case", "c.json"],
    ["-o", "link.json", "--save-case", "c.json"],
])
def test_two_output_options_naming_one_file_are_a_usage_error(tmp_path, options, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "c.json").write_text("kept")
    (tmp_path / "link.json").symlink_to("c.json")
    result = invoke("run", "bit_xor", "[1]", "[2]", "--dtype", "uint8", *options)
    assert result.exit_code == 2 and "name the same file" in result.stderr, result.output
    assert (tmp_path / "c.json").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "link.json", "sub"]


def test_outputs_of_their_own_are_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "bit_xor", "[1]", "[2]", "--dtype", "uint8", "-o", "out.json", "--save-case", "c.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "c.json").read_text())["expected"]["data"] == [3]


def test_the_suite_s_two_reports_may_not_be_one_file(tmp_path):
    (tmp_path / "r.json").write_text("kept")
    (tmp_path / "j.xml").symlink_to("r.json")
    result = invoke("test", REPO / "samples", "--junit-xml", tmp_path / "j.xml", "--report", tmp_path / "r.json")
    assert result.exit_code == 2 and "name the same file" in result.stderr
    assert (tmp_path / "r.json").read_text() == "kept"


@pytest.mark.parametrize("arguments", [
    ["run", "reduce", "[[1,2]]", "--dtype", "float32", "--axes", "١"],  # the issue's: was taken as 1
    ["run", "padding", "[[1,2]]", "--dtype", "float32", "--start-padding", "0,٢", "--end-padding", "0,0"],
    ["run", "clip", "[1.5]", "--dtype", "float32", "--min", "١"],
    ["run", "clip1", "[1.5]", "--dtype", "float32", "--min", "١"],
    ["run", "resample", "[[[[1]]]]", "--dtype", "float32", "--scales", "1,1,٢,2"],
    ["run", "upsample_2d", "[[[[1]]]]", "--dtype", "float32", "--scale-size", "٢,2"],
    ["run", "fill_value_constant", "--output-shape", "٢"],
    ["run", "bit_xor", "[1]", "[2]", "--dtype", "uint8", "-f", "٤_١"],
    ["run", "bit_xor", "[1]", "[2]", "--dtype", "uint8", "--check", "[3]", "--max-diffs", "١"],
    ["run", "bit_xor", "[1]", "[2]", "--dtype", "uint8", "--check", "[3]", "--tolerance", "ulp:١"],
    ["run", "bit_xor", "[1]", "[2]", "--dtype", "uint8", "--workers", "２"],  # a fullwidth digit
    ["run", "bit_xor", "[1]", "[2]", "--dtype", "uint8", "--chunks", "١"],
    ["test", "samples", "-j", "١"],
    ["run", "bit_xor", "[1]", "[2]", "--dtype", "uint8", "--max-diffs", "²", "--check", "[3]"],  # a superscript
])
def test_numbers_on_the_command_line_are_ascii_digits(arguments, monkeypatch):
    monkeypatch.chdir(REPO)
    result = invoke(*arguments)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("dmlcli: error:") and result.stderr.count("\n") == 1
