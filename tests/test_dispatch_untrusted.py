"""DxDispatch models as untrusted input (issue 13): where a model may read and write, which files it may
read, how much memory it may take, how its numbers are checked, and what its messages show.

Behaviour that is the process's (exit codes, one line on stderr, no traceback, no hang) is checked
through a subprocess; the rest through click's runner or the Python API.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dmlcli.cli import cli
from dmlcli.dispatch import load_model, run_model

from conftest import REPO

SHARED_MODELS = REPO.parent / "shared" / "dxdispatch_models"
FLAG = "--allow-paths-outside"


def write_model(folder: Path, resources, commands, dispatchables=None, name="model.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps({"resources": resources, "dispatchables": dispatchables or {}, "commands": commands}))
    return path


def buffer(data_type, values, **extra):
    return {"initialValuesDataType": data_type, "initialValues": values, **extra}


def dmlcli_process(*args, cwd, timeout=60):
    """dmlcli in a process of its own; a hang fails the test (TimeoutExpired) rather than the suite."""
    return subprocess.run([sys.executable, "-m", "dmlcli", *[str(a) for a in args]], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def assert_one_line_error(result, code=2):
    returncode = getattr(result, "returncode", getattr(result, "exit_code", None))
    assert returncode == code, (returncode, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("dmlcli: error: "), result.stderr
    assert "Traceback" not in result.stderr


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


# ---------------------------------------------------------------- 3. writes stay in the output folder


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """models/ (the model's folder), out/ (the current folder: the default output folder), elsewhere/."""
    for name in ("models", "out", "elsewhere"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "out")
    return tmp_path


@pytest.mark.parametrize("target", ["../elsewhere/evil.pth", "{root}/elsewhere/evil.pth", "../newfolder/evil.pth",
                                    "sub/../../elsewhere/evil.pth", "link/evil.pth"])
def test_a_model_cannot_write_outside_the_output_folder(layout, target):
    (layout / "out" / "link").symlink_to(layout / "elsewhere")  # a link inside the output folder, pointing out
    target = target.format(root=layout)
    model = write_model(layout / "models", {"A": buffer("UINT8", [1, 2, 3, 4])},
                        [{"type": "writeFile", "resource": "A", "targetPath": target}])
    before = files_under(layout)
    result = dmlcli_process("dispatch", model, cwd=layout / "out")
    assert_one_line_error(result)
    assert f"targetPath '{target[:80]}" in result.stderr  # cut to 80 characters where longer
    assert f"outside the output folder '{str(layout / 'out')[:80]}" in result.stderr and FLAG in result.stderr
    assert files_under(layout) == before  # no file, and no folder (newfolder, sub) created anywhere


def test_allow_paths_outside_writes_where_the_model_says(layout):
    model = write_model(layout / "models", {"A": buffer("UINT8", [1, 2, 3, 4])},
                        [{"type": "writeFile", "resource": "A", "targetPath": "../elsewhere/new/a.bin"}])
    result = invoke("dispatch", model, FLAG)
    assert result.exit_code == 0, result.output
    assert (layout / "elsewhere" / "new" / "a.bin").read_bytes() == bytes([1, 2, 3, 4])


def test_output_dir_receives_the_files_and_folders_are_created_only_inside_it(layout):
    model = write_model(layout / "models", {"A": buffer("UINT8", [1, 2, 3, 4])},
                        [{"type": "writeFile", "resource": "A", "targetPath": "deep/er/a.npy"}])
    result = invoke("dispatch", model, "--output-dir", layout / "elsewhere")
    assert result.exit_code == 0, result.output
    assert np.load(layout / "elsewhere" / "deep" / "er" / "a.npy").tolist() == [1, 2, 3, 4]
    assert files_under(layout / "out") == set()
    # A missing output folder is created, with the file's own folders, as DxDispatch's create_directories does.
    missing = invoke("dispatch", model, "--output-dir", layout / "nowhere" / "yet")
    assert missing.exit_code == 0, missing.output
    assert np.load(layout / "nowhere" / "yet" / "deep" / "er" / "a.npy").tolist() == [1, 2, 3, 4]


def test_a_missing_output_dir_is_not_created_when_the_model_fails(layout):
    model = write_model(layout / "models", {"A": buffer("UINT8", [1, 2, 3, 4])},
                        [{"type": "print", "resource": "A"},
                         {"type": "writeFile", "resource": "A", "targetPath": "a.bin"},
                         {"type": "dispatch", "dispatchable": "none", "bindings": {}}])
    result = invoke("dispatch", model, "--output-dir", layout / "nowhere")
    assert result.exit_code == 2 and not (layout / "nowhere").exists()
    (layout / "afile").write_bytes(b"x")
    under_a_file = invoke("dispatch", model, "--output-dir", layout / "afile" / "sub")
    assert under_a_file.exit_code == 2 and "is a file" in under_a_file.stderr


def test_the_shared_file_model_runs_with_an_output_dir(layout, shared_dir):
    result = invoke("dispatch", SHARED_MODELS / "dml_element_wise_add_npy.json", "--no-timing",
                    "--output-dir", layout / "elsewhere")
    assert result.exit_code == 0, result.output
    assert np.load(layout / "elsewhere" / "dml_element_wise_add_output.npy").tolist() == [2, 4, 6, 8, 10, 12]
    assert files_under(layout / "out") == set()


# ---------------------------------------------------------------- 3. reads stay in the model's folder


@pytest.mark.parametrize("source", ["{root}/elsewhere/secret.bin", "../elsewhere/secret.bin", "inside.bin"])
def test_a_model_cannot_read_outside_its_folder(layout, source):
    (layout / "elsewhere" / "secret.bin").write_bytes(b"SECRET!!")
    (layout / "models" / "inside.bin").symlink_to(layout / "elsewhere" / "secret.bin")  # a link pointing out
    source = source.format(root=layout)
    model = write_model(layout / "models", {"A": buffer("UINT8", {"sourcePath": source})},
                        [{"type": "print", "resource": "A"}])
    result = dmlcli_process("dispatch", model, cwd=layout / "out")
    assert_one_line_error(result)
    assert f"sourcePath '{source[:80]}" in result.stderr and "outside the model's folder" in result.stderr
    assert FLAG in result.stderr and result.stdout == ""
    allowed = invoke("dispatch", model, FLAG)
    assert allowed.exit_code == 0 and allowed.stdout.splitlines() == ["Resource 'A': 83, 69, 67, 82, 69, 84, 33, 33"]


def test_a_source_found_in_the_current_folder_must_still_be_inside_the_models_folder(layout):
    (layout / "out" / "data.bin").write_bytes(b"\x01\x02")
    model = write_model(layout / "models", {"A": buffer("UINT8", {"sourcePath": "data.bin"})},
                        [{"type": "print", "resource": "A"}])
    result = invoke("dispatch", model)
    assert result.exit_code == 2 and "outside the model's folder" in result.stderr


# ---------------------------------------------------------------- 4. regular files only


@pytest.mark.parametrize("model,what", [("/dev/zero", "a character device"), (".", "a directory")])
def test_the_model_must_be_a_regular_file(tmp_path, model, what):
    result = dmlcli_process("dispatch", model, cwd=tmp_path, timeout=30)
    assert_one_line_error(result)
    assert f"'{model}'" in result.stderr and what in result.stderr


def test_a_fifo_as_the_model_or_a_source_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "pipe.bin"
    os.mkfifo(fifo)
    model = write_model(tmp_path, {"A": buffer("UINT8", {"sourcePath": "pipe.bin"})}, [{"type": "print", "resource": "A"}])
    result = dmlcli_process("dispatch", model, cwd=tmp_path, timeout=30)
    assert_one_line_error(result)
    assert "sourcePath 'pipe.bin' is a FIFO" in result.stderr
    result = dmlcli_process("dispatch", fifo, cwd=tmp_path, timeout=30)
    assert_one_line_error(result)
    assert "is a FIFO" in result.stderr


def test_a_device_as_a_source_is_refused_even_when_paths_outside_are_allowed(tmp_path):
    model = write_model(tmp_path, {"A": buffer("UINT8", {"sourcePath": "/dev/zero"})}, [{"type": "print", "resource": "A"}])
    result = dmlcli_process("dispatch", model, FLAG, cwd=tmp_path, timeout=30)
    assert_one_line_error(result)
    assert "sourcePath '/dev/zero' is a character device, expected a regular file" in result.stderr


def test_a_model_larger_than_the_limit_is_refused_unread(tmp_path):
    from dmlcli.dispatch.files import MAX_MODEL_BYTES

    model = tmp_path / "huge.json"
    with open(model, "wb") as handle:
        handle.truncate(MAX_MODEL_BYTES + 1)  # sparse: costs no disk
    result = dmlcli_process("dispatch", model, cwd=tmp_path)
    assert_one_line_error(result)
    assert f"more than the {MAX_MODEL_BYTES >> 20} MiB a model may be" in result.stderr


# ---------------------------------------------------------------- 5. memory


def test_a_buffer_larger_than_memory_is_refused_before_it_is_allocated(tmp_path):
    # 1 PiB: no machine has it. Before, bytearray(2**50) was attempted.
    model = write_model(tmp_path, {"A": buffer("UINT8", [1], sizeInBytes=2**50)}, [{"type": "print", "resource": "A"}])
    result = dmlcli_process("dispatch", model, cwd=tmp_path)
    assert_one_line_error(result)
    assert "sizeInBytes" in result.stderr and "memory" in result.stderr and "available" in result.stderr


@pytest.fixture
def little_memory(monkeypatch):
    """Pretend 64 KiB are available, so that the checks can be seen at work without allocating much."""
    import dmlcli.dispatch.memory as memory

    monkeypatch.setattr(memory, "available_memory", lambda: 64 << 10)


def test_a_huge_sequence_is_refused_before_it_is_made(tmp_path, monkeypatch, little_memory):
    monkeypatch.chdir(tmp_path)
    sequence = {"valueCount": 4294967295, "valueStart": 0, "valueDelta": 1}
    model = write_model(tmp_path, {"A": buffer("FLOAT32", sequence)}, [{"type": "print", "resource": "A"}])
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert "initialValues" in result.stderr and "more than the 64.0 KiB available" in result.stderr


def test_the_resources_are_counted_together_not_one_by_one(tmp_path, monkeypatch, little_memory):
    monkeypatch.chdir(tmp_path)
    one = {"A": buffer("UINT8", [1], sizeInBytes=40 << 10)}
    assert invoke("dispatch", write_model(tmp_path, one, [{"type": "print", "resource": "A"}])).exit_code == 0
    two = {**one, "B": buffer("UINT8", [1], sizeInBytes=40 << 10)}
    result = invoke("dispatch", write_model(tmp_path, two, [{"type": "print", "resource": "A"}]))
    assert_one_line_error(result)
    assert "buffers 80.0 KiB" in result.stderr and "nothing was run or written" in result.stderr


def test_staged_files_count_too(tmp_path, monkeypatch, little_memory):
    monkeypatch.chdir(tmp_path)
    resources = {"A": buffer("UINT8", [1], sizeInBytes=20 << 10)}
    writes = [{"type": "writeFile", "resource": "A", "targetPath": f"a{i}.bin"} for i in range(3)]
    result = invoke("dispatch", write_model(tmp_path, resources, writes))
    assert_one_line_error(result)
    assert "files to write" in result.stderr and list(tmp_path.glob("a*.bin")) == []


def test_timing_keeps_a_bounded_number_of_samples(tmp_path):
    from dmlcli.dispatch.run import SampleReservoir

    model = write_model(tmp_path, {"A": buffer("UINT8", [1, 2, 3, 4])}, [
        {"type": "dispatch", "dispatchable": "not", "bindings": {"InputTensor": "A", "OutputTensor": "A"}}],
        {"not": {"type": "DML_OPERATOR_ELEMENT_WISE_BIT_NOT", "desc": {
            "InputTensor": {"DataType": "UINT8", "Sizes": [4]}, "OutputTensor": {"DataType": "UINT8", "Sizes": [4]}}}})
    iterations = SampleReservoir.CAPACITY * 2 + 1
    run = run_model(load_model(model, output_dir=tmp_path), iterations=iterations, emit=lambda line: None)
    timing = run.timings[0]
    assert timing.sample_count == iterations
    assert len(timing.cpu_samples_ms) == SampleReservoir.CAPACITY
    assert timing.cpu_median_ms > 0


def test_the_reservoir_is_exact_up_to_its_capacity_and_bounded_past_it():
    from dmlcli.dispatch.run import DispatchTiming, SampleReservoir

    samples = [float((i * 7919) % 1000) for i in range(999)]
    reservoir = SampleReservoir(warmup=3, capacity=1000)
    for sample in samples:
        reservoir.add(sample)
    assert reservoir.hot() == tuple(samples[3:])  # every hot sample: DxDispatch's median exactly
    assert DispatchTiming.median(reservoir.hot()) == DispatchTiming("x", tuple(samples), warmup=3).cpu_median_ms
    few = SampleReservoir(warmup=5)
    for sample in (4.0, 2.0):
        few.add(sample)
    assert few.hot() == (2.0,)  # fewer samples than the warmup: the last one stays hot, as in Executor.cpp
    many = SampleReservoir(warmup=0, capacity=2000)
    for i in range(200_000):
        many.add(float(i % 1000))
    assert len(many.kept) == 2000 and many.count == 200_000
    assert abs(DispatchTiming.median(many.hot()) - 500) < 60  # a uniform sample's median


# ---------------------------------------------------------------- 6. numbers checked as `run` checks them


@pytest.mark.parametrize("resource,message", [
    (buffer("FLOAT32", [1e400]), "initialValues[0]: 1E+400 is out of range for FLOAT32"),
    (buffer("FLOAT32", [1e39]), "initialValues[0]: 1e+39 is out of range for FLOAT32"),
    (buffer("FLOAT16", {"valueCount": 2, "value": 1e400}), "value[0]: 1E+400 is out of range for FLOAT16"),
    (buffer("FLOAT64", {"valueCount": 2, "valueStart": 0, "valueDelta": -1e400}), "is out of range for FLOAT64"),
    (buffer("UINT8", ["nan"]), "'nan' is not an integer"),
    (buffer("INT8", [-129]), "-129 is out of range for INT8"),
    (buffer("UINT64", [2**64]), f"{2**64} is out of range for UINT64"),
])
def test_initial_values_out_of_range_are_refused(tmp_path, monkeypatch, resource, message):
    monkeypatch.chdir(tmp_path)
    text = json.dumps({"resources": {"A": resource}, "dispatchables": {}, "commands": [{"type": "print", "resource": "A"}]})
    model = tmp_path / "model.json"
    model.write_text(text.replace("Infinity", "1e400"))  # json.dumps writes 1e400 (a float inf) as Infinity
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert message in result.stderr and "np.float64" not in result.stderr


def test_a_desc_float_beyond_a_double_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    desc = {"InputTensor": {"DataType": "FLOAT32", "Sizes": [1]}, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1]},
            "Alpha": 12345}
    model = write_model(tmp_path, {"A": buffer("FLOAT32", [1])}, [
        {"type": "dispatch", "dispatchable": "elu", "bindings": {"InputTensor": "A", "OutputTensor": "A"}}],
        {"elu": {"type": "DML_OPERATOR_ACTIVATION_ELU", "desc": desc}})
    model.write_text(model.read_text().replace("12345", "1e400"))
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert "Alpha" in result.stderr and "out of range for float32" in result.stderr


