"""Hostile and broken input: every failure is one line on stderr with the documented exit code,
no traceback, and no file written or changed.

Each bad input runs twice, with `-o out.npy` and `-o out.json` over an existing output file, so
that both the in-memory path and (for .npy inputs) the streaming .npy-to-.npy path are covered.
"""

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from numpy.lib import format as npy_format

from dmlcli.io import room
from dmlcli.cli import cli

OLD_NPY = b"old .npy output: must survive every failure"
OLD_JSON = b'{"old": "json output"}'


def invoke(*args, input=None, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, env=env)


def snapshot(folder: Path) -> dict:
    """Every file under `folder`: its bytes, or for big (sparse) files its identity; links as their target."""
    found = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_file():
            facts = path.stat()
            small = facts.st_size <= 1 << 20
            found[name] = path.read_bytes() if small else (facts.st_size, facts.st_mtime_ns, facts.st_ino)
    return found


def assert_clean_failure(result, code: int, message: str):
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dmlcli: error: "), lines[0]
    assert message in lines[0], lines[0]
    assert result.stdout == ""


def write_npy_header(path: Path, descr, shape, data: bytes = b"", fortran_order=False):
    with open(path, "wb") as handle:
        npy_format.write_array_header_1_0(handle, {"descr": descr, "fortran_order": fortran_order, "shape": shape})
        handle.write(data)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out.npy").write_bytes(OLD_NPY)
    (tmp_path / "out.json").write_bytes(OLD_JSON)
    np.save(tmp_path / "good.npy", np.arange(10, dtype=np.uint8))
    return tmp_path


# ---------------------------------------------------------------- the inputs the issue lists

def _garbage(path):
    path.write_bytes(bytes(range(256)) * 3)


def _truncated_npy(path):
    np.save(path, np.arange(100, dtype=np.uint32))
    path.write_bytes(path.read_bytes()[:-7])


def _truncated_header(path):
    np.save(path, np.arange(100, dtype=np.uint32))
    path.write_bytes(path.read_bytes()[:30])


def _pickled(path):
    np.save(path, np.array([1, "two", None], dtype=object), allow_pickle=True)


def _records(path):
    np.save(path, np.zeros(3, dtype=[("a", "<u1"), ("b", "<f4")]))


def _claims_more_than_file(path):
    write_npy_header(path, "<u4", (1000,), b"\0" * 400)


def _negative_size(path):
    write_npy_header(path, "<u1", (4,), b"\0" * 4)
    path.write_bytes(path.read_bytes().replace(b"(4,)", b"(-4,)"))


def _zero_size_beyond_numpy(path):
    write_npy_header(path, "<u2", (0, 2**31, 2**31))


def _unicode_npy(path):
    np.save(path, np.array(["ab", "cd"]))


def _bool_npy(path):
    np.save(path, np.array([True, False]))


def _unknown_descr(path):
    write_npy_header(path, "<u1", (4,), b"\0" * 4)
    path.write_bytes(path.read_bytes().replace(b"'<u1'", b"'<q9'"))


def _unparsable_header(path):
    write_npy_header(path, "<u1", (4,), b"\0" * 4)
    path.write_bytes(path.read_bytes().replace(b"'descr'", b"__import__('os')"))


def _text(content):
    def make(path):
        path.write_text(content)
    return make


def _directory(path):
    path.mkdir()


NPY_CASES = {
    "binary garbage named .npy": (_garbage, "is not a .npy file (no NumPy magic bytes"),
    "truncated .npy data": (_truncated_npy, "but the file holds only 393 bytes of data (truncated?)"),
    "truncated .npy header": (_truncated_header, "malformed .npy header"),
    "pickled objects": (_pickled, "never unpickles"),
    "record dtype": (_records, "holds Python objects or records"),
    "header claims more than the file": (_claims_more_than_file, "the header promises 1000 elements"),
    "negative size in header": (_negative_size, "malformed .npy header"),
    "zero-size shape beyond NumPy": (_zero_size_beyond_numpy, "is larger than NumPy can describe"),
    "unicode strings": (_unicode_npy, "has no DirectML tensor data type"),
    "booleans": (_bool_npy, "use uint8 0/1 for booleans"),
    "unknown dtype in header": (_unknown_descr, "malformed .npy header"),
    "code in header": (_unparsable_header, "malformed .npy header"),
    "empty .npy": (_text(""), "is not a .npy file"),
    "directory named .npy": (_directory, "is a directory"),
}

