"""Issue 12, what users expect: integer literals in hex and binary, bare lists typed by the other input,
bare scalars, .npz inputs, byte-order marks, bool .npy files, other formats named, --backend in any case,
and ONNX operator names."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

import dmlcli
from dmlcli.cli import cli
from dmlcli.data_types import parse_data_type
from dmlcli.errors import InputError
from dmlcli.io.json_tensor import parse_json_tensor
from dmlcli.io.sources import read_tensor

INTEGER_TYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"]


def invoke(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input)


def one_error_line(result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dmlcli: error: ") and "Traceback" not in result.output
    return lines[0]


# ---------------------------------------------------------------- hex and binary literals


def _spell(value: int, base: str, upper: bool) -> str:
    digits = {"x": format(abs(value), "x"), "b": format(abs(value), "b"), "o": format(abs(value), "o")}[base]
    prefix = "0" + (base.upper() if upper else base)
    return ("-" if value < 0 else "") + prefix + (digits.upper() if upper else digits)


@given(st.sampled_from(INTEGER_TYPES).flatmap(lambda name: st.tuples(
    st.just(name), st.lists(st.integers(int(np.iinfo(name).min), int(np.iinfo(name).max)), min_size=1, max_size=8))),
    st.sampled_from("xbo"), st.booleans())
def test_integer_literals_read_back_exactly_for_every_integer_type(case, base, upper):
    name, values = case
    text = json.dumps({"dtype": name, "data": [_spell(v, base, upper) for v in values]})
    array = parse_json_tensor(text, where="t")
    assert array.dtype == np.dtype(name) and [int(v) for v in array] == values


@given(st.sampled_from(INTEGER_TYPES).flatmap(lambda name: st.tuples(st.just(name), st.one_of(
    st.integers(int(np.iinfo(name).max) + 1, 2 ** 70), st.integers(-(2 ** 70), int(np.iinfo(name).min) - 1)))),
    st.sampled_from("xb"))
def test_integer_literals_out_of_range_are_refused_as_decimals_are(case, base):
    name, value = case
    literal = _spell(value, base, False)
    info = np.iinfo(name)
    with pytest.raises(InputError) as error:
        parse_json_tensor(json.dumps([literal]), where="t", dtype=parse_data_type(name))
    def shown(text: str) -> str:  # long values are cut at 40 characters, decimals and literals alike
        return text if len(text) <= 40 else text[:40] + "..."

    wording = "is out of range for {} ({} to {})".format(name, info.min, info.max)
    assert str(error.value) == f"t: data[0] = {shown(json.dumps(literal))} {wording}"
    with pytest.raises(InputError) as decimal:
        parse_json_tensor(json.dumps([value]), where="t", dtype=parse_data_type(name))
    assert str(decimal.value) == f"t: data[0] = {shown(str(value))} {wording}"


def test_64_bit_extremes_are_exact():
    unsigned = parse_json_tensor('{"dtype": "uint64", "data": ["0xFFFFFFFFFFFFFFFF", "0x0"]}', where="t")
    assert unsigned.tolist() == [2 ** 64 - 1, 0]
    signed = parse_json_tensor('{"dtype": "int64", "data": ["-0x8000000000000000", "0x7fffffffffffffff"]}', where="t")
    assert signed.tolist() == [-2 ** 63, 2 ** 63 - 1]


def test_literals_work_inline_in_files_and_in_check(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('{"dtype": "uint8", "data": ["0x0f", "0b1"]}')
    result = invoke("run", "bit_xor", str(path), '["0xF0", "0b11"]', "--check", '["0xff", "0b10"]')
    assert result.exit_code == 0 and result.stdout.startswith("PASSED")
    failed = invoke("run", "bit_xor", str(path), '["0xF0", "0b11"]', "--check", '["0xff", "0b11"]')
    assert failed.exit_code == 1


def test_literals_are_refused_for_float_types_and_malformed_ones_named():
    line = one_error_line(invoke("run", "bit_not", '["0x10"]', "--dtype", "float32"), 2)
    assert 'data[0] = "0x10" is a hex, binary or octal integer literal, which only integer types take' in line
    assert "float32 needs a decimal number" in line
    line = one_error_line(invoke("run", "bit_not", '["0x1g"]', "--dtype", "uint8"), 2)
    assert 'data[0] = "0x1g" is not an integer, as uint8 needs (hex, binary and octal are written' in line
    line = one_error_line(invoke("run", "bit_not", '["12"]', "--dtype", "uint8"), 2)
    assert 'data[0] = "12" is not an integer, as uint8 needs' in line  # decimal text in quotes stays refused


# ---------------------------------------------------------------- bare lists and bare scalars


def test_a_bare_list_takes_the_type_of_the_other_input(tmp_path):
    np.save(tmp_path / "a.npy", np.array([1, 2], np.uint16))
    result = invoke("run", "bit_xor", str(tmp_path / "a.npy"), "[1, 3]", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dtype": "uint16", "shape": [2], "data": [0, 1]}
    first = invoke("run", "bit_xor", "[1, 3]", '{"dtype": "int8", "data": [1, -1]}', "--format", "json")
    assert json.loads(first.stdout) == {"dtype": "int8", "shape": [2], "data": [0, -4]}
    validated = invoke("validate", "bit_xor", str(tmp_path / "a.npy"), "[1, 3]")
    assert validated.exit_code == 0 and "UINT16" in validated.stdout


def test_when_the_borrowed_type_cannot_hold_the_list_the_message_names_it(tmp_path):
    np.save(tmp_path / "a.npy", np.array([1, 2], np.uint8))
    line = one_error_line(invoke("run", "bit_xor", str(tmp_path / "a.npy"), "[1, 300]"), 2)
    assert "data[1] = 300 is out of range for uint8" in line
    assert "the bare list took UINT8 from input 1; give --dtype" in line
    alone = one_error_line(invoke("run", "bit_xor", "[1]", "[2]"), 2)
    assert "needs its data type: give --dtype" in alone
    mixed = one_error_line(invoke("run", "if", '{"dtype": "uint8", "data": [1]}', '{"dtype": "float32", "data": [1]}',
                                  "[2]"), 2)
    assert "input 1 is UINT8, input 2 is FLOAT32" in mixed


@pytest.mark.parametrize("command", ["run", "validate"])
def test_a_bare_scalar_is_a_0d_tensor_and_the_message_says_to_write_a_list(command):
    line = one_error_line(invoke(command, "bit_not", "5", "--dtype", "uint8"), 3)
    assert "BIT_NOT: InputTensor is 0-D" in line and "write [5]" in line
    second = one_error_line(invoke(command, "bit_xor", "--dtype", "int8", "--", "[1]", "-7"), 3)
    assert "BTensor is 0-D" in second and "write [-7]" in second


def test_a_bare_scalar_as_the_expected_value_is_malformed_input():
    line = one_error_line(invoke("run", "bit_not", "[1]", "--dtype", "uint8", "--check", "254"), 2)
    assert "expected (inline JSON): 254 is a bare scalar" in line and "write [254]" in line


def test_literals_in_typed_parameters():
    result = invoke("run", "clip1", "[1, 200]", "--dtype", "uint8", "--min", "0x10", "--max", "0b11110000",
                    "--format", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["data"] == [16, 200]
    line = one_error_line(invoke("run", "identity", "[1]", "--dtype", "float32", "--scale", "0x10"), 2)
    assert "only integer types take" in line


# ---------------------------------------------------------------- .npz, BOM, bool, other formats


def test_npz_inputs_by_name_or_alone(tmp_path):
    np.savez(tmp_path / "one.npz", np.array([1, 2], np.uint8))
    np.savez_compressed(tmp_path / "two.npz", a=np.array([1, 2], np.uint8), b=np.array([1.5], np.float32))
    alone = invoke("run", "bit_not", str(tmp_path / "one.npz"), "--format", "json")
    assert json.loads(alone.stdout)["data"] == [254, 253]
    named = invoke("run", "bit_not", f"{tmp_path / 'two.npz'}:a", "--format", "json")
    assert json.loads(named.stdout)["data"] == [254, 253]
    line = one_error_line(invoke("run", "bit_not", str(tmp_path / "two.npz")), 2)
    assert "holds 2 arrays (a, b); pick one as" in line and "two.npz:NAME" in line
    line = one_error_line(invoke("run", "bit_not", f"{tmp_path / 'two.npz'}:c"), 2)
    assert "has no array named 'c' (it holds a, b)" in line
    checked = invoke("run", "bit_not", f"{tmp_path / 'two.npz'}:a", "--check", str(tmp_path / "one.npz"))
    assert checked.exit_code == 1  # [254, 253] against [1, 2]


def npy_header_bytes(shape, descr: str) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def test_validate_reads_only_the_npz_member_header_and_the_zip_directory(tmp_path):
    # A member whose data are corrupt (a flipped byte: its CRC-32 is wrong): validate never reads them; run does.
    header = npy_header_bytes((1000,), "<f4")
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as archive:  # stored: the data lie in the file as they are
        archive.writestr("x.npy", header + b"\1" * 4000)
    raw = bytearray((tmp_path / "bad.npz").read_bytes())
    raw[raw.index(b"\1" * 4000) + 2000] = 2
    (tmp_path / "bad.npz").write_bytes(bytes(raw))
    validated = invoke("validate", "bit_not", str(tmp_path / "bad.npz"))
    assert validated.exit_code == 0 and "FLOAT32 [1000]" in validated.stdout
    for output in ([], ["-o", str(tmp_path / "out.npy")]):
        line = one_error_line(invoke("run", "abs", str(tmp_path / "bad.npz"), *output), 2)
        assert "'x': cannot be read (Bad CRC-32 for file 'x.npy')" in line
    assert not (tmp_path / "out.npy").exists()
    # A header promising more than the zip directory lists: refused by both, before any data are inflated.
    with zipfile.ZipFile(tmp_path / "cut.npz", "w") as archive:
        archive.writestr("x.npy", header + b"\0" * 10)
    for command in ("validate", "run"):
        line = one_error_line(invoke(command, "bit_not", str(tmp_path / "cut.npz")), 2)
        assert ("array 'x': the header promises 1000 elements of float32 (4000 bytes) but the zip directory lists "
                "only 10 bytes of data for the member (truncated?)") in line


def test_a_npz_array_is_validated_and_room_checked_before_anything_is_inflated(tmp_path, monkeypatch):
    """Issue 22, item 1: the call is checked from the member's header, and the memory for it, before its data
    are inflated, in memory (a table, JSON) and streamed (a .npy output) alike."""
    from dmlcli.io import formats, room

    def never(*args, **kwargs):
        raise AssertionError("a .npz member was inflated before the call was checked")

    monkeypatch.setattr(formats, "read_member_into", never)
    np.savez_compressed(tmp_path / "u8.npz", np.ones(1000, np.uint8))  # ABS takes signed and float types
    for output in ([], ["-o", str(tmp_path / "out.json")], ["-o", str(tmp_path / "out.npy")]):
        assert "ABS: InputTensor data type UINT8" in one_error_line(invoke("run", "abs", str(tmp_path / "u8.npz"),
                                                                           *output), 3)
    # 2^32 elements whose zip directory agrees (faked here: such a file is gigabytes): DirectML's limit, exit 3.
    monkeypatch.setattr(formats, "_check_member_size", lambda found, listed: None)
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as archive:
        archive.writestr("x.npy", npy_header_bytes((2**32,), "|u1"))
    for output in ([], ["-o", str(tmp_path / "out.npy")]):
        line = one_error_line(invoke("run", "bit_not", str(tmp_path / "huge.npz"), *output), 3)
        assert "holds at most 4294967295 (2^32-1)" in line
    np.savez_compressed(tmp_path / "u.npz", np.ones(1000, np.uint8))
    monkeypatch.setattr(room, "available_memory", lambda: 500)
    line = one_error_line(invoke("run", "bit_not", str(tmp_path / "u.npz")), 2)
    assert "of memory" in line and "nothing was run" in line
    assert not any(tmp_path.glob("out.*"))


def test_npz_arrays_stream_in_order_or_held_whole(tmp_path, monkeypatch):
    """A .npz array with a .npy output: read chunk by chunk where the boxes take it in order, else held
    whole (broadcast, Fortran order, big-endian too); the results are NumPy's, chunk size aside."""
    monkeypatch.setenv("DMLCLI_CHUNK_BYTES", "4K")
    a = (np.arange(300 * 100) % 251).astype(np.uint8).reshape(300, 100)
    np.savez_compressed(tmp_path / "c.npz", a=a, row=a[:1], f=np.asfortranarray(a), big=a.astype(">u2"))
    out = tmp_path / "out.npy"
    cases = {("c.npz:a",): ~a, ("c.npz:big",): ~a.astype(np.uint16), ("c.npz:f",): ~a,
             ("c.npz:a", "c.npz:row"): a ^ a[:1], ("c.npz:f", "c.npz:a"): a ^ a, ("c.npz:row", "c.npz:a"): a[:1] ^ a}
    for sources, expected in cases.items():
        operator = "bit_not" if len(sources) == 1 else "bit_xor"
        result = invoke("run", operator, *[str(tmp_path / s) for s in sources], "--broadcast", "-o", str(out))
        assert result.exit_code == 0, result.output
        np.testing.assert_array_equal(np.load(out), expected)
        assert np.load(out).dtype.isnative