# ---------------------------------------------------------------- 12. exit 2, never exit 5 or a traceback


LONG_NUMBER = "9" * 5000


@pytest.mark.parametrize("resource,command,message", [
    ('{"initialValuesDataType": "UINT8", "initialValues": [%s]}' % LONG_NUMBER, None, "is out of range for UINT8"),
    ('{"initialValuesDataType": "UINT8", "initialValues": {"valueCount": %s, "value": 1}}' % LONG_NUMBER, None,
     "valueCount: expected an unsigned integer"),
    ('{"initialValuesDataType": "UINT8", "initialValues": [1], "sizeInBytes": 18446744073709551615}', None,
     "sizeInBytes"),
    ('{"initialValuesDataType": "UINT8", "initialValues": [1]}',
     '{"type": "writeFile", "resource": "A", "targetPath": "a\\u0000b.bin"}', "contains a NUL character"),
    ('{"initialValuesDataType": "UINT8", "initialValues": {"sourcePath": "%s"}}' % ("x" * 5000), None,
     "cannot be read (File name too long)"),
    ('{"initialValuesDataType": "UINT8", "initialValues": [1]}',
     '{"type": "writeFile", "resource": "A", "targetPath": "%s"}' % ("x" * 5000), "bytes long; the file system allows at most"),
])
def test_hostile_model_values_are_one_clean_line(tmp_path, resource, command, message):
    command = command or '{"type": "print", "resource": "A"}'
    model = tmp_path / "model.json"
    model.write_text('{"resources": {"A": %s}, "dispatchables": {}, "commands": [%s]}' % (resource, command))
    result = dmlcli_process("dispatch", model, cwd=tmp_path)
    assert_one_line_error(result)
    assert message in result.stderr
    assert len(result.stderr) < 400  # echoed input is cut
    assert list(tmp_path.iterdir()) == [model]