JSON_FILE_CASES = {
    "empty JSON file": (_text(""), "is empty, expected a JSON tensor"),
    "blank JSON file": (_text("  \n "), "is empty, expected a JSON tensor"),
    "malformed JSON": (_text('{"dtype": "uint8" "data": [1]}'), "malformed JSON at line 1 column 19"),
    "truncated JSON": (_text('{"dtype": "uint8", "data": [1, 2'), "malformed JSON at line 1 column"),
    "deeply nested JSON": (_text("[" * 100_000 + "]" * 100_000), "JSON nested too deeply"),
    "nested beyond 64 levels": (_text('{"dtype": "uint8", "data": ' + "[" * 65 + "1" + "]" * 65 + "}"),
                                "data nested more than 64 levels deep"),
    "binary garbage named .json": (lambda p: p.write_bytes(b"\xff\xfe\x00garbage"), "is not UTF-8 text"),
    "a directory": (_directory, "is a directory"),
}


@pytest.fixture(params=["out.npy", "out.json"])
def output(request):
    return request.param


@pytest.mark.parametrize("case", NPY_CASES)
def test_bad_npy_input(workdir, output, case):
    make, message = NPY_CASES[case]
    make(workdir / "bad.npy")
    before = snapshot(workdir)
    result = invoke("run", "bit_not", "bad.npy", "-o", output)
    assert_clean_failure(result, 2, message)
    assert "input 1 'bad.npy'" in result.stderr
    assert snapshot(workdir) == before


@pytest.mark.parametrize("case", JSON_FILE_CASES)
def test_bad_json_file(workdir, output, case):
    make, message = JSON_FILE_CASES[case]
    name = "bad" if case == "a directory" else "bad.json"
    make(workdir / name)
    before = snapshot(workdir)
    result = invoke("run", "bit_not", name, "--dtype", "uint8", "-o", output)
    assert_clean_failure(result, 2, message)
    assert snapshot(workdir) == before


@pytest.mark.parametrize("name", ["missing.npy", "missing.json", "no/such/folder/x.npy"])
def test_missing_file(workdir, output, name):
    before = snapshot(workdir)
    result = invoke("run", "bit_not", name, "-o", output)
    assert_clean_failure(result, 2, f"input 1 {name!r}: no such file")
    assert snapshot(workdir) == before


def test_missing_second_input_is_named(workdir, output):
    result = invoke("run", "bit_xor", "good.npy", "gone.npy", "-o", output)
    assert_clean_failure(result, 2, "input 2 'gone.npy': no such file")


def test_a_device_is_refused_not_read_forever(workdir, output):
    result = invoke("run", "bit_not", "/dev/zero", "--dtype", "uint8", "-o", output)
    assert_clean_failure(result, 2, "is not a regular file")