def test_json_with_a_utf8_byte_order_mark_reads_in_files_and_on_stdin(tmp_path):
    text = '\ufeff{"dtype": "uint8", "data": [1]}'
    (tmp_path / "bom.json").write_bytes(text.encode("utf-8"))
    from_file = invoke("run", "bit_not", str(tmp_path / "bom.json"), "--format", "json")
    assert from_file.exit_code == 0 and json.loads(from_file.stdout)["data"] == [254]
    from_stdin = invoke("run", "bit_not", "-", "--format", "json", input=text.encode("utf-8"))
    assert from_stdin.exit_code == 0 and json.loads(from_stdin.stdout)["data"] == [254]


def test_a_bool_npy_is_refused_with_the_conversion(tmp_path):
    np.save(tmp_path / "mask.npy", np.array([True, False]))
    for command in ("run", "validate"):
        line = one_error_line(invoke(command, "logical_not", str(tmp_path / "mask.npy")), 2)
        assert "holds bool values" in line and "numpy.load(p).astype(numpy.uint8)" in line
    np.savez(tmp_path / "mask.npz", np.array([True]))
    assert "holds bool values" in one_error_line(invoke("run", "logical_not", str(tmp_path / "mask.npz")), 2)


MAGICS = {
    "gzip": (b"\x1f\x8b\x08\x00\x00\x00\x00\x00", "a gzip-compressed file"),
    "hdf5": (b"\x89HDF\r\n\x1a\n\x00\x00", "an HDF5 file"),
    "png": (b"\x89PNG\r\n\x1a\n\x00\x00", "a PNG image"),
    "elf": (b"\x7fELF\x02\x01\x01\x00", "an ELF executable"),
    "pe": (b"MZ\x90\x00\x03\x00\x00\x00", "a Windows executable"),
    "zip": (b"PK\x03\x04\x14\x00\x00\x00", "a zip archive"),
    "utf16": ('["1"]'.encode("utf-16"), "UTF-16 text"),
}


