"""Fuzzing the JSON and .npy readers: the only outcomes are a correct tensor or a clean DmlcliError.

Random bytes, random JSON values (objects with the tensor keys and without), random valid-looking
.npy headers with random data lengths; and valid tensors, which must read back exactly. DxDispatch
models too: random resources, sizes, paths, sequences and commands, run through the command line.
"""

import itertools
import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dmlcli.data_types import ALL11, FOUR_BIT, integer_limits, parse_data_type
from dmlcli.errors import DmlcliError
from dmlcli.io.json_tensor import parse_json_tensor, to_json_text
from dmlcli.io.npy import NPY_MAGIC, read_npy
from dmlcli.io.sources import read_tensor

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()


@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


def fresh_file(folder: Path, suffix: str, content: bytes) -> Path:
    # A new name each time: an earlier example's memory map must never see its file rewritten.
    path = folder / f"f{next(_counter)}{suffix}"
    path.write_bytes(content)
    return path


def read_or_refuse(read):
    """The reader's array, or None when it refused with a DmlcliError; any other exception fails the test."""
    try:
        array = read()
    except DmlcliError as error:
        assert str(error).strip() and "\n" not in str(error)
        return None
    assert isinstance(array, np.ndarray)
    return array


# ---------------------------------------------------------------- JSON

DTYPE_NAMES = [t.numpy_name for t in ALL11] + ["UINT8", "DML_TENSOR_DATA_TYPE_INT16", "bool", "uint4", "int4", "uint9",
                                              "object", "", "<u2", "U3", "complex64"]
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=5)
           | st.sampled_from(["inf", "-inf", "nan", "Infinity", "1e400", "-0"]))


def tensor_like(children):
    keys = st.sampled_from(["dtype", "shape", "data", "strides", "extra"])
    values = st.one_of(st.sampled_from(DTYPE_NAMES), st.lists(st.integers(-3, 6), max_size=4), children)
    return st.dictionaries(keys, values, max_size=4)


JSON_VALUES = st.recursive(SCALARS, lambda children: st.lists(children, max_size=5) | tensor_like(children),
                           max_leaves=30)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_as_json_text(raw):
    text = raw.decode("utf-8", errors="replace")
    read_or_refuse(lambda: parse_json_tensor(text, where="fuzz"))
    read_or_refuse(lambda: parse_json_tensor(text, where="fuzz", dtype=parse_data_type("int8")))


@FUZZ
@given(JSON_VALUES, st.sampled_from([None, "uint8", "int64", "float16", "float32"]))
def test_random_json_values(value, dtype):
    text = json.dumps(value)  # NaN and Infinity appear as the JSON tokens
    read_or_refuse(lambda: parse_json_tensor(text, where="fuzz", dtype=parse_data_type(dtype) if dtype else None))


@FUZZ
@given(st.binary(max_size=200), st.sampled_from([".json", ".npy", ""]))
def test_random_bytes_as_a_file(scratch, raw, suffix):
    path = fresh_file(scratch, suffix, raw)
    array = read_or_refuse(lambda: read_tensor(str(path), label="fuzz", dtype=parse_data_type("uint16")))
    del array


INTEGER_TYPES = [t for t in ALL11 if not t.is_float] + list(FOUR_BIT)


@st.composite
def valid_integer_tensors(draw):
    data_type = draw(st.sampled_from(INTEGER_TYPES))
    lowest, highest = integer_limits(data_type.numpy_dtype)
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    values = draw(st.lists(st.integers(lowest, highest), min_size=math.prod(shape), max_size=math.prod(shape)))
    return data_type, shape, values


@FUZZ
@given(valid_integer_tensors(), st.booleans())
def test_valid_integer_json_reads_exactly(tensor, flat):
    data_type, shape, values = tensor
    expected = np.array(values, dtype=object).reshape(shape)
    data = values if flat else expected.tolist()
    text = json.dumps({"dtype": data_type.numpy_name, "shape": list(shape), "data": data})
    array = parse_json_tensor(text, where="fuzz")
    assert array.dtype == data_type.numpy_dtype and array.shape == shape
    assert [int(v) for v in array.reshape(-1)] == values