# ---------------------------------------------------------------- 15. messages and nothing half-done


def test_a_failed_model_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "b.bin").write_bytes(b"old")
    resources = {"A": buffer("UINT8", [1, 2, 3, 4])}
    commands = [{"type": "writeFile", "resource": "A", "targetPath": "a.bin"},
                {"type": "writeFile", "resource": "A", "targetPath": "b.bin"},
                {"type": "writeFile", "resource": "A", "targetPath": "c.npy", "dimensions": [100]}]  # fails when it runs
    # --output-dir names the folder, so that b.bin may be replaced (without it an existing file is refused at once).
    result = invoke("dispatch", write_model(tmp_path, resources, commands), "--output-dir", tmp_path)
    assert_one_line_error(result)
    assert "dimensions [100] need 100 bytes" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.bin", "model.json"]
    assert (tmp_path / "b.bin").read_bytes() == b"old"
    assert "written to" not in result.stdout


def test_files_are_written_at_the_end_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    resources = {"A": buffer("UINT8", [1, 2, 3, 4])}
    desc = {"InputTensor": {"DataType": "UINT8", "Sizes": [4]}, "OutputTensor": {"DataType": "UINT8", "Sizes": [4]}}
    commands = [{"type": "writeFile", "resource": "A", "targetPath": "before.bin"},
                {"type": "dispatch", "dispatchable": "not", "bindings": {"InputTensor": "A", "OutputTensor": "A"}},
                {"type": "print", "resource": "A"},
                {"type": "writeFile", "resource": "A", "targetPath": "after.bin"}]
    result = invoke("dispatch", write_model(tmp_path, resources, commands,
                                            {"not": {"type": "DML_OPERATOR_ELEMENT_WISE_BIT_NOT", "desc": desc}}),
                    "--no-timing")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "before.bin").read_bytes() == bytes([1, 2, 3, 4])  # the buffer as it was at the command
    assert (tmp_path / "after.bin").read_bytes() == bytes([254, 253, 252, 251])
    assert result.stdout.splitlines() == ["Resource 'A': 254, 253, 252, 251",
                                          f"Resource 'A' written to '{tmp_path / 'before.bin'}'",
                                          f"Resource 'A' written to '{tmp_path / 'after.bin'}'"]


