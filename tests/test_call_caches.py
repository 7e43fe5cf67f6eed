"""The per-call caches (issue 23): a verdict is reused only for a call that would get the same one.

engine.plan keeps the verdicts of calls that passed validation, keyed by the request (operator, level, parameter
values with their types, output type and Sizes, float rules) and the inputs' data types and Sizes. These tests
check that no two calls that validate differently can share a key, that a call that fails is never kept, and
that the spelling and option look-ups kept for speed follow the table.
"""

import numpy as np
import pytest

import dmlcli
from dmlcli import engine
from dmlcli.errors import InputError, ValidationError

X = np.arange(8, dtype=np.float32).reshape(2, 4)


def test_a_repeated_call_reuses_its_verdict():
    first = dmlcli.validate("reduce", X, function="sum", axes=[1])
    assert dmlcli.validate("reduce", X, function="sum", axes=[1]) is first
    # Another Sizes, type, level or parameter value: a verdict of its own.
    assert dmlcli.validate("reduce", X.T.copy(), function="sum", axes=[1]) is not first
    assert dmlcli.validate("reduce", X.astype(np.float16), function="sum", axes=[1]) is not first
    assert dmlcli.validate("reduce", X, function="sum", axes=[1], feature_level="5_0") is not first
    assert dmlcli.validate("reduce", X, function="max", axes=[1]) is not first


@pytest.mark.parametrize("refused", [[1.0], [True], [np.float32(1)]])
def test_values_equal_in_python_but_read_differently_do_not_share_a_key(refused):
    """1 == 1.0 == True in Python (and they hash alike), but Axes takes whole numbers only."""
    assert dmlcli.run("reduce", X, function="sum", axes=[1]).ravel().tolist() == [6.0, 22.0]
    with pytest.raises(InputError, match="not a whole number"):
        dmlcli.run("reduce", X, function="sum", axes=refused)


def test_negative_zero_and_zero_are_different_values():
    pads = {"start_padding": [0, 1], "end_padding": [0, 0]}
    for value, bits in [(0.0, 0x00000000), (-0.0, 0x80000000), (0.0, 0x00000000), (np.float32(-0.0), 0x80000000)]:
        padded = dmlcli.run("padding1", X, padding_value=value, **pads)
        assert int(padded[0, 0].view(np.uint32)) == bits, value


def test_a_list_changed_after_a_call_is_read_anew():
    axes = [1]
    assert dmlcli.run("reduce", X, function="sum_square", axes=axes).shape == (2, 1)
    axes[0] = 0
    assert dmlcli.run("reduce", X, function="sum_square", axes=axes).shape == (1, 4)
    # [1] again, on inputs of new Sizes (validated anew), reduces axis 1.
    assert dmlcli.run("reduce", np.ones((3, 5), np.float32), function="sum_square", axes=[1]).shape == (3, 1)


def test_a_call_that_fails_validation_fails_every_time():
    for _ in range(2):
        with pytest.raises(ValidationError, match="not supported at DML_FEATURE_LEVEL_3_0"):
            dmlcli.run("bit_xor", X, X, feature_level="3_0")


def test_a_value_without_an_exact_key_is_validated_every_time():
    """An array as a parameter value (or any object the key cannot hold exactly) skips the cache, and works."""
    axes = np.array([1])
    req = engine.request("reduce", function="sum", axes=axes)
    assert engine._plan_key(req, [(dmlcli.data_types.FLOAT32, (2, 4))], None) is None
    assert dmlcli.run("reduce", X, function="sum", axes=axes).ravel().tolist() == [6.0, 22.0]
    assert dmlcli.validate("reduce", X, function="sum", axes=axes) is not dmlcli.validate(
        "reduce", X, function="sum", axes=axes)


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(engine, "_VERDICTS", {})
    monkeypatch.setattr(engine, "_VERDICTS_LIMIT", 3)
    for width in range(1, 8):
        dmlcli.validate("reduce", np.ones((2, width), np.float32), axes=[1])
        assert len(engine._VERDICTS) <= 3


def test_spellings_and_options_follow_the_table():
    assert dmlcli.find_operator("reduce") is dmlcli.find_operator("REDUCE") is dmlcli.find_operator("DML_OPERATOR_REDUCE")
    options = dmlcli.find_operator("reduce").options
    assert "axes" in options and "function" in options
    with pytest.raises(TypeError):
        options["axes"] = None  # kept once per entry, so read-only
    with pytest.raises(InputError, match="unknown operator"):
        dmlcli.find_operator("reduce_everything")


def test_the_cpu_backend_is_made_once_and_the_gpu_is_asked_each_time(monkeypatch):
    """get_backend keeps the stateless CPU backend; the GPU backend's create() runs at every request, since it
    checks the device (a GPU that goes away, or CuPy hidden, must be found)."""
    from dmlcli import backends
    from dmlcli.backends import cpu
    from dmlcli.errors import BackendUnavailableError

    assert backends.get_backend("cpu") is backends.get_backend("cpu")
    assert isinstance(backends.get_backend("CPU"), cpu.CpuBackend)
    calls = []

    def refuse():
        calls.append(1)
        raise BackendUnavailableError("GPU backend: none here")

    gpu_module = pytest.importorskip("dmlcli.backends.gpu")
    monkeypatch.setattr(gpu_module, "create", refuse)
    for _ in range(2):
        with pytest.raises(BackendUnavailableError):
            backends.get_backend("gpu")
    assert len(calls) == 2