@FUZZ
@given(st.sampled_from(["float16", "float32", "float64"]).flatmap(
    lambda name: hnp.arrays(name, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))))
def test_float_json_round_trips_bit_for_bit(array):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NaN payloads: "nan" keeps only the canonical NaN
        text = to_json_text(array)
    back = parse_json_tensor(text, where="fuzz")
    bits = f"uint{array.dtype.itemsize * 8}"
    nan = np.isnan(array)
    assert back.dtype == array.dtype and back.shape == array.shape
    assert np.array_equal(back.view(bits)[~nan], array.view(bits)[~nan])
    assert np.isnan(back[nan]).all()


@FUZZ
@given(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["float16", "float32"]))
def test_decimal_text_rounds_like_numpy(value, name):
    """A decimal number reads as its nearest value of the type (NumPy rounds once from the exact double)."""
    text = json.dumps({"dtype": name, "data": [value]})
    array = read_or_refuse(lambda: parse_json_tensor(text, where="fuzz"))
    with np.errstate(over="ignore"):
        nearest = np.array([value]).astype(name)
    if array is None:
        assert np.isinf(nearest).all()  # refused only when out of range
    else:
        assert array.view(f"uint{array.itemsize * 8}")[0] == nearest.view(f"uint{array.itemsize * 8}")[0]


# ---------------------------------------------------------------- .npy

DESCRS = ["|u1", "<u2", ">u2", "<i4", ">i8", "<f2", ">f4", "<f8", "|b1", "|i1", "<u8", "|O", "<U3", "|S2", "|V4",
          "<c8", "<M8[s]", "<q9", "[('a', '<i4')]", "(('x',), '<i2')", "'|u1'", "{}", "None",
          "int4", "uint4", "|V1", "<V1", "int44", "'int4'"]  # 4-bit: dmlcli's descr, numpy.save's, near misses
SHAPES = st.lists(st.integers(min_value=-2, max_value=6) | st.sampled_from([2**31, 2**63, 2**64, 10**30]),
                  max_size=4).map(tuple)


def npy_bytes(version: tuple[int, int], header_text: str, data: bytes) -> bytes:
    header = header_text.encode("latin1") if version == (1, 0) else header_text.encode("utf8")
    width = 2 if version == (1, 0) else 4
    pad = (-(len(NPY_MAGIC) + 2 + width + len(header) + 1)) % 64
    header = header + b" " * pad + b"\n"
    length = len(header).to_bytes(width, "little")
    return NPY_MAGIC + bytes(version) + length + header + data


@st.composite
def npy_files(draw):
    version = draw(st.sampled_from([(1, 0), (2, 0), (3, 0), (1, 0), (4, 0), (0, 9)]))
    descr = draw(st.sampled_from(DESCRS))
    fortran = draw(st.sampled_from(["False", "True", "0", "'yes'"]))
    shape = draw(SHAPES)
    descr_text = descr if descr.startswith(("[", "(", "{", "'", "N")) else repr(descr)
    header = "{" + f"'descr': {descr_text}, 'fortran_order': {fortran}, 'shape': {shape!r}, " + "}"
    if draw(st.booleans()):
        header = draw(st.sampled_from([header.replace("'shape'", "'shapes'"), header[:-3], header + "}",
                                       "((((((((((" * 50, "{'descr': '<u1'}", header.replace(", }", ", 'x': 1, }")]))
    data_length = draw(st.sampled_from([0, 1, 3, 8, 17, 64, 100]))
    data = draw(st.binary(min_size=data_length, max_size=data_length))
    return npy_bytes(version, header, data)