INLINE_CASES = {
    # name: (input, --dtype, message)
    "unknown dtype in JSON": ('{"dtype": "uint9", "data": [1]}', None, "unknown data type 'uint9'"),
    "dtype not a string": ('{"dtype": 8, "data": [1]}', None, '"dtype" must be a string'),
    "no dtype at all": ("[1, 2]", None, "a bare list or number needs its data type"),
    "unknown key": ('{"dtype": "uint8", "data": [1], "colour": 1}', None, "unknown key 'colour'"),
    "no data": ('{"dtype": "uint8"}', None, 'has no "data"'),
    "repeated key": ('{"dtype": "uint8", "dtype": "int8", "data": [1]}', None, "key 'dtype' appears twice"),
    "out of range high": ("[1, 256]", "uint8", "data[1] = 256 is out of range for uint8 (0 to 255)"),
    "out of range low": ("[[0, -1]]", "uint16", "data[0][1] = -1 is out of range for uint16"),
    "out of range int64": ("[9223372036854775808]", "int64", "is out of range for int64"),
    "out of range float16": ("[70000]", "float16", "= 70000 is out of range for float16"),
    "a thousand digits": ("[" + "9" * 5000 + "]", "uint64", "is out of range for uint64"),
    "an exponent Decimal cannot hold": ("[1e99999999999999999999]", "float32", "is too large to read"),
    "a huge exponent for an integer": ("[1e999999999]", "uint8", "is out of range for uint8"),
    "fractional for an integer type": ("[1, 2.5]", "int32", "data[1] = 2.5 is not an integer, as int32 needs"),
    "tiny fraction for an integer type": ("[1e-999999999]", "uint8", "is not an integer"),
    "NaN token for an integer type": ("[NaN]", "uint8", "data[0] = NaN is not an integer"),
    "Infinity token for an integer type": ("[Infinity]", "int16", "data[0] = Infinity is not an integer"),
    "-Infinity token for an integer type": ("[-Infinity]", "int8", "data[0] = -Infinity is not an integer"),
    "nan string for an integer type": ('["nan"]', "uint32", 'data[0] = "nan" is not an integer'),
    "string in integer data": ('[1, "2"]', "uint8", 'data[1] = "2" is not an integer'),
    "string in float data": ('[1, "two"]', "float32", 'data[1] = "two" is not a number'),
    "boolean in data": ("[true]", "uint8", "data[0] = true is not an integer"),
    "null in data": ("[null]", "float16", "data[0] = null is not a number"),
    "object in data": ('[{"a": 1}]', "uint8", "is not an integer"),
    "ragged lists": ("[[1, 2], [3]]", "uint8", "ragged data: lists at depth 2 have lengths [1, 2]"),
    "lists and numbers mixed": ("[[1, 2], 3]", "uint8", "ragged data: lists and numbers mixed"),
    "shape/data mismatch": ('{"dtype": "uint8", "shape": [2, 3], "data": [[1, 2], [3, 4]]}', None,
                            '"shape" [2, 3] does not match the data, whose shape is [2, 2]'),
    "shape/flat data count": ('{"dtype": "uint8", "shape": [2, 3], "data": [1, 2, 3]}', None,
                              '"shape" [2, 3] does not match the data'),
    "shape not a list": ('{"dtype": "uint8", "shape": 3, "data": [1, 2, 3]}', None,
                         '"shape" must be a list of non-negative integers'),
    "negative shape": ('{"dtype": "uint8", "shape": [-3], "data": [1, 2, 3]}', None,
                       '"shape" must be a list of non-negative integers'),
    "absurd shape beside a zero": ('{"dtype": "uint8", "shape": [0, 100000000000000000000], "data": []}', None,
                                   '"shape" [0, 100000000000000000000] cannot be used'),
    "malformed inline JSON": ("[1, 2", "uint8", "malformed JSON at line 1 column 6: Expecting"),
    "not JSON and not a file": ("nonsense", "uint8", "(not an existing file either)"),
    "inline JSON too long to be a file name": ("[" + "1, " * 300 + "x]", "uint8", "malformed JSON"),
    "--dtype disagrees with the tensor": ('{"dtype": "int8", "data": [1]}', "uint8",
                                          "declares dtype INT8 but --dtype says UINT8"),
    "unknown --dtype": ("[1]", "blob", "unknown data type 'blob'"),
    "4-bit value out of range": ("[16]", "uint4", "data[0] = 16 is out of range for uint4 (0 to 15)"),
}


@pytest.mark.parametrize("case", INLINE_CASES)
def test_bad_inline_json(workdir, output, case):
    text, dtype, message = INLINE_CASES[case]
    before = snapshot(workdir)
    args = ["run", "bit_not", text, "-o", output] + (["--dtype", dtype] if dtype else [])
    result = invoke(*args)
    assert_clean_failure(result, 2, message)
    assert snapshot(workdir) == before


def test_bad_json_on_stdin(workdir, output):
    result = invoke("run", "bit_not", "-", "-o", output, input='{"dtype": "uint8", "data": [1, }')
    assert_clean_failure(result, 2, "input 1 (stdin): malformed JSON")
    assert snapshot(workdir)["out.npy"] == OLD_NPY


def test_dtype_option_disagrees_with_npy(workdir, output):
    result = invoke("run", "bit_not", "good.npy", "--dtype", "uint16", "-o", output)
    assert_clean_failure(result, 2, "holds UINT8 but --dtype says UINT16")


