"""A new operator is one table entry plus its kernel bodies, and every route runs it.

The script below defines a made-up operator (a unary float operator with a FLOAT parameter, an
enum parameter and a second input of another data type) in a family of its own, registers it,
and runs it through the command line, the Python API, a streamed .npy run and a DxDispatch model,
touching no other module. It runs in a subprocess so that the command line builds its options
from the extended table, as it would with a plug-in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import REPO

DEFINITION = textwrap.dedent('''
    import numpy as np

    from dmlcli.data_types import FLOATS, INT8, INT16
    from dmlcli.feature_levels import level
    from dmlcli.operators import register_family
    from dmlcli.operators.table.parameters import EnumParameter, FloatParameter
    from dmlcli.operators.table.schema import DIMS_1_TO_8, ONE_ROUNDING, Operator, Tolerance, rows


    def gained_clamp(inputs, out_dtype, params):
        x, limit = inputs
        gained = x.astype(np.float32) * params["Gain"]  # one float32 rounding
        bound = limit.astype(np.float32)
        out = np.maximum(gained, bound) if params["Side"] == "LOWER" else np.minimum(gained, bound)
        return out.astype(out_dtype)


    GAINED_CLAMP = Operator(
        name="TEST_GAINED_CLAMP", enum_value=100001, family="testing",
        summary="x * Gain, clamped from below (Side LOWER) or above (UPPER) by an integer LimitTensor.",
        formula="f(x, l) = Side == LOWER ? max(x * Gain, l) : min(x * Gain, l)",
        introduced=level("5_0"), inputs=("InputTensor", "LimitTensor"),
        support=rows(("5_0", DIMS_1_TO_8, {"InputTensor": FLOATS, "LimitTensor": (INT8, INT16),
                                           "OutputTensor": FLOATS})),
        same_data_type=("InputTensor", "OutputTensor"),
        same_sizes=("InputTensor", "LimitTensor", "OutputTensor"),
        parameters=(FloatParameter(field="Gain", help="the factor", default_value=1.0),
                    EnumParameter(field="Side", help="which side the limit bounds", enum_prefix="TEST_SIDE_",
                                  values=(("LOWER", 0), ("UPPER", 1)), default_value="LOWER")),
        cpu_kernel=gained_clamp,
        cuda_names=("x", "l"),
        cuda_body="Side == 0 ? (x * Gain > (float)l ? x * Gain : dml_f32{(float)l}) "
                  ": (x * Gain < (float)l ? x * Gain : dml_f32{(float)l})",
        exactness=ONE_ROUNDING,
        tolerance=Tolerance("ulp", 1, 1, "one float32 multiplication"),
    )
    register_family("testing", (GAINED_CLAMP,))
''')

X = [1.5, -2.0, 3.25, -0.5]
LIMIT = [2, -3, 10, 0]
# Gain 2, Side UPPER: min(2x, l) = min(3, 2), min(-4, -3), min(6.5, 10), min(-1, 0)
EXPECTED_UPPER = [2.0, -4.0, 6.5, -1.0]
# Gain 1 (default), Side LOWER (default): max(x, l)
EXPECTED_DEFAULTS = [2.0, -2.0, 10.0, 0.0]


def run_script(body: str, tmp_path, *arguments: str) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(DEFINITION + textwrap.dedent(body))
    return subprocess.run([sys.executable, str(script), *arguments], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "NO_COLOR": "1"})


@pytest.fixture
def inputs(tmp_path):
    np.save(tmp_path / "x.npy", np.array(X, np.float32))
    np.save(tmp_path / "limit.npy", np.array(LIMIT, np.int8))
    return tmp_path


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_a_made_up_operator_runs_through_every_route(inputs, backend):
    if backend == "gpu":
        pytest.importorskip("cupy")
    tmp_path = inputs
    body = '''
        import json, sys, warnings
        import dmlcli
        from dmlcli.cli import main
        from dmlcli.dispatch import load_model, run_model

        backend = sys.argv[1]
        x, limit = np.load("x.npy"), np.load("limit.npy")
        api = dmlcli.run("test_gained_clamp", x, limit, gain=2, side="upper", backend=backend)
        defaults = dmlcli.run("TEST_GAINED_CLAMP", x, limit, backend=backend)
        dmlcli.run_files("test_gained_clamp", ["x.npy", "limit.npy"], "streamed.npy", gain="2", side=1,
                         chunk_bytes=8, backend=backend)
        model = {"resources": {"X": {"initialValuesDataType": "FLOAT32", "initialValues": x.tolist()},
                               "L": {"initialValuesDataType": "INT8", "initialValues": limit.tolist()},
                               "Out": {"initialValuesDataType": "FLOAT32", "initialValues": [0, 0, 0, 0]}},
                 "dispatchables": {"op": {"type": "DML_OPERATOR_ELEMENT_WISE_TEST_GAINED_CLAMP", "desc": {
                     "InputTensor": {"DataType": "FLOAT32", "Sizes": [4]},
                     "LimitTensor": {"DataType": "INT8", "Sizes": [4]},
                     "OutputTensor": {"DataType": "FLOAT32", "Sizes": [4]},
                     "Gain": 2, "Side": "TEST_SIDE_UPPER"}}},
                 "commands": [{"type": "dispatch", "dispatchable": "op",
                               "bindings": {"InputTensor": "X", "LimitTensor": "L", "OutputTensor": "Out"}},
                              {"type": "writeFile", "targetPath": "dispatched.npy", "resource": "Out"}]}
        with open("model.json", "w") as handle:
            json.dump(model, handle)
        run_model(load_model("model.json"), backend=backend, emit=lambda line: None)
        print(json.dumps({"api": api.tolist(), "defaults": defaults.tolist(), "api_dtype": str(api.dtype),
                          "streamed": np.load("streamed.npy").tolist(),
                          "dispatched": np.load("dispatched.npy").tolist()}))
        sys.stdout.flush()
        main(["run", "test_gained_clamp", "x.npy", "limit.npy", "--gain", "2", "--side", "upper",
              "--backend", backend, "-o", "cli.npy"])
    '''
    result = run_script(body, tmp_path, backend)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.splitlines()[0])
    assert found["api"] == EXPECTED_UPPER and found["api_dtype"] == "float32"
    assert found["defaults"] == EXPECTED_DEFAULTS
    assert found["streamed"] == EXPECTED_UPPER
    assert found["dispatched"] == EXPECTED_UPPER
    assert np.load(tmp_path / "cli.npy").tolist() == EXPECTED_UPPER


def test_the_new_parameters_are_checked_and_described(inputs):
    tmp_path = inputs
    body = '''
        import sys
        from dmlcli.cli import main
        main(sys.argv[1:])
    '''
    described = run_script(body, tmp_path, "describe", "test_gained_clamp")
    assert described.returncode == 0, described.stderr
    assert "Parameter Gain (gain): the factor; default 1." in described.stdout
    assert "Parameter Side (side): which side the limit bounds; TEST_SIDE_LOWER = 0, TEST_SIDE_UPPER = 1" in described.stdout
    helped = run_script(body, tmp_path, "run", "test_gained_clamp", "--help")
    assert "--gain FLOAT" in helped.stdout and "--side MODE" in helped.stdout
    wrong = run_script(body, tmp_path, "run", "test_gained_clamp", "x.npy", "limit.npy", "--side", "middle")
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == "dmlcli: error: unknown Side 'middle' (expected one of lower, upper)"
    misplaced = run_script(body, tmp_path, "run", "bit_not", "limit.npy", "--gain", "3")
    assert misplaced.returncode == 2
    assert misplaced.stderr.strip().startswith("dmlcli: error: BIT_NOT has no gain parameter (it takes no parameters")
    old_level = run_script(body, tmp_path, "validate", "test_gained_clamp", "x.npy", "limit.npy", "-f", "4_1")
    assert old_level.returncode == 3
    assert "is not available at DML_FEATURE_LEVEL_4_1 (introduced in DML_FEATURE_LEVEL_5_0)" in old_level.stderr
    wrong_type = run_script(body, tmp_path, "validate", "test_gained_clamp", "x.npy", "x.npy")
    assert wrong_type.returncode == 3
    assert "LimitTensor data type FLOAT32 is not supported at DML_FEATURE_LEVEL_6_4 (allowed: INT8, INT16)" in wrong_type.stderr


def test_a_table_entry_that_contradicts_itself_fails_when_it_is_built():
    from dmlcli.data_types import UINT8
    from dmlcli.feature_levels import level
    from dmlcli.operators.table.parameters import EnumParameter
    from dmlcli.operators.table.schema import DIMS_1_TO_8, Operator, rows

    def entry(**changes):
        fields = dict(name="BROKEN", enum_value=1, family="testing", summary="", formula="", introduced=level("3_0"),
                      inputs=("InputTensor",),
                      support=rows(("3_0", DIMS_1_TO_8, {"InputTensor": (UINT8,), "OutputTensor": (UINT8,)})),
                      same_data_type=("InputTensor", "OutputTensor"), same_sizes=("InputTensor", "OutputTensor"),
                      cpu_kernel=lambda inputs, dtype, params: inputs[0], cuda_body="x")
        fields.update(changes)
        return Operator(**fields)

    entry()  # the baseline is sound
    with pytest.raises(ValueError, match="same_sizes names ATensor, which is not one of its tensors"):
        entry(same_sizes=("ATensor", "OutputTensor"))
    with pytest.raises(ValueError, match="the 3_0 support row covers"):
        entry(support=rows(("3_0", DIMS_1_TO_8, {"InputTensor": (UINT8,)})))
    with pytest.raises(ValueError, match="introduced at DML_FEATURE_LEVEL_2_0 but its oldest support row"):
        entry(introduced=level("2_0"))
    with pytest.raises(ValueError, match="default 'SIDEWAYS' is not one of its values"):
        entry(parameters=(EnumParameter(field="Mode", help="", enum_prefix="M_", values=(("A", 0),),
                                        default_value="SIDEWAYS"),))
    with pytest.raises(ValueError, match="is approximate, so its float results need a tolerance"):
        entry(exactness="approximate")