def numpy_reading(path: Path):
    """np.load's own reading (never unpickling), or None if NumPy refuses too."""
    try:
        return np.load(path, allow_pickle=False)
    except Exception:  # noqa: BLE001 - any refusal by NumPy is fine here
        return None


def same_bits(ours: np.ndarray, theirs: np.ndarray) -> bool:
    if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
        return False
    return np.ascontiguousarray(ours).tobytes() == np.ascontiguousarray(theirs).tobytes()


@FUZZ
@given(npy_files())
def test_valid_looking_npy_headers(scratch, content):
    path = fresh_file(scratch, ".npy", content)
    array = read_or_refuse(lambda: read_npy(path, where="fuzz"))
    if array is not None:
        expected = numpy_reading(path)
        assert expected is not None, "dmlcli read a file NumPy itself refuses"
        assert same_bits(array, expected)
        del array


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_after_the_magic(scratch, tail):
    path = fresh_file(scratch, ".npy", NPY_MAGIC + tail)
    array = read_or_refuse(lambda: read_npy(path, where="fuzz"))
    if array is not None:
        assert same_bits(array, numpy_reading(path))
        del array


@FUZZ
@given(st.sampled_from([t.numpy_dtype for t in ALL11]).flatmap(
    lambda dtype: hnp.arrays(st.sampled_from([dtype, dtype.newbyteorder(">")]),
                             hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))),
       st.booleans(), st.integers(min_value=0, max_value=3))
def test_files_numpy_writes_read_back_exactly(scratch, array, fortran, cut):
    """Every file np.save writes reads back bit for bit; cut short by `cut` bytes, it is refused."""
    if fortran:
        array = np.asfortranarray(array)
    path = scratch / f"f{next(_counter)}.npy"
    np.save(path, array)
    if cut and array.nbytes:
        os.truncate(path, path.stat().st_size - cut)
        assert read_or_refuse(lambda: read_npy(path, where="fuzz")) is None
        return
    back = read_npy(path, where="fuzz")
    assert same_bits(back, array)
    del back


@FUZZ
@given(st.sampled_from(list(FOUR_BIT)).flatmap(
    lambda data_type: st.tuples(st.just(data_type), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
                                st.binary(min_size=125, max_size=125))), st.booleans(), st.integers(0, 2))
def test_4_bit_files_read_back_exactly_under_their_type(scratch, drawn, by_numpy, cut):
    """A 4-bit array, whatever its bytes' high halves: dmlcli's file (descr 'int4'/'uint4') reads back as it is;
    numpy.save's ('<V1') is refused without --dtype and read under it; cut short, either is refused."""
    from dmlcli.io.npy import save_npy

    data_type, shape, raw = drawn
    array = np.frombuffer(raw[:math.prod(shape)], dtype=data_type.numpy_dtype).reshape(shape)
    path = scratch / f"f{next(_counter)}.npy"
    if by_numpy:
        np.save(path, array)
    else:
        with open(path, "wb") as handle:
            save_npy(handle, array)
    if cut and array.size:
        os.truncate(path, path.stat().st_size - cut)
        assert read_or_refuse(lambda: read_tensor(str(path), label="fuzz", dtype=data_type)) is None
        return
    if by_numpy:
        assert read_or_refuse(lambda: read_tensor(str(path), label="fuzz")) is None
    back = read_tensor(str(path), label="fuzz", dtype=data_type)
    assert back.dtype == array.dtype and back.shape == array.shape
    assert back.astype(np.int8).tolist() == array.astype(np.int8).tolist()
    del back


# ---------------------------------------------------------------- DxDispatch models