USAGE_CASES = {
    "too few inputs": (["run", "bit_xor", "good.npy"], "BIT_XOR takes 2 input tensors (ATensor, BTensor); got 1"),
    "too many inputs": (["run", "bit_not", "good.npy", "good.npy"], "BIT_NOT takes 1 input tensor (InputTensor); got 2"),
    "unknown operator": (["run", "bit_nand", "good.npy"], "unknown operator 'bit_nand'"),
    "unknown feature level": (["run", "bit_not", "good.npy", "-f", "7_0"], "unknown feature level '7_0'"),
    "unknown infinity mode": (["run", "is_infinity", '[1.0]', "--dtype", "float32", "--infinity-mode", "up"],
                              "unknown InfinityMode 'up'"),
    "parameter the operator lacks": (["run", "bit_not", "good.npy", "--infinity-mode", "positive"],
                                     "BIT_NOT has no infinity-mode parameter"),
    "unknown output dtype": (["run", "logical_and", "good.npy", "good.npy", "--output-dtype", "bits"],
                             "unknown data type 'bits'"),
}


@pytest.mark.parametrize("case", USAGE_CASES)
def test_usage_errors(workdir, output, case):
    args, message = USAGE_CASES[case]
    before = snapshot(workdir)
    result = invoke(*args, "-o", output)
    assert_clean_failure(result, 2, message)
    assert snapshot(workdir) == before


@pytest.mark.parametrize("args,message", [
    (["run", "bit_not", "good.npy", "--frobnicate"],
     "No such option '--frobnicate'. (Did you mean one of: '--broadcast', '--format'?) (see '"),
    (["run", "bit_not", "good.npy", "--backend", "tpu"], "Invalid value for '--backend': 'tpu' is not one of"),
    (["run", "bit_not", "good.npy", "--format", "xml"], "Invalid value for '--format'"),
    (["run"], "Missing argument 'OPERATOR'."),
    (["run", "bit_not"], "BIT_NOT takes 1 input tensor (InputTensor); got 0"),
    (["runn", "bit_not", "good.npy"], "No such command 'runn'. Did you mean 'run'?"),
])
def test_click_usage_errors_are_one_line_too(workdir, args, message):
    before = snapshot(workdir)
    result = invoke(*args, "-o", "out.npy") if args[0] == "run" and len(args) > 2 else invoke(*args)
    assert_clean_failure(result, 2, message)
    assert snapshot(workdir) == before


OUTPUT_CASES = {
    "folder that does not exist": ("nowhere/out.npy", "output 'nowhere/out.npy': folder 'nowhere' does not exist"),
    "unknown extension": ("out.txt", "output 'out.txt': unknown extension '.txt'; name the format with --format npy "
                                     "or --format json, or end the name in .npy or .json"),
    "no extension": ("out", "output 'out': no extension; name the format with --format npy or --format json"),
    "a directory": ("adir.npy", "output 'adir.npy': is a directory"),
}


@pytest.mark.parametrize("case", OUTPUT_CASES)
@pytest.mark.parametrize("source", ["good.npy", '{"dtype": "uint8", "data": [1, 2]}'])
def test_bad_output_path(workdir, case, source):
    (workdir / "adir.npy").mkdir()
    target, message = OUTPUT_CASES[case]
    before = snapshot(workdir)
    result = invoke("run", "bit_not", source, "-o", target)
    assert_clean_failure(result, 2, message)
    assert snapshot(workdir) == before


RULE_CASES = {
    "data type the table lacks": (["run", "bit_not", "[1.5]", "--dtype", "float32", "-f", "4_0"],
                                  "InputTensor data type FLOAT32 is not supported at DML_FEATURE_LEVEL_4_0"),
    "rank 9": (["run", "bit_not", "[" * 9 + "1" + "]" * 9, "--dtype", "uint8"], "dimension count 9 is not supported"),
    "mismatched types": (["run", "bit_xor", "good.npy", '{"dtype": "uint16", "data": [1]}', "--broadcast"],
                         "data type UINT8 and BTensor data type UINT16 differ"),
    "mismatched shapes": (["run", "bit_and", "good.npy", "[1, 2]", "--dtype", "uint8"],
                          "ATensor Sizes [10] and BTensor Sizes [2] differ"),
    "shapes that cannot broadcast": (["run", "bit_and", "good.npy", "[1, 2]", "--dtype", "uint8", "--broadcast"],
                                     "cannot be broadcast together"),
    "zero-size": (["run", "bit_not", "[]", "--dtype", "uint8"], "Sizes [0] contain a zero"),
    "zero-size .npy": (["run", "bit_not", "empty_array.npy"], "Sizes [3, 0] contain a zero"),
    "0-D": (["run", "bit_not", "7", "--dtype", "uint8"], "InputTensor is 0-D"),
    "0-D .npy": (["run", "bit_not", "scalar.npy"], "InputTensor is 0-D"),
    "too many elements": (["run", "bit_not", "too_many.npy"], "has 4294967296 elements; a DirectML tensor holds at most"),
}


