"""What a one-operator run imports (issues 21 and 23): pinned by the modules loaded, never by a timing.

Each run happens in a fresh interpreter (a subprocess), which lists sys.modules once the command has finished.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path, PurePosixPath

import numpy as np
import pytest

from dmlcli.operators.table import index

REPO = Path(__file__).resolve().parents[1]

# Loaded by none of the runs below: the suite, dispatch, streaming and Dask machinery, the other commands, the
# writers of files and archives, the terminal renderer and the stdlib modules only they need.
NEVER = {
    "rich", "multiprocessing", "zipfile", "tempfile", "shutil", "pathlib", "difflib", "signal", "dask", "zarr",
    "flatbuffers", "ml_dtypes",  # ml_dtypes: only a run that meets a 4-bit tensor (data_types.four_bit_dtype)
    "dmlcli.engine.streaming", "dmlcli.engine.streaming_shaped", "dmlcli.dispatch", "dmlcli.suite",
    "dmlcli.distributed", "dmlcli.checking", "dmlcli.display.rendering", "dmlcli.cli.reports", "dmlcli.api",
    "dmlcli.cli.catalog", "dmlcli.cli.suite", "dmlcli.cli.inspect",
    "dmlcli.io.outputs", "dmlcli.io.formats", "dmlcli.io.zarr_store", "dmlcli.io.strided",
    "dmlcli.backends.gpu", "dmlcli.backends.gpu_kernels",
}


def modules_after(*arguments: str) -> tuple[set[str], str]:
    """(sys.modules after `dmlcli ARGUMENTS` in a new interpreter, its stdout)."""
    return _after(*arguments)[:2]


def _after(*arguments: str) -> tuple[set[str], str, int]:
    """(sys.modules after `dmlcli ARGUMENTS` in a new interpreter, its stdout, gc.get_freeze_count() then)."""
    code = ("import gc, json, sys\nfrom dmlcli.cli import main\n"
            "try:\n    main(sys.argv[2:])\nexcept SystemExit:\n    pass\n"
            "sys.stdout.flush()\n"
            "with open(sys.argv[1], 'w') as handle:\n"
            "    json.dump({'modules': sorted(sys.modules), 'frozen': gc.get_freeze_count()}, handle)\n")
    listing = REPO / "tests" / f".modules-{os.getpid()}.json"
    # The default configuration: the compiled loops (DMLCLI_COMPILED_LOOPS) import Numba by design.
    environment = {**os.environ, "PYTHONPATH": str(REPO), "DMLCLI_COMPILED_LOOPS": "0"}
    try:
        result = subprocess.run([sys.executable, "-c", code, str(listing), *arguments], capture_output=True,
                                text=True, env=environment, check=True)
        found = json.loads(listing.read_text())
    finally:
        listing.unlink(missing_ok=True)
    return set(found["modules"]), result.stdout, found["frozen"]


@functools.lru_cache(maxsize=None)
def at_interpreter_start() -> frozenset[str]:
    """What the interpreter has loaded before dmlcli runs (an editable install's finder loads pathlib)."""
    code = "import json, sys; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    return frozenset(json.loads(result.stdout))


def top_level_and_packages(loaded: set[str]) -> set[str]:
    """Each module dmlcli's run loaded and every package above it (dmlcli.dispatch.run counts as dmlcli.dispatch
    too); what the interpreter had loaded before it ran is left out."""
    added = loaded - at_interpreter_start()
    return {".".join(name.split(".")[:depth]) for name in added for depth in range(1, name.count(".") + 2)}


def families_loaded(loaded: set[str]) -> set[str]:
    families = {module for _, modules in index.FAMILY_MODULES for module in modules}
    return {name.removeprefix("dmlcli.operators.") for name in loaded if name.startswith("dmlcli.operators.")} & families


def test_the_goal_run_loads_one_family_module_and_nothing_it_does_not_use():
    loaded, stdout = modules_after("run", "bit_xor", "[1,2]", "[3,4]", "--dtype", "uint8", "-o", "-")
    assert json.loads(stdout) == {"dtype": "uint8", "shape": [2], "data": [2, 6]}
    assert families_loaded(loaded) == {"elementwise.bitwise"}
    assert not NEVER & top_level_and_packages(loaded), sorted(NEVER & top_level_and_packages(loaded))
    # BIT_XOR has no parameters: the parameter kinds' classes are not made; nor is a shape rule's query.
    assert "dmlcli.operators.table.parameters" not in loaded
    assert "dmlcli.operators.table.shaped" not in loaded
    # The records a run makes are plain classes (records.py): creating dataclasses cost ~7 ms of it (issue 23).
    # Integers in range are read without decimal (0.8 ms), which float values and huge integers load (scalars.py).
    assert "dataclasses" not in loaded and "decimal" not in loaded
    assert "dmlcli.cli.commands" in loaded  # the command itself, found through COMMAND_MODULES


def test_the_table_on_a_pipe_and_json_on_stdout_load_no_more():
    for arguments in (("run", "bit_xor", "[[0,128],[42,255]]", "[[255,255],[1,1]]", "--dtype", "uint8"),
                      ("run", "bit_xor", "[0,128]", "[255,1]", "--dtype", "uint8", "--format", "json")):
        loaded, stdout = modules_after(*arguments)
        assert stdout.strip()
        assert families_loaded(loaded) == {"elementwise.bitwise"}
        forbidden = (NEVER - {"dmlcli.display.rendering"} | {"dataclasses", "decimal"}) & top_level_and_packages(loaded)
        assert not forbidden, (arguments, sorted(forbidden))


def test_a_run_with_parameters_loads_its_family_and_the_parameter_kinds():
    loaded, stdout = modules_after("run", "is_infinity", '[1, "inf", "-inf"]', "--dtype", "float32",
                                   "--infinity-mode", "positive", "-o", "-")
    assert json.loads(stdout)["data"] == [False, True, False]
    assert families_loaded(loaded) == {"elementwise.comparison"}
    assert "dmlcli.operators.table.parameters" in loaded
    assert not NEVER & top_level_and_packages(loaded)
    assert "dataclasses" not in loaded


# Operators with parameters of each kind a family module adds (movement's, indexing's, resampling's), a shape rule's
# query (shaped.py), a hook (quantization's, on an operator without parameters) and a fused activation made with
# records.replace (matmul's).
WITH_PARAMETERS = {
    "clip": (("clip", "[1,2,3]", "--dtype", "float32", "--min", "0", "--max", "2"), [1.0, 2.0, 2.0]),
    "reduce": (("reduce", "[[1,2],[3,4]]", "--dtype", "float32", "--function", "sum", "--axes", "1"), [[3.0], [7.0]]),
    "slice": (("slice", "[1,2,3,4]", "--dtype", "uint8", "--offsets", "1", "--sizes", "2", "--strides", "1"), [2, 3]),
    "gather_nd": (("gather_nd", '{"dtype": "uint8", "data": [[1,2],[3,4]]}', '{"dtype": "uint32", "data": [[1,0]]}'),
                  [[3]]),
    "upsample_2d": (("upsample_2d", "[[[[1,2]]]]", "--dtype", "float32", "--scale-size", "1,2"),
                    [[[[1.0, 1.0, 2.0, 2.0]]]]),
    "dequantize_linear": (("dequantize_linear", '{"dtype": "uint8", "data": [4]}', '{"dtype": "float32", "data": [0.5]}',
                           '{"dtype": "uint8", "data": [2]}'), [1.0]),
    "gemm": (("gemm", "[[[[1,-2]]]]", "[[[[1],[1]]]]", "--dtype", "float32", "--fused-activation", "relu"), [[[[0.0]]]]),
}


@pytest.mark.parametrize("name", sorted(WITH_PARAMETERS))
def test_a_run_with_parameters_makes_no_dataclass(name):
    arguments, expected = WITH_PARAMETERS[name]
    loaded, stdout = modules_after("run", *arguments, "-o", "-")
    assert json.loads(stdout)["data"] == expected
    # DEQUANTIZE_LINEAR has no parameters, but a hook (UndefinedScaleCheck) that was a dataclass.
    assert ("dmlcli.operators.table.parameters" in loaded) == (name != "dequantize_linear")
    # Creating the parameter kinds as dataclasses was about 8 ms of such a run (issue 23): records.Frozen instead.
    assert "dataclasses" not in loaded
    assert not NEVER & top_level_and_packages(loaded), sorted(NEVER & top_level_and_packages(loaded))


def test_a_file_output_still_writes_through_its_writer(tmp_path):
    target = tmp_path / "out.npy"
    loaded, _ = modules_after("run", "bit_xor", "[1,2]", "[3,4]", "--dtype", "uint8", "-o", str(target))
    assert np.load(target).tolist() == [2, 6]
    assert "tempfile" in loaded and "pathlib" in loaded  # loaded where they are needed


def test_command_modules_name_the_module_that_registers_each_command():
    from dmlcli.cli import app, catalog, commands, inspect, onnx, suite  # noqa: F401 - registers every command

    assert set(app.cli.commands) == set(app.COMMAND_MODULES)
    for name, module in app.COMMAND_MODULES.items():
        assert app.cli.commands[name].callback.__module__ == f"dmlcli.cli.{module}", name


def test_help_lists_every_command_without_importing_them_first():
    loaded, stdout = modules_after("--help")
    from dmlcli.cli import app

    section = stdout.split("Commands:\n")[1].split("\n\n")[0]
    listed = {line.split()[0] for line in section.splitlines() if not line.startswith("   ")}
    assert listed == set(app.COMMAND_MODULES)


def test_suffix_is_what_pathlib_says():
    from dmlcli.io.targets import suffix

    for length in range(7):
        for letters in itertools.product("a./nNy", repeat=length):
            name = "".join(letters)
            assert suffix(name) == PurePosixPath(name).suffix, repr(name)
    for name in ("x.tar.gz", "dir.d/file", "a.npy/", "./a.NPY", "..", ".npy", "a..", "-", "-.npy", "[1,2]"):
        assert suffix(name) == PurePosixPath(name).suffix, name


def test_a_verdict_finds_its_lowest_level_when_asked_and_stays_frozen():
    import dataclasses

    from dmlcli import validate
    from dmlcli.calls import validation

    verdict = validate("bit_shift_left", np.array([1], np.uint8), np.array([1], np.uint8))
    assert verdict._lowest is validation._NOT_YET  # a run never pays for it
    assert verdict.lowest_feature_level == validation.lowest_accepting_level(verdict.call)
    assert "lowest_feature_level=" in repr(verdict)
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.feature_level = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        del verdict.call


def test_a_small_call_reuses_a_recent_reading_of_memory_and_a_large_one_reads_again(monkeypatch):
    from dmlcli.io import room

    readings = []

    def reader():
        readings.append(1)
        return 1 << 30

    monkeypatch.setattr(room, "available_memory", reader)
    monkeypatch.setattr(room, "_last_reading", [])
    assert room._available_for(1 << 20) == 1 << 30 and len(readings) == 1
    assert room._available_for(1 << 20) == 1 << 30 and len(readings) == 1  # a sixteenth or less: reused
    assert room._available_for(1 << 27) == 1 << 30 and len(readings) == 2  # an eighth: read again
    monkeypatch.setattr(room, "available_memory", lambda: 4096)  # a replaced reader is always asked
    assert room._available_for(1) == 4096
    monkeypatch.setattr(room, "_last_reading", [reader, 1 << 30, room.time.monotonic() - 2 * room.RECENT_SECONDS])
    monkeypatch.setattr(room, "available_memory", reader)
    room._available_for(1)
    assert len(readings) == 3  # too old: read again


def test_short_options_reach_click_in_their_long_spelling_only_where_they_are_options():
    from dmlcli.cli.commands import run
    from dmlcli.cli.options import _long_spellings

    def respelled(*args):
        return _long_spellings(list(args), run.params)

    assert respelled("bit_xor", "[1]", "-o", "-", "-q", "-f", "4_1") == [
        "bit_xor", "[1]", "--output", "-", "--quiet", "--feature-level", "4_1"]
    assert respelled("bit_xor", "--dtype", "-o", "-o", "x.npy") == ["bit_xor", "--dtype", "-o", "--output", "x.npy"]
    assert respelled("bit_xor", "[1]", "-o") == ["bit_xor", "[1]", "-o"]  # click's message names -o as typed
    assert respelled("bit_xor", "--", "-o", "x") == ["bit_xor", "--", "-o", "x"]
    assert respelled("bit_xor", "-qo", "-", "-o=x.npy") == ["bit_xor", "-qo", "-", "-o=x.npy"]


def test_main_leaves_what_start_up_made_out_of_the_collections_at_exit():
    loaded, stdout, frozen = _after("run", "bit_xor", "[1,2]", "[3,4]", "--dtype", "uint8", "-o", "-")
    assert json.loads(stdout)["data"] == [2, 6]
    assert frozen > 10_000  # NumPy's, click's and dmlcli's objects: no pass over them as the interpreter exits
    _, _, frozen_after_error = _after("run", "no_such_operator", "[1]", "--dtype", "uint8")
    assert frozen_after_error > 10_000  # whatever way the command ends


def test_records_are_frozen_picklable_and_replaced_through_their_checks():
    import pickle

    from dmlcli import records
    from dmlcli.data_types import UINT8
    from dmlcli.feature_levels import NEWEST, FeatureLevel
    from dmlcli.operators import find_operator

    bit_xor = find_operator("bit_xor")
    for record, field in ((bit_xor, "name"), (bit_xor.support[0], "level"), (UINT8, "bits"), (NEWEST, "minor")):
        with pytest.raises(dataclasses_frozen_error()):
            setattr(record, field, None)
        with pytest.raises(dataclasses_frozen_error()):
            delattr(record, field)
    assert pickle.loads(pickle.dumps(UINT8)) == UINT8 and hash(pickle.loads(pickle.dumps(UINT8))) == hash(UINT8)
    assert pickle.loads(pickle.dumps(NEWEST)) == NEWEST == FeatureLevel(6, 4)
    assert FeatureLevel(4, 1) < FeatureLevel(5, 0) and len({FeatureLevel(4, 1), FeatureLevel(4, 1)}) == 1
    assert repr(UINT8) == "DataType(name='UINT8', value=5, bits=8, numpy_name='uint8')"
    renamed = records.replace(bit_xor, summary="changed")
    assert renamed.summary == "changed" and renamed.formula == bit_xor.formula and bit_xor.summary != "changed"
    with pytest.raises(ValueError, match="same_data_type names NoSuchTensor"):  # the entry's self-checks run again
        records.replace(bit_xor, same_data_type=("NoSuchTensor",))
    with pytest.raises(TypeError, match="no field 'colour'"):
        records.replace(bit_xor, colour="blue")


def dataclasses_frozen_error():
    import dataclasses

    return dataclasses.FrozenInstanceError



def test_parameter_kinds_are_frozen_records_that_pickle_repr_and_replace_as_the_dataclasses_did():
    import dataclasses
    import pickle

    from dmlcli import records
    from dmlcli.operators import all_operators, find_operator
    from dmlcli.operators.matmul.entries import GEMM_FUSED_ACTIVATION
    from dmlcli.operators.table.parameters import CudaArgument, EnumParameter, FloatParameter

    made = [parameter for operator in all_operators() for parameter in operator.parameters]
    made += [hook for operator in all_operators() for hook in operator.hooks]
    assert not [type(record).__name__ for record in made if dataclasses.is_dataclass(record)]
    for record in {id(record): record for record in made}.values():
        if "activations" in vars(record):  # operator entries inside: whether those pickle is not the kinds' business
            record = records.replace(record, activations=())
        copy = pickle.loads(pickle.dumps(record))
        assert type(copy) is type(record) and list(vars(copy)) == list(vars(record)) and repr(copy) == repr(record)
        name = next(iter(vars(record)))
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(record, name)
    alpha = FloatParameter("Alpha", "a help", 0.5)  # positionally, in the dataclass's field order
    assert repr(alpha) == "FloatParameter(field='Alpha', help='a help', default_value=0.5)"
    assert alpha != FloatParameter(field="Alpha", help="a help", default_value=0.5)  # by identity, as eq=False did
    assert len({alpha, alpha}) == 1
    mode = EnumParameter(field="Mode", help="h", values=(("A", 0),), default_value="A")
    assert repr(mode) == "EnumParameter(field='Mode', help='h', enum_prefix='', values=(('A', 0),), default_value='A')"
    assert repr(CudaArgument("int", "Mode", 0)) == "CudaArgument(c_type='int', name='Mode', value=0)"
    fused = find_operator("add1").parameters[-1]
    assert "activations" not in repr(fused) and repr(fused).startswith("FusedActivationParameter(field='FusedActivation'")
    assert GEMM_FUSED_ACTIVATION.activations is fused.activations and GEMM_FUSED_ACTIVATION.help != fused.help
    assert records.replace(alpha, default_value=2.0).default == np.float32(2.0) and alpha.default == np.float32(0.5)


def test_an_operator_entry_pickles_after_its_options_were_read():
    """Dask's and the suite's worker processes receive entries by pickle: what cached_property derived (the
    read-only `options` view, which pickle cannot take) is left out and rebuilt on first use."""
    import pickle

    from dmlcli.operators import find_operator

    entry = find_operator("elu")
    assert "alpha" in entry.options  # cached now
    copy = pickle.loads(pickle.dumps(entry))
    assert "options" not in vars(copy)
    assert copy.name == entry.name  # parameters compare by identity: a copy's are equal by what they say
    assert {k: repr(v) for k, v in copy.options.items()} == {k: repr(v) for k, v in entry.options.items()}