MODEL_FUZZ = settings(max_examples=60 if os.environ.get("CI") else 150, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
MODEL_TYPES = ["UINT8"] * 8 + ["FLOAT32"] * 4 + ["INT16", "UINT32", "UINT64", "FLOAT16", "FLOAT32", "FLOAT64", "DML_TENSOR_DATA_TYPE_INT8",
               "UNKNOWN", "uint4", 7]
NUMBERS = (st.integers(-300, 300) | st.integers(min_value=-(2**70), max_value=2**70) | st.floats()
           | st.sampled_from(["nan", "inf", "-inf", "x", None, True, 2**64, -1, "{huge}", "{beyond}", [1]]))
COUNTS = st.integers(1, 40) | st.integers(1, 40) | st.sampled_from([0, 4294967295, 4294967296, -1, 2**64, 1.5, "4"])
SOURCES = ["data.bin"] * 4 + ["data.npy"] * 3 + ["bad.npy", "../elsewhere/secret.bin", "{root}/elsewhere/secret.bin", "/dev/zero",
           "pipe.bin", "link_out.bin", "missing.bin", "x" * 300, "a\0b.bin", "", "picture.png", "models_sub"]
TARGETS = ["a.npy", "b.bin", "sub/c.npy", "deep/er/d.dat"] * 3 + ["../elsewhere/e.bin", "{root}/elsewhere/f.npy", "link/g.bin",
           "../models/h.bin", "y" * 300, "a\0b.bin", "", "existing_dir", "i.png", ".", "sub/../../j.bin"]


def initial_values():
    return st.one_of(
        st.lists(st.integers(0, 255), min_size=4, max_size=12),
        st.lists(st.integers(0, 255), min_size=4, max_size=12),
        st.lists(NUMBERS, max_size=12),
        st.fixed_dictionaries({"valueCount": COUNTS, "value": NUMBERS}),
        st.fixed_dictionaries({"valueCount": COUNTS, "valueStart": NUMBERS, "valueDelta": NUMBERS}),
        st.fixed_dictionaries({"sourcePath": st.sampled_from(SOURCES)}),
        st.sampled_from(["deferred", 3, None, {}]),
    )


def resources():
    sizes = st.one_of(st.none(), st.none(), st.integers(0, 80), st.sampled_from([2**64 - 1, 2**50, -1, "12", "{huge}"]))
    resource = st.fixed_dictionaries({"initialValuesDataType": st.sampled_from(MODEL_TYPES),
                                      "initialValues": initial_values()},
                                     optional={"sizeInBytes": sizes, "initialValuesOffsetInBytes": st.integers(0, 8) | st.just(0)})
    return st.dictionaries(st.sampled_from(["A", "B", "Out"]), resource, min_size=1, max_size=3)


DISPATCHABLES = {
    "not": {"type": "DML_OPERATOR_ELEMENT_WISE_BIT_NOT", "desc": {"InputTensor": {"DataType": "UINT8", "Sizes": [4]},
                                                                   "OutputTensor": {"DataType": "UINT8", "Sizes": [4]}}},
    "add": {"type": "ELEMENT_WISE_ADD", "desc": {"ATensor": {"DataType": "FLOAT32", "Sizes": [2]},
                                                 "BTensor": {"DataType": "FLOAT32", "Sizes": [2], "Strides": [0]},
                                                 "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2]}}},
}


def commands():
    name = st.sampled_from(["A", "B", "Out", "Z"])
    binding = name | st.fixed_dictionaries({"name": name, "elementOffset": st.integers(0, 20)})
    dispatch = st.one_of(
        st.fixed_dictionaries({"type": st.just("dispatch"), "dispatchable": st.just("not"),
                               "bindings": st.fixed_dictionaries({"InputTensor": binding, "OutputTensor": binding})}),
        st.fixed_dictionaries({"type": st.just("dispatch"), "dispatchable": st.just("add"),
                               "bindings": st.fixed_dictionaries({"ATensor": binding, "BTensor": binding,
                                                                  "OutputTensor": binding})}))
    show = st.fixed_dictionaries({"type": st.just("print"), "resource": name}, optional={"verbose": st.booleans()})
    write = st.fixed_dictionaries({"type": st.just("writeFile"), "resource": name,
                                   "targetPath": st.sampled_from(TARGETS)},
                                  optional={"dimensions": st.lists(st.integers(0, 6), max_size=3)})
    return st.lists(dispatch | show | write, max_size=5)


@pytest.fixture(scope="module")
def model_root():
    """models/ (the model and its data), out/ (the current and output folder) and elsewhere/, fixed for all examples."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name in ("models/models_sub", "out/existing_dir", "elsewhere"):
            (root / name).mkdir(parents=True)
        (root / "models" / "data.bin").write_bytes(bytes(range(16)))
        np.save(root / "models" / "data.npy", np.arange(4, dtype=np.uint16))
        (root / "models" / "bad.npy").write_bytes(NPY_MAGIC + b"\x01\x00\x10\x00{'descr': f()}  \n")
        (root / "elsewhere" / "secret.bin").write_bytes(b"SECRET!!")
        (root / "models" / "link_out.bin").symlink_to(root / "elsewhere" / "secret.bin")
        (root / "out" / "link").symlink_to(root / "elsewhere")
        os.mkfifo(root / "models" / "pipe.bin")
        yield root


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` but out/ (which the model may write in), with its bytes (None: not a file)."""
    found = {}
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if relative.parts[0] == "out":
            continue
        if path.is_symlink() or path.is_fifo():
            found[str(relative)] = None
            continue
        found[str(relative)] = path.read_bytes() if path.is_file() else None
    return found


@MODEL_FUZZ
@given(resources(), commands(), st.booleans())
def test_random_models(model_root, monkeypatch, resource_map, command_list, dispatchables):
    """Whatever a model holds: exit 0, 2, 3 or 4, one line on stderr when it fails, never a traceback, and
    nothing written or created outside the output folder."""
    import dmlcli.dispatch.memory as memory
    from click.testing import CliRunner

    from dmlcli.cli import cli

    monkeypatch.setattr(memory, "available_memory", lambda: 1 << 20)  # 1 MiB: any large size must be refused
    text = json.dumps({"resources": resource_map, "dispatchables": DISPATCHABLES if dispatchables else {},
                       "commands": command_list}).replace("{root}", str(model_root))
    # Numbers json.dumps cannot write: 5000 digits (past Python's int-str limit), and beyond a double.
    text = text.replace('"{huge}"', "9" * 5000).replace('"{beyond}"', "-1e400")
    model = model_root / "models" / "model.json"
    model.write_text(text)
    before = tree(model_root)
    previous = os.getcwd()
    os.chdir(model_root / "out")  # the default output folder
    try:
        result = CliRunner().invoke(cli, ["dispatch", str(model), "--no-timing"])
    finally:
        os.chdir(previous)
    event(f"exit {result.exit_code}")
    assert result.exit_code in (0, 2, 3, 4), result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    if result.exit_code:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("dmlcli: error: "), result.stderr
        assert len(result.stderr) < 1000, result.stderr
    assert tree(model_root) == before


# ---------------------------------------------------------------- .npz (issue 22, item 4)

# Memory a refusal or a read of these small files may take: a header's claim (2^31 or 2^63 elements)
# must be refused from the header and the zip directory, never allocated or inflated.
SMALL_FILE_PEAK_BYTES = 8 << 20
MEMBER_NAMES = ["x.npy", "y.npy", "x", "dir/z.npy", "notes.txt"]


NPY_ARRAYS = st.sampled_from([t.numpy_dtype for t in ALL11]).flatmap(
    lambda dtype: hnp.arrays(st.sampled_from([dtype, dtype.newbyteorder(">")]),
                             hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)))


def npy_of(array: np.ndarray) -> bytes:
    """The bytes np.save writes (np.savez's members), C or Fortran order."""
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def zip_bytes(members: dict[str, bytes], compression: int) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


@st.composite
def npz_files(draw):
    """Zip archives of .npy members, valid-looking or not, then maybe one byte changed or the file cut short."""
    import zipfile

    member = npy_files() | st.binary(max_size=40) | NPY_ARRAYS.map(npy_of)
    members = draw(st.dictionaries(st.sampled_from(MEMBER_NAMES), member, max_size=3))
    raw = bytearray(zip_bytes(members, draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))))
    mutation = draw(st.sampled_from(["none", "none", "flip", "cut"]))
    if mutation == "flip" and raw:
        raw[draw(st.integers(0, len(raw) - 1))] ^= draw(st.integers(1, 255))
    elif mutation == "cut":
        raw = raw[:draw(st.integers(0, len(raw)))]
    return bytes(raw)