@pytest.mark.parametrize("case", RULE_CASES)
def test_rule_violations_exit_3(workdir, output, case):
    np.save(workdir / "empty_array.npy", np.zeros((3, 0), np.uint8))
    np.save(workdir / "scalar.npy", np.uint8(7))
    write_npy_header(workdir / "too_many.npy", "|u1", (2**16, 2**16))
    os.truncate(workdir / "too_many.npy", (workdir / "too_many.npy").stat().st_size + 2**32)  # sparse: no disk used
    args, message = RULE_CASES[case]
    before = snapshot(workdir)
    result = invoke(*args, "-o", output)
    assert_clean_failure(result, 3, message)
    assert snapshot(workdir) == before


def test_missing_backend_exits_4(workdir, output):
    from dmlcli.backends import get_backend
    from dmlcli.errors import BackendUnavailableError

    try:
        get_backend("gpu")
    except BackendUnavailableError:
        pass
    else:
        pytest.skip("a GPU backend is usable here")
    before = snapshot(workdir)
    result = invoke("run", "bit_not", "good.npy", "--backend", "gpu", "-o", output)
    assert_clean_failure(result, 4, "GPU backend")
    assert snapshot(workdir) == before


# ---------------------------------------------------------------- memory and disk, said before starting

def test_output_needing_more_memory_than_there_is(workdir, monkeypatch):
    monkeypatch.setattr(room, "available_memory", lambda: 4096)
    np.save(workdir / "a.npy", np.zeros(10_000, np.uint8))
    before = snapshot(workdir)
    # A bare list beside the .npy input: the run is held in memory (its inputs, its output, the JSON writer's
    # 16 MiB of pieces and 8 MiB of code: io/room.py), so it is refused up front.
    result = invoke("run", "bit_xor", "a.npy", "[7]", "--broadcast", "-o", "out.json")
    assert_clean_failure(result, 2, "the output (uint8 [10000]) needs about 24.0 MiB of memory with its inputs but "
                                    "only 4.0 KiB")
    assert ".npy inputs written to a .npy or JSON output (or JSON on stdout) are streamed" in result.stderr
    # The same on stdout (issue 12, bug 6: a big JSON result is refused up front, never half printed).
    shown = invoke("run", "bit_xor", "a.npy", "[7]", "--broadcast", "--format", "json")
    assert_clean_failure(shown, 2, "needs about 24.0 MiB of memory with its inputs")
    assert shown.stdout == ""
    assert snapshot(workdir) == before
    # From .npy inputs alone the run streams, into .npy or JSON text alike, so memory is no obstacle.
    assert invoke("run", "bit_not", "a.npy", "-o", "out.npy").exit_code == 0
    assert np.array_equal(np.load(workdir / "out.npy"), np.full(10_000, 255, np.uint8))
    assert invoke("run", "bit_not", "a.npy", "-o", "out.json").exit_code == 0
    assert json.loads((workdir / "out.json").read_text())["data"] == [255] * 10_000
    streamed = invoke("run", "bit_not", "a.npy", "--format", "json")
    assert streamed.exit_code == 0 and json.loads(streamed.stdout)["data"] == [255] * 10_000


def test_sparse_npy_claiming_more_than_memory_is_refused_before_allocating(workdir):
    """A header that the file really backs (sparse), but whose data could never fit in memory."""
    count = 2**32 - 1  # the most DirectML allows: 32 GiB of uint64
    available = room.available_memory()
    if available is None or available >= count * 8 * 2:
        pytest.skip("this machine could hold the output")
    path = workdir / "huge.npy"
    write_npy_header(path, "<u8", (count,))
    os.truncate(path, path.stat().st_size + count * 8)
    before = snapshot(workdir)
    # Beside a bare list the run is held in memory (from .npy inputs alone, JSON output streams).
    result = invoke("run", "bit_xor", "huge.npy", "[1]", "--broadcast", "-o", "out.json")
    assert_clean_failure(result, 2, "needs about")
    assert "of memory" in result.stderr
    result = invoke("run", "bit_not", "huge.npy")  # shown on stdout: also held in memory
    assert_clean_failure(result, 2, "of memory")
    assert snapshot(workdir) == before