def test_running_out_of_memory_in_a_model_does_not_suggest_o(tmp_path, monkeypatch):
    import dmlcli.dispatch.run as run

    def no_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run, "format_resource", no_memory)
    result = invoke("dispatch", write_model(tmp_path, {"A": buffer("UINT8", [1])}, [{"type": "print", "resource": "A"}]))
    assert_one_line_error(result)
    assert "ran out of memory" in result.stderr and "(-o" not in result.stderr and "out.npy" not in result.stderr


def test_messages_cut_echoed_input_and_show_no_python_reprs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    long_name = "R" * 10_000
    model = write_model(tmp_path, {"A": buffer("UINT8", [1])}, [{"type": "print", "resource": long_name}])
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert "there is no resource named 'RRRR" in result.stderr and "…" in result.stderr and len(result.stderr) < 300
    model = write_model(tmp_path, {"A": buffer("UINT8", {"valueCount": [1, 2], "value": 1})}, [])
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert "found [1, 2]" in result.stderr


@pytest.mark.parametrize("header,unwanted", [
    ("{'descr': '<u1', 'fortran_order': False, 'shape': (f(),), }", "object at 0x"),
    ("{'descr': [('a', '<i4', 'x', 'y')], 'fortran_order': False, 'shape': (1,), }", "unpack"),
    ("{'descr': '<u1', 'fortran_order': False, 'shape': [" + "1, " * 5000 + "], }", "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1"),
])
def test_malformed_npy_headers_get_a_short_plain_message(tmp_path, header, unwanted):
    magic = b"\x93NUMPY"
    text = header.encode("latin1")
    text += b" " * ((-(len(magic) + 4 + len(text) + 1)) % 64) + b"\n"
    path = tmp_path / "bad.npy"
    path.write_bytes(magic + bytes((1, 0)) + len(text).to_bytes(2, "little") + text + bytes(64))
    result = dmlcli_process("run", "bit_not", path, cwd=tmp_path)
    assert_one_line_error(result)
    assert "malformed .npy header" in result.stderr and unwanted not in result.stderr
    assert len(result.stderr) < 300