HANG_SECONDS = 30.0


def bounded(read):
    """read_or_refuse, within SMALL_FILE_PEAK_BYTES of traced memory (NumPy's allocations are traced too), and
    not hanging.

    HANG_SECONDS is a guard against a reader that never ends, not a speed test: a read of these few hundred
    bytes takes milliseconds, but under tracemalloc on a busy CI machine a header of hundreds of nested
    parentheses once took 1.1 s on its first call (and 0.01 s on the next), so a tight bound only measured
    the machine."""
    import time
    import tracemalloc

    tracemalloc.start()
    started = time.perf_counter()
    try:
        array = read_or_refuse(read)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < SMALL_FILE_PEAK_BYTES, peak
    assert time.perf_counter() - started < HANG_SECONDS
    return array


def numpy_npz_member(path: Path, name: str) -> np.ndarray:
    """The member as np.load's NpzFile reads it: `name` looked up as it does, read by format.read_array.

    (np.load itself first sniffs the file's first bytes, and takes a zip whose first local header is
    damaged for a pickle; zipfile, which reads the directory at the end, reads its other members.)
    """
    import zipfile

    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        lookup = dict(zip([n.removesuffix(".npy") for n in names], names))
        lookup.update(zip(names, names))
        with archive.open(lookup[name] if name else names[0]) as handle:
            return np.lib.format.read_array(handle, allow_pickle=False)