@pytest.mark.parametrize("source", ["a.npy", "a.json"])
@pytest.mark.parametrize("output", ["out.npy", "out.json", "new.npy"])
def test_output_needing_more_disk_than_there_is(workdir, monkeypatch, source, output):
    np.save(workdir / "a.npy", np.arange(1000, dtype=np.uint16))
    (workdir / "a.json").write_text(json.dumps({"dtype": "uint16", "data": list(range(1000))}))
    real = shutil.disk_usage

    def nearly_full(path):
        return real(path)._replace(free=1000)

    monkeypatch.setattr(shutil, "disk_usage", nearly_full)
    before = snapshot(workdir)
    result = invoke("run", "bit_not", source, "-o", output)
    assert_clean_failure(result, 2, f"output {output!r}: needs")
    assert "of disk but '.' has 1000 bytes free; nothing was run or written" in result.stderr
    assert snapshot(workdir) == before


# ---------------------------------------------------------------- failures while writing

def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("source", ["good.npy", "good.json"])
@pytest.mark.parametrize("output", ["out.npy", "out.json"])
@pytest.mark.parametrize("failing,error", [("fsync", errno.ENOSPC), ("replace", errno.EROFS)])
def test_disk_full_or_read_only_while_writing(workdir, monkeypatch, source, output, failing, error):
    """The write fails after the temporary file has data in it: the target stays, the temporary goes."""
    (workdir / "good.json").write_text('{"dtype": "uint8", "data": [1, 2, 3]}')
    seen = []

    def fail(*args, **kwargs):
        seen.append([p.name for p in workdir.iterdir() if p.name.endswith(".tmp")])
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(os, failing, fail)
    before = snapshot(workdir)
    result = invoke("run", "bit_not", source, "-o", output)
    monkeypatch.undo()
    assert_clean_failure(result, 2, f"output {output!r}: write failed ({os.strerror(error)}); "
                                    "the target was left as it was and the partial file removed")
    assert seen and seen[0], "the failure should strike while the temporary file exists"
    assert snapshot(workdir) == before
    assert temporaries(workdir) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
@pytest.mark.parametrize("source", ["good.npy", "[1, 2]"])
def test_read_only_folder(workdir, source):
    folder = workdir / "locked"
    folder.mkdir()
    (folder / "out.npy").write_bytes(OLD_NPY)
    folder.chmod(0o555)
    try:
        result = invoke("run", "bit_not", source, "--dtype", "uint8", "-o", "locked/out.npy")
        assert_clean_failure(result, 2, "output 'locked/out.npy': folder 'locked' is not writable")
        assert sorted(os.listdir(folder)) == ["out.npy"]
        assert (folder / "out.npy").read_bytes() == OLD_NPY
    finally:
        folder.chmod(0o755)


def test_cannot_create_the_temporary_file(workdir, monkeypatch):
    import tempfile

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    result = invoke("run", "bit_not", "[1]", "--dtype", "uint8", "-o", "out.npy")
    monkeypatch.undo()
    assert_clean_failure(result, 2, "output 'out.npy': cannot create a file in '.' (Read-only file system)")
    assert (workdir / "out.npy").read_bytes() == OLD_NPY


def test_stale_temporaries_of_dead_writers_are_removed(workdir):
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(finished.stdout)
    stale = workdir / f".out.npy.{dead}.k1ll3d.tmp"
    stale.write_bytes(b"partial")
    alive = workdir / f".out.npy.{os.getppid()}.w0rk1ng.tmp"  # a live process's: left alone
    alive.write_bytes(b"in progress")
    other = workdir / f".other.npy.{dead}.abc.tmp"  # another target's: left alone
    other.write_bytes(b"x")
    assert invoke("run", "bit_not", "[1]", "--dtype", "uint8", "-o", "out.npy").exit_code == 0
    assert not stale.exists() and alive.exists() and other.exists()
    assert np.array_equal(np.load(workdir / "out.npy"), [254])


# ---------------------------------------------------------------- in place