def test_a_number_too_small_to_hold_reads_as_zero(tmp_path):
    result = invoke("run", "identity", '[1e-99999999999999999999, -1e-99999999999999999999, 0e99999999999999999999]',
                    "--dtype", "float32", "--format", "hex")
    assert result.exit_code == 0, result.output
    assert "0x00000000   0x80000000   0x00000000" in result.stdout
    refused = invoke("run", "identity", "[1e-99999999999999999999]", "--dtype", "uint8")
    assert refused.exit_code == 2 and "is not an integer" in refused.stderr
    assert invoke("run", "identity", "[1e99999999999999999999]", "--dtype", "float32").exit_code == 2


@pytest.mark.parametrize("data_type", ["FLOAT16", "FLOAT32", "FLOAT64"])
def test_float_sequences_are_the_step_by_step_sums_of_dxdispatch(data_type):
    """Sequences are made at NumPy's speed now; they must still be `value += valueDelta` in the element type."""
    from dmlcli.dispatch.model import parse_resource

    rng = np.random.default_rng(5)
    dtype = np.dtype({"FLOAT16": np.float16, "FLOAT32": np.float32, "FLOAT64": np.float64}[data_type])
    for start, delta in [(0.1, 0.1), (1.0, 1e-4), (-3.5, 0.3333), *rng.standard_normal((5, 2)).tolist(), (6e4, 100.0)]:
        initial = {"valueCount": 3000, "valueStart": start, "valueDelta": delta}
        resource = parse_resource("S", buffer(data_type, initial), model_dir=Path("."), where="S")
        # DxDispatch reads a number as a double, casts it to float, then to half (ParseFloat16).
        as_type = (lambda x: dtype.type(np.float32(x))) if dtype.itemsize < 8 else dtype.type  # noqa: E731
        current, expected = as_type(start), []
        step = as_type(delta)
        with np.errstate(over="ignore"):
            for _ in range(3000):
                expected.append(current)
                current = dtype.type(current + step)
        assert np.frombuffer(resource.initial_values, dtype.newbyteorder("<")).tobytes() == \
            np.array(expected, dtype).astype(dtype.newbyteorder("<")).tobytes()


def test_a_write_that_cannot_succeed_is_found_before_any_file_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    commands = [{"type": "writeFile", "resource": "A", "targetPath": "first.bin"},
                {"type": "writeFile", "resource": "A", "targetPath": "late/second.bin"}]
    model = write_model(tmp_path, {"A": buffer("UINT8", [1, 2, 3, 4])}, commands)
    import dmlcli.dispatch.run as run

    real = run.stage_resource

    def stage_and_block(command, model, buffers):  # the folder turns into a file while the model runs
        if command.index == 1:
            (tmp_path / "late").write_bytes(b"")
        return real(command, model, buffers)

    monkeypatch.setattr(run, "stage_resource", stage_and_block)
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert "is a file, not a folder; nothing was written" in result.stderr
    assert not (tmp_path / "first.bin").exists()