@FUZZ
@given(npz_files(), st.sampled_from(["", ":x", ":y", ":dir/z"]))
def test_npz_archives_read_or_refuse_in_bounded_memory(scratch, content, name):
    """Whole reads (read_npz) and the streaming path's header checks (open_input) alike."""
    from dmlcli.engine import streaming

    path = fresh_file(scratch, ".npz", content)
    array = bounded(lambda: read_tensor(f"{path}{name}", label="fuzz"))
    event("read" if array is not None else "refused")
    if array is not None:
        assert same_bits(array, numpy_npz_member(path, name[1:]))  # NumPy agrees, bit for bit
    opened = bounded(lambda: (streaming.open_input(f"{path}{name}", label="fuzz"), np.empty(0))[1])
    if array is not None:
        assert opened is not None  # what reads whole also opens for streaming


def test_npz_fuzz_strategy_reaches_valid_and_corrupt_archives(scratch):
    """The strategy above is not all refusals: valid members read, and a flipped byte can be caught by CRC."""
    path = fresh_file(scratch, ".npz", b"")
    np.savez_compressed(path, x=np.arange(5, dtype=np.int16))
    assert same_bits(read_tensor(f"{path}:x", label="fuzz"), np.arange(5, dtype=np.int16))


# ---------------------------------------------------------------- stdin (issue 22, item 4)


class _Stdin:
    """sys.stdin as the command line sees it: text, with the bytes under .buffer."""

    def __init__(self, raw: bytes):
        import io

        self.buffer = io.BytesIO(raw)


@FUZZ
@given(st.one_of(st.binary(max_size=200), npy_files(), st.binary(max_size=100).map(lambda tail: NPY_MAGIC + tail),
                 st.binary(max_size=60).map(lambda tail: b"\xef\xbb\xbf" + tail)))