def test_in_place_json(workdir):
    (workdir / "x.json").write_text('{"dtype": "uint8", "shape": [2, 2], "data": [[0, 1], [2, 255]]}')
    result = invoke("run", "bit_not", "x.json", "-o", "x.json")
    assert result.exit_code == 0, result.output
    assert json.loads((workdir / "x.json").read_text()) == {"dtype": "uint8", "shape": [2, 2],
                                                           "data": [[255, 254], [253, 0]]}
    assert temporaries(workdir) == []


@pytest.mark.parametrize("chunk", ["64", "1M"])
@pytest.mark.parametrize("target", ["a.npy", "b.npy"])
def test_in_place_npy(workdir, monkeypatch, chunk, target):
    """Either input may be the output; with small chunks the streaming path overlaps reading and writing."""
    monkeypatch.setenv("DMLCLI_CHUNK_BYTES", chunk)
    rng = np.random.default_rng(5)
    a = rng.integers(0, 2**32, size=(37, 53), dtype=np.uint32)
    b = rng.integers(0, 2**32, size=(37, 53), dtype=np.uint32)
    np.save(workdir / "a.npy", a)
    np.save(workdir / "b.npy", b)
    result = invoke("run", "bit_xor", "a.npy", "b.npy", "-o", target)
    assert result.exit_code == 0, result.output
    assert np.array_equal(np.load(workdir / target), a ^ b)
    other = "b.npy" if target == "a.npy" else "a.npy"
    assert np.array_equal(np.load(workdir / other), b if other == "b.npy" else a)
    assert temporaries(workdir) == []


def test_in_place_mixed_json_and_npy(workdir):
    a = np.arange(12, dtype=np.uint8).reshape(3, 4)
    np.save(workdir / "a.npy", a)
    result = invoke("run", "bit_and", "a.npy", json.dumps(np.full((3, 4), 6).tolist()), "--dtype", "uint8",
                    "-o", "a.npy")
    assert result.exit_code == 0, result.output
    assert np.array_equal(np.load(workdir / "a.npy"), a & 6)


@pytest.mark.parametrize("source", ["link.npy", "real.npy"])
def test_output_through_a_symbolic_link_keeps_the_link(workdir, source):
    np.save(workdir / "real.npy", np.arange(4, dtype=np.uint8))
    (workdir / "link.npy").symlink_to("real.npy")
    result = invoke("run", "bit_not", source, "-o", "link.npy")
    assert result.exit_code == 0, result.output
    assert (workdir / "link.npy").is_symlink()
    assert np.array_equal(np.load(workdir / "real.npy"), 255 - np.arange(4, dtype=np.uint8))


def test_replacing_keeps_the_file_mode(workdir):
    (workdir / "out.npy").chmod(0o640)
    assert invoke("run", "bit_not", "good.npy", "-o", "out.npy").exit_code == 0
    assert (workdir / "out.npy").stat().st_mode & 0o777 == 0o640


# ---------------------------------------------------------------- internal errors and --debug

def test_internal_error_is_one_line_with_a_hint(workdir, monkeypatch):
    import dmlcli.engine

    def broken(*args, **kwargs):
        raise RuntimeError("kernel exploded\nsecond line")

    monkeypatch.setattr(dmlcli.engine, "execute", broken)
    before = snapshot(workdir)
    result = invoke("run", "bit_not", "[1]", "--dtype", "uint8", "-o", "out.json")
    assert result.exit_code == 5
    assert result.stderr.strip() == ("dmlcli: internal error: RuntimeError: kernel exploded second line "
                                     "(re-run with --debug for the traceback, and please report it)")
    assert snapshot(workdir) == before


