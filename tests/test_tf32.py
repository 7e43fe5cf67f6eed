"""--allow-tf32 (issue 19): DirectML's DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION, from the command line,
the API, test suites and DxDispatch models to the backend, and the TF32-wide --check tolerance it brings.

These run on the CPU: a spy backend stands for the GPU's (it records what each shaped call was allowed). What
TF32 does to the GPU's numbers: tests/test_gpu_matmul.py.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli import engine, operators, records
from dmlcli.backends.cpu import CpuBackend
from dmlcli.backends.tf32 import Tf32Allowed, with_tf32
from dmlcli.checking.comparison import rule_for
from dmlcli.cli import cli
from dmlcli.dispatch import check, load_model
from dmlcli.dispatch.dispatchable import parse_execution_flags
from dmlcli.errors import InputError
from dmlcli.operators import find_operator
from dmlcli.operators.table.schema import TF32_WIDENING

F32, F16 = np.float32, np.float16
PRODUCTS = {"GEMM", "CONVOLUTION", "RNN", "GRU", "LSTM", "MULTIHEAD_ATTENTION", "MULTIHEAD_ATTENTION1"}


class SpyBackend(CpuBackend):
    """The CPU backend, recording each shaped call's operator and whether it was allowed TF32."""

    takes_allow_tf32 = True

    def __init__(self):
        self.calls = []

    def execute_shaped(self, operator, inputs, outputs, parameters, *, allow_tf32=False):
        self.calls.append((operator.name, allow_tf32))
        return super().execute_shaped(operator, inputs, outputs, parameters)


class PlainSpy(CpuBackend):
    """A backend of a caller's own that knows nothing of TF32: it is called as ever."""

    def __init__(self):
        self.calls = []

    def execute_shaped(self, operator, inputs, outputs, parameters):
        self.calls.append(operator.name)
        return super().execute_shaped(operator, inputs, outputs, parameters)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_plus_ulps(count: int) -> float:
    """1 + count FLOAT32 ULP, as a Python float (exact in JSON)."""
    return float(np.uint32(0x3F800000 + count).view(F32))


def literal(values, dtype="float32") -> str:
    array = np.asarray(values)
    return json.dumps({"dtype": dtype, "shape": list(array.shape), "data": array.reshape(-1).tolist()})


# ---------------------------------------------------------------- the table


def test_the_operators_whose_float32_work_is_matrix_products():
    assert {op.name for op in operators.OPERATORS if op.tf32_products} == PRODUCTS


def test_tf32_applies_to_float32_outputs_of_those_operators_only():
    gemm = find_operator("gemm")
    assert gemm.tf32_applies(np.dtype(F32)) and gemm.tf32_applies(dmlcli.data_types.from_numpy(np.dtype(F32)))
    assert not gemm.tf32_applies(np.dtype(F16))
    assert not find_operator("add").tf32_applies(np.dtype(F32))
    assert not find_operator("matrix_multiply_integer_to_float").tf32_applies(np.dtype(F32))  # float64 sums


def test_an_entry_with_tf32_products_needs_a_tolerance_and_an_array_kernel():
    with pytest.raises(ValueError, match="tf32_products"):
        records.replace(find_operator("add"), tf32_products=True)  # element-wise: no products to widen


# ---------------------------------------------------------------- the switch reaches the backend


@pytest.fixture
def spy(monkeypatch):
    backend = SpyBackend()
    monkeypatch.setattr(engine, "get_backend", lambda name: backend)
    return backend


@pytest.mark.parametrize("flag, allowed", [([], False), (["--allow-tf32"], True)])
def test_the_command_line_switch_reaches_the_backend(spy, flag, allowed):
    result = invoke("run", "gemm", "[[1, 2], [3, 4]]", "[[1, 0], [0, 1]]", "--dtype", "float32", "--backend", "gpu",
                    "-o", "-", *flag)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == [[1, 2], [3, 4]]
    assert spy.calls == [("GEMM", allowed)]


def test_the_api_keyword_reaches_the_backend():
    a, b = np.ones((3, 4), F32), np.ones((4, 2), F32)
    backend = SpyBackend()
    dmlcli.run("gemm", a, b, backend=backend, allow_tf32=True)
    dmlcli.run("gemm", a, b, backend=backend)
    assert backend.calls == [("GEMM", True), ("GEMM", False)]