def test_random_bytes_on_stdin(raw):
    from dmlcli.io.sources import read_tensor_and_format

    bounded(lambda: read_tensor_and_format("-", label="fuzz", stdin=_Stdin(raw), dtype=parse_data_type("uint8"))[0])


# ---------------------------------------------------------------- the command line (issue 22, item 4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.one_of(npz_files().map(lambda raw: (".npz", raw)), npy_files().map(lambda raw: (".npy", raw)),
                 st.binary(max_size=100).map(lambda raw: (".json", raw))),
       st.sampled_from(["out.npy", "out.json", None]))
def test_random_input_files_through_run(tmp_path, file, target):
    """`run` on any input file: exit 0, 2 or 3; on failure one line on stderr and nothing written."""
    from click.testing import CliRunner

    from dmlcli.cli import cli

    folder = tmp_path / f"run{next(_counter)}"
    folder.mkdir()
    source = fresh_file(folder, file[0], file[1])
    output = ["-o", str(folder / target)] if target else []
    result = CliRunner().invoke(cli, ["run", "bit_not", str(source), *output])
    event(f"exit {result.exit_code}")
    assert result.exit_code in (0, 2, 3), result.output
    if result.exit_code:
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("dmlcli: error: "), result.stderr
        assert sorted(p.name for p in folder.iterdir()) == [source.name]


# ---------------------------------------------------------------- Zarr metadata (issue 22, item 4)

METADATA_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.sampled_from([2**40, 2**64, -1]),
                            st.text(max_size=6), st.sampled_from(["uint8", "<u2", "|O", "bool", "int4", "blosc", "C"]),
                            st.lists(st.integers(-1, 5) | st.sampled_from([2**40]), max_size=3),
                            st.just({"name": "bytes"}), st.just([{"name": "gzip", "configuration": {"level": 99}}]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.sampled_from([2, 3]), st.dictionaries(st.text(min_size=1, max_size=12) | st.sampled_from(
    ["shape", "chunks", "dtype", "data_type", "fill_value", "codecs", "chunk_grid", "compressor", "order",
     "filters", "zarr_format", "node_type", "chunk_key_encoding", "dimension_separator"]), METADATA_VALUES, max_size=4),
       st.sampled_from(["replace", "replace", "drop", "only"]), st.just(b"") | st.binary(max_size=20))
def test_zarr_stores_with_random_metadata(tmp_path, zarr_format, changes, how, chunk):
    """A local Zarr array whose metadata were edited at random, and a random first chunk: it opens and reads
    (a corner of it), or is one clean DmlcliError; never a traceback, never memory the metadata claim."""
    zarr = pytest.importorskip("zarr", reason="the [dask] extra (zarr) is not installed")
    from dmlcli.io.zarr_store import ChunkReader, open_input

    store = tmp_path / f"s{next(_counter)}.zarr"
    zarr.create_array(store=str(store), shape=(4, 3), chunks=(2, 2), dtype="uint8", zarr_format=zarr_format)[...] = 7
    document = store / ("zarr.json" if zarr_format == 3 else ".zarray")
    metadata = json.loads(document.read_text())
    if how == "only":
        metadata = dict(changes)
    elif how == "drop":
        for key in changes:
            metadata.pop(key, None)
    else:
        metadata.update(changes)
    document.write_text(json.dumps(metadata))
    chunks = sorted(p for p in store.rglob("*") if p.is_file() and not p.name.startswith((".z", "zarr.")))
    chunk_file = chunks[0] if chunks else None
    if chunk_file is not None and chunk:
        chunk_file.write_bytes(chunk)

    def read_a_corner():
        array = open_input(str(store), label="fuzz")
        reader = ChunkReader(array, "fuzz")
        return np.asarray(reader[tuple(slice(0, min(2, size)) for size in reader.shape)])

    event(f"{'read' if bounded(read_a_corner) is not None else 'refused'}")