def test_running_out_of_memory_is_a_clear_error(workdir, monkeypatch):
    import dmlcli.engine

    def starved(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(dmlcli.engine, "execute", starved)
    result = invoke("run", "bit_not", "[1]", "--dtype", "uint8", "-o", "out.npy")
    assert_clean_failure(result, 2, "ran out of memory")
    assert (workdir / "out.npy").read_bytes() == OLD_NPY


def test_debug_prints_the_traceback_and_keeps_the_exit_code(workdir, monkeypatch):
    """--debug (before or after the command) and DMLCLI_DEBUG=1 add the traceback; the exit code never changes."""
    for args, codes in ((("run", "bit_not", "nope.npy"), (2,)),
                        (("validate", "bit_xor", "[1.5]", "[2.5]", "--dtype", "float32", "-f", "3_0"), (3,)),
                        (("run", "bit_not", "[1]", "--dtype", "uint8", "--backend", "gpu"), (0, 4))):
        plain, debugged = invoke(*args), invoke(*args, "--debug")
        assert debugged.exit_code == plain.exit_code and plain.exit_code in codes
        if plain.exit_code:
            assert "Traceback" in debugged.stderr and "Traceback" not in plain.stderr
            assert debugged.stderr.strip().splitlines()[-1] == plain.stderr.strip()
    import dmlcli.engine

    monkeypatch.setattr(dmlcli.engine, "execute", lambda *a, **k: 1 / 0)
    for args, env in ((("--debug", "run", "bit_not", "[1]", "--dtype", "uint8"), None),
                      (("run", "bit_not", "[1]", "--dtype", "uint8", "--debug"), None),
                      (("run", "bit_not", "[1]", "--dtype", "uint8"), {"DMLCLI_DEBUG": "1"})):
        result = invoke(*args, env=env)
        assert result.exit_code == 5
        assert "Traceback" in result.stderr and "ZeroDivisionError" in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("dmlcli: internal error: ZeroDivisionError")


def run_dmlcli(*args, cwd, env=None):
    full_env = {key: value for key, value in os.environ.items() if key != "DMLCLI_DEBUG"}
    full_env.update(NO_COLOR="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "dmlcli", *args], cwd=cwd, capture_output=True, text=True,
                          env=full_env, timeout=60)


def test_subprocess_bad_input_is_one_line_and_debug_shows_the_traceback(workdir):
    _pickled(workdir / "evil.npy")
    before = snapshot(workdir)
    plain = run_dmlcli("run", "bit_not", "evil.npy", "-o", "out.npy", cwd=workdir)
    assert plain.returncode == 2
    assert plain.stdout == ""
    assert plain.stderr.count("\n") == 1 and "never unpickles" in plain.stderr
    debug = run_dmlcli("--debug", "run", "bit_not", "evil.npy", "-o", "out.npy", cwd=workdir)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "InputError" in debug.stderr
    from_env = run_dmlcli("run", "bit_not", "evil.npy", cwd=workdir, env={"DMLCLI_DEBUG": "1"})
    assert "Traceback" in from_env.stderr
    assert snapshot(workdir) == before


def test_values_near_the_float_limit_read_without_python_warnings(workdir):
    # Rounding 65519.1 (not a double) to float16 looks at the neighbour of the largest finite value, which is infinity.
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = invoke("run", "is_nan", "[65519.1, -65519.1, 65504]", "--dtype", "float16", "--format", "json")
    assert result.exit_code == 0, result.output
    assert result.stderr == "" and [str(w.message) for w in caught] == []
    assert json.loads(result.stdout)["data"] == [0, 0, 0]


@pytest.mark.parametrize("args,code,message", [
    (["run", "bit_not", "good.npy", "--check", "missing.npy"], 2, "expected 'missing.npy': no such file"),
    (["run", "bit_not", "good.npy", "--check", "[1, 2.5]"], 2, "expected (inline JSON): data[1] = 2.5 is not an integer"),
    (["validate", "bit_not", "bad.npy"], 2, "input 1 'bad.npy': is not a .npy file"),
    (["validate", "bit_xor", "good.npy"], 2, "BIT_XOR takes 2 input tensors"),
    (["validate", "bit_not", "[1.5]", "--dtype", "float32", "-f", "3_0"], 3, "is not supported at DML_FEATURE_LEVEL_3_0"),
    (["describe", "bit_nope"], 2, "unknown operator 'bit_nope'"),
])
def test_other_commands_fail_cleanly(workdir, args, code, message):
    _garbage(workdir / "bad.npy")
    before = snapshot(workdir)
    assert_clean_failure(invoke(*args), code, message)
    assert snapshot(workdir) == before


def test_closed_stdout_pipe_ends_quietly(workdir):
    """`dmlcli run ... | head`: when the reader goes away, exit 141 with nothing on stderr."""
    np.save(workdir / "many.npy", np.arange(200_000, dtype=np.uint32))
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DMLCLI_DEBUG", None)
    process = subprocess.Popen([sys.executable, "-m", "dmlcli", "run", "bit_not", "many.npy", "-o", "-"], cwd=workdir,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # before dmlcli writes: some systems' pipes would hold all of its output
    assert process.wait(timeout=60) == 141
    assert process.stderr.read() == b""