def test_under_d3d_float_rules_the_permission_still_reaches_the_backend():
    backend = SpyBackend()
    dmlcli.run("gemm", np.ones((2, 2), F32), np.ones((2, 2), F32), backend=backend, allow_tf32=True, float_rules="d3d")
    assert backend.calls == [("GEMM", True)]


def test_a_backend_that_knows_nothing_of_tf32_is_called_as_ever():
    a, b = np.arange(12, dtype=F32).reshape(3, 4), np.arange(8, dtype=F32).reshape(4, 2)
    backend = PlainSpy()
    result = dmlcli.run("gemm", a, b, backend=backend, allow_tf32=True)
    assert backend.calls == ["GEMM"]
    assert np.array_equal(result, a @ b)


def test_the_wrapper_is_transparent_but_for_shaped_calls():
    inner = SpyBackend()
    assert with_tf32(inner, False) is inner
    wrapped = with_tf32(inner, True)
    assert isinstance(wrapped, Tf32Allowed) and wrapped.name == inner.name
    assert wrapped.execute_chunks == inner.execute_chunks  # element-wise streaming: the backend's own
    assert wrapped.describe() == dict(inner.describe(), allow_tf32=True)


@pytest.mark.parametrize("value", ["false", 1, None])
def test_the_api_keyword_is_a_bool(value):
    with pytest.raises(InputError, match="allow_tf32 must be True or False"):
        dmlcli.run("gemm", np.ones((2, 2), F32), np.ones((2, 2), F32), allow_tf32=value)


def test_the_cpu_result_does_not_change():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 33, 65)).astype(F32), rng.standard_normal((2, 65, 17)).astype(F32)
    assert np.array_equal(dmlcli.run("gemm", a, b, allow_tf32=True), dmlcli.run("gemm", a, b))


def test_validate_takes_no_allow_tf32():
    """It changes how a result is computed and checked, not whether DirectML accepts the call."""
    result = invoke("validate", "gemm", "[[1]]", "[[1]]", "--dtype", "float32", "--allow-tf32")
    assert result.exit_code == 2 and "--allow-tf32" in result.output


# ---------------------------------------------------------------- the tolerance


def _rule(op, arrays, allow_tf32, **params):
    call = dmlcli.validate(op, *arrays, allow_tf32=allow_tf32, **params).call
    return rule_for(call.operator, call.output.data_type.numpy_dtype, None, call.parameters, call)


@pytest.mark.parametrize("op, shapes, params", [
    ("gemm", [(3, 40), (40, 5)], {}),
    ("gemm", [(2, 3, 8, 40), (2, 3, 40, 5)], {"fused_activation": "elu"}),
    ("convolution", [(1, 2, 6, 6), (3, 2, 3, 3)], {}),
    ("rnn", [(1, 2, 3, 4), (1, 1, 5, 4), (1, 1, 5, 5)], {}),
])
def test_float32_results_of_product_operators_are_checked_within_2_to_the_13_times_the_rule(op, shapes, params):
    arrays = [np.ones(shape, F32) for shape in shapes]
    plain, tf32 = _rule(op, arrays, False, **params), _rule(op, arrays, True, **params)
    assert plain.kind == tf32.kind == "ulp"
    assert tf32.limit == plain.limit * TF32_WIDENING and tf32.floor == plain.floor * TF32_WIDENING
    assert "TF32" in tf32.source and "TF32" not in plain.source
    assert tf32.describe() != plain.describe()


@pytest.mark.parametrize("op, arrays", [
    ("gemm", [np.ones((3, 40), F16), np.ones((40, 5), F16)]),  # FLOAT16: products stay FLOAT32
    ("add", [np.ones(4, F32), np.ones(4, F32)]),  # no products
    ("matrix_multiply_integer_to_float", [np.ones((2, 3), np.int8), np.ones(1, F32), np.ones((3, 2), np.int8),
                                          np.ones(1, F32)]),
])
def test_other_results_keep_their_rule(op, arrays):
    plain, tf32 = _rule(op, arrays, False), _rule(op, arrays, True)
    assert (tf32.kind, tf32.limit, tf32.floor, tf32.source) == (plain.kind, plain.limit, plain.floor, plain.source)