@pytest.mark.parametrize("suffix", [".json", ".npy", ".dat"])
@pytest.mark.parametrize("kind", sorted(MAGICS))
def test_other_formats_are_named(tmp_path, kind, suffix):
    content, name = MAGICS[kind]
    path = tmp_path / f"input{suffix}"
    path.write_bytes(content + b"\x00\xff" * 8)
    line = one_error_line(invoke("run", "bit_not", str(path), "--dtype", "uint8"), 2)
    assert name in line and "not a .npy or JSON tensor" in line


def test_a_zarr_folder_is_named(tmp_path):
    store = tmp_path / "t.zarr"
    store.mkdir()
    (store / ".zarray").write_text("{}")
    # Zarr folders are inputs now (the [dask] extra, which the tests install): this one's metadata is empty.
    line = one_error_line(invoke("run", "bit_not", str(store)), 2)
    assert "t.zarr': malformed Zarr metadata" in line


def test_stdin_of_another_format_is_named():
    line = one_error_line(invoke("run", "bit_not", "-", input=MAGICS["gzip"][0]), 2)
    assert "input 1 (stdin): is a gzip-compressed file, not a .npy or JSON tensor" in line


def test_read_tensor_still_reads_text_stdin():
    import io

    assert read_tensor("-", label="x", stdin=io.StringIO('{"dtype": "int8", "data": [-1]}')).tolist() == [-1]


# ---------------------------------------------------------------- --backend and ONNX names


@pytest.mark.parametrize("spelling", ["CPU", "Cpu", "cpu"])
def test_backend_in_any_case(spelling):
    result = invoke("run", "bit_not", "[1]", "--dtype", "uint8", "--backend", spelling, "--format", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["data"] == [254]


@pytest.mark.parametrize("name", ["Add", "Abs", "Exp", "Log", "Pow", "Sqrt", "Relu", "Sigmoid", "Tanh", "Erf", "Sign",
                                  "Clip", "Max", "Min", "Ceil", "Floor", "Round", "Identity"])
def test_names_accepted_today_keep_their_meaning(name):
    assert dmlcli.operators.find_operator(name) is dmlcli.operators.find_operator(name.upper())