def test_check_accepts_a_tf32_wide_difference_only_with_the_switch(tmp_path):
    """[[1]] x [[1]]: K = 1, so GEMM's rule is 2 ULP; 100 ULP off passes within 2 x 2^13 ULP."""
    expected = literal([[one_plus_ulps(100)]])
    args = ["run", "gemm", "[[1]]", "[[1]]", "--dtype", "float32", "--check", expected]
    plain = invoke(*args)
    assert plain.exit_code == 1 and plain.output.startswith("FAILED")
    report = tmp_path / "report.json"
    widened = invoke(*args, "--allow-tf32", "--report", report)
    assert widened.exit_code == 0 and widened.output.startswith("PASSED")
    tolerance = json.loads(report.read_text())["tolerance"]
    assert tolerance["limit"] == 2 * TF32_WIDENING and "TF32" in tolerance["source"]


def test_allow_tf32_on_an_operator_without_products_changes_nothing():
    near_miss = literal([one_plus_ulps(3)])
    for args in (["[1]", "[0]", "--dtype", "float32"], ["[1]", "[0]", "--dtype", "float32", "--check", near_miss]):
        plain, switched = invoke("run", "add", *args), invoke("run", "add", *args, "--allow-tf32")
        assert (switched.exit_code, switched.output) == (plain.exit_code, plain.output)
    assert plain.exit_code == 1  # 3 ULP: ADD's 1 ULP rule, not widened


# ---------------------------------------------------------------- describe


def test_describe_says_what_the_switch_does():
    gemm = invoke("describe", "gemm").output
    line = next(text for text in gemm.splitlines() if text.startswith("TF32: "))
    assert "TF32 tensor cores" in line and "8192 ULP" in line and "0.00781" in line
    add = next(text for text in invoke("describe", "add").output.splitlines() if text.startswith("TF32: "))
    assert "changes nothing for ADD" in add
    assert json.loads(invoke("describe", "lstm", "--format", "json").output)["tf32_products"] is True
    assert json.loads(invoke("describe", "add", "--format", "json").output)["tf32_products"] is False


# ---------------------------------------------------------------- test suites


def _case(path, **extra):
    document = {"op": "gemm", "inputs": [{"dtype": "float32", "shape": [1, 1], "data": [1]}] * 2,
                "expected": {"dtype": "float32", "shape": [1, 1], "data": [one_plus_ulps(100)]}, **extra}
    path.write_text(json.dumps(document))
    return path


def test_a_case_may_allow_tf32(tmp_path):
    assert dmlcli.run_case(_case(tmp_path / "plain.json")).verdict == "failed"
    assert dmlcli.run_case(_case(tmp_path / "tf32.json", allow_tf32=True)).verdict == "passed"
    assert dmlcli.run_case(_case(tmp_path / "plain.json"), allow_tf32=True).verdict == "passed"
    # The case's own setting wins over the run's.
    assert dmlcli.run_case(_case(tmp_path / "off.json", allow_tf32=False), allow_tf32=True).verdict == "failed"
    bad = dmlcli.run_case(_case(tmp_path / "bad.json", allow_tf32="yes"))
    assert bad.verdict == "error" and '"allow_tf32" must be true or false' in bad.message


def test_dmlcli_test_allow_tf32(tmp_path):
    (tmp_path / "suite").mkdir()
    _case(tmp_path / "suite" / "gemm.json")
    report = tmp_path / "report.json"
    assert invoke("test", tmp_path / "suite", "-j", "1").exit_code == 1
    result = invoke("test", tmp_path / "suite", "-j", "1", "--allow-tf32", "--report", report)
    assert result.exit_code == 0, result.output
    assert json.loads(report.read_text())["settings"]["allow_tf32"] is True


def test_save_case_records_the_switch(tmp_path):
    case = tmp_path / "gemm.json"
    result = invoke("run", "gemm", "[[1, 2]]", "[[3], [4]]", "--dtype", "float32", "--allow-tf32", "--save-case", case)
    assert result.exit_code == 0, result.output
    assert json.loads(case.read_text())["allow_tf32"] is True
    assert dmlcli.run_case(case).verdict == "passed"


# ---------------------------------------------------------------- DxDispatch models


@pytest.mark.parametrize("value, allowed", [
    ("DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION", True),
    ("ALLOW_HALF_PRECISION_COMPUTATION", True),
    (["DESCRIPTORS_VOLATILE", "DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION"], True),
    ("NONE", False), ("DML_EXECUTION_FLAG_NONE", False), ([], False), (["DISABLE_META_COMMANDS"], False),
    ("DML_EXECUTION_FLAG_DESCRIPTORS_VOLATILE", False),
])
def test_execution_flags_as_dxdispatch_reads_them(value, allowed):
    assert ("ALLOW_HALF_PRECISION_COMPUTATION" in parse_execution_flags(value, "here")) == allowed


@pytest.mark.parametrize("value, words", [
    ("DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION", "unknown execution flag"),
    ("ALLOW_HALF_PRECISION_COMPUTATION|DESCRIPTORS_VOLATILE", "as an array, not joined by |"),
    (None, "unknown execution flag"), (4, "unknown execution flag"), (["NONE", 1], "unknown execution flag"),
])
def test_what_dxdispatch_refuses_is_refused(value, words):
    with pytest.raises(InputError, match="executionFlags") as error:
        parse_execution_flags(value, "dispatchable 'gemm': executionFlags")
    assert words in str(error.value)


def _gemm_model(tmp_path, flags) -> str:
    dispatchable = {"type": "DML_OPERATOR_GEMM", "desc": {
        "ATensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]}, "BTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]},
        "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]}, "TransA": "DML_MATRIX_TRANSFORM_NONE",
        "TransB": "DML_MATRIX_TRANSFORM_NONE", "Alpha": 1.0, "Beta": 1.0}}
    if flags is not None:
        dispatchable["executionFlags"] = flags
    model = {"resources": {name: {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2, 3, 4]}
                           for name in ("A", "B", "Out")},
             "dispatchables": {"gemm": dispatchable},
             "commands": [{"type": "dispatch", "dispatchable": "gemm",
                           "bindings": {"ATensor": "A", "BTensor": "B", "OutputTensor": "Out"}},
                          {"type": "print", "resource": "Out"}]}
    path = tmp_path / "gemm.json"
    path.write_text(json.dumps(model))
    return str(path)


@pytest.mark.parametrize("flags, allowed", [(None, False), ("NONE", False),
                                            ("DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION", True),
                                            (["ALLOW_HALF_PRECISION_COMPUTATION"], True)])
def test_a_model_with_the_flag_runs_with_tf32_allowed(tmp_path, flags, allowed):
    from dmlcli.dispatch import run_model

    model = load_model(_gemm_model(tmp_path, flags))
    (planned,) = check(model)
    assert planned.checked.verdict.call.allow_tf32 is allowed
    backend, lines = SpyBackend(), []
    run_model(model, backend=backend, emit=lines.append, timing=False)
    assert backend.calls == [("GEMM", allowed)]
    assert lines == ["Resource 'Out': 7, 10, 15, 22"]


def test_dxdispatchs_own_model_with_the_flag(shared_dir):
    (planned,) = check(load_model(shared_dir / "dxdispatch_models" / "dml_gemm_graph.json"))
    assert planned.checked.verdict.call.allow_tf32 is True


def test_a_misspelt_flag_is_refused_in_one_line(tmp_path):
    result = invoke("dispatch", _gemm_model(tmp_path, "DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION"))
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "dispatchable 'gemm'" in lines[0] and "executionFlags" in lines[0]
    assert "DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION" in lines[0]


# ---------------------------------------------------------------- the GPU backend's TF32 window, without a GPU


class FakeCublas:
    def __init__(self, mode: int):
        self.modes = {7: mode}

    def getMathMode(self, handle):  # noqa: N802 - CuPy's names
        return self.modes[handle]

    def setMathMode(self, handle, mode):  # noqa: N802
        self.modes[handle] = mode


def test_the_tf32_window_sets_cublas_math_mode_and_restores_it_even_on_error():
    from dmlcli.backends.gpu import tf32_products

    cupy = SimpleNamespace(cuda=SimpleNamespace(device=SimpleNamespace(get_cublas_handle=lambda: 7)))
    cublas = FakeCublas(mode=1)
    with tf32_products(cupy, cublas):
        assert cublas.modes[7] == 3  # CUBLAS_TF32_TENSOR_OP_MATH
    assert cublas.modes[7] == 1
    with pytest.raises(RuntimeError), tf32_products(cupy, cublas):
        raise RuntimeError("a kernel failed")
    assert cublas.modes[7] == 1
