"""DxDispatch's example models of shaped operators (REDUCE, JOIN, SLICE, SPLIT, CUMULATIVE_PRODUCT,
FILL_VALUE_SEQUENCE), run on the CPU and the GPU, against values worked out by hand from their initial values.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli
from dmlcli.errors import InputError

# What each model prints, by hand:
# REDUCE SUM over the last axis of 1..9 as [1, 1, 3, 3]: 1+2+3, 4+5+6, 7+8+9.
# JOIN of A[0:3] = 1, 2, 3, B[0:2] = 100, 115 and A[4:9] = 5..9 along axis 0.
# SLICE of 1..25 as 5x5: rows 1-3, columns 1 and 3 (offsets 1, 1, stride 2 along the last axis).
# SPLIT of 1..6 into three pairs.
# CUMULATIVE_PRODUCT of 2, 4, 8, 3: 2, 2*4, 2*4*8, 2*4*8*3.
# FILL_VALUE_SEQUENCE from 3.2 by 1.5 in FLOAT32, printed as C++'s %g (6 digits).
def _rnn_model_by_hand() -> list[float]:
    """dml_rnn.json: a BIDIRECTIONAL RNN over one step (seq_length 1), batch 8, input_size 4, hidden_size 5, no
    bias and no HiddenInitTensor (zeros), so each direction's H = ELU(X_b . W_dh) and RecurrenceTensor (0.3)
    meets only zeros. X_b = 4b+1 .. 4b+4; W[d, h, k] = 1 + 0.4*(20d + 4h + k). Every sum is positive, so ELU
    (Alpha 0.5 forward, 3.5 backward) gives it unchanged. OutputSingleTensor {1, 2, 8, 5} in row-major order,
    printed as C++'s %g does (the float32 result, six significant digits)."""
    values = []
    for d in range(2):
        for b in range(8):
            for h in range(5):
                total = sum((4 * b + 1 + k) * (1 + 0.4 * (20 * d + 4 * h + k)) for k in range(4))
                values.append(float(f"{total:.6g}"))
    return values


SHAPED_MODELS = {
    "dml_reduce.json": ("REDUCE", ["Resource 'input': 1, 2, 3, 4, 5, 6, 7, 8, 9", "Resource 'output': 6, 15, 24"]),
    "dml_join.json": ("JOIN", ["Resource 'Out': 1, 2, 3, 100, 115, 5, 6, 7, 8, 9"]),
    "dml_slice.json": ("SLICE", ["Resource 'output': 7, 9, 12, 14, 17, 19"]),
    "dml_split.json": ("SPLIT", ["Resource 'Out1': 1, 2", "Resource 'Out2': 3, 4", "Resource 'Out3': 5, 6"]),
    "dml_cumulative_product.json": ("CUMULATIVE_PRODUCT", ["Resource 'Out': 2, 8, 64, 192"]),
    "dml_fill_value_sequence.json": ("FILL_VALUE_SEQUENCE", ["Resource 'Out': 3.2, 4.7, 6.2, 7.7, 9.2"]),
    # 1..4 as a 2x2, bilinear at pixel centres: output row r reads input row (r + 0.5) / 2 - 0.5 clamped to
    # [0, 1], i.e. 0, 0.25, 0.75, 1 (the columns likewise), so row 1 is 1.5 + {0, 0.25, 0.75, 1}.
    "dml_upsample_2d.json": ("UPSAMPLE_2D", ["Resource 'output': 1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, "
                                             "3.25, 3.5, 3, 3.25, 3.75, 4"]),
    # CONVOLUTION, cross-correlation: 1..9 as 3x3 with a 2x2 filter of 0.5s: 0.5 x (1+2+4+5), (2+3+5+6), ...
    "dml_convolution_2d.json": ("CONVOLUTION", ["Resource 'output': 6, 8, 12, 14"]),
    # 3x3x3 ones with a 2x2x2 filter of 0.5s: 8 x 0.5 = 4 at each of the 2x2x2 outputs.
    "dml_convolution_3d.json": ("CONVOLUTION", ["Resource 'output': 4, 4, 4, 4, 4, 4, 4, 4"]),
    # GEMM: the outer product of A = [1, 2, 3] (3x1) and B = [4, 5, 6] (1x3), plus C = 2 everywhere.
    "dml_gemm.json": ("GEMM", ["Resource 'output': 6, 7, 8, 10, 12, 14, 14, 17, 20"]),
    # GEMM of two 32x32 matrices of ones, compiled as a one-node graph with B owned by DirectML (bound at
    # initialisation) and ALLOW_HALF_PRECISION_COMPUTATION: every element is 32, with no CTensor.
    "dml_gemm_graph.json": ("GEMM", ["Resource 'output': " + ", ".join(["32"] * 1024)]),
    "dml_rnn.json": ("RNN", ["Resource 'output': " + ", ".join(
        f"{value:g}" for value in _rnn_model_by_hand())]),
}


def _implemented(name: str) -> bool:
    try:
        dmlcli.find_operator(name)
    except InputError:
        return False
    return True


def _gpu_usable() -> bool:
    try:
        from dmlcli.backends import gpu

        gpu.create()
    except Exception:  # noqa: BLE001 - no CuPy or no device
        return False
    return True


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("model", sorted(SHAPED_MODELS))
def test_shaped_model_prints_the_hand_computed_values(model, backend, shared_dir, tmp_path, monkeypatch):
    operator, expected = SHAPED_MODELS[model]
    if not _implemented(operator):
        pytest.skip(f"{operator} is not in this build's table")
    if backend == "gpu" and not _gpu_usable():
        pytest.skip("needs a usable GPU (CuPy and a device)")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["dispatch", str(shared_dir / "dxdispatch_models" / model), "--no-timing",
                                      "--backend", backend])
    assert result.exit_code == 0, result.output
    resources = [line for line in result.output.splitlines() if line.startswith("Resource ")]
    assert resources == expected


@pytest.mark.parametrize("model_name, old, new, exit_code, message", [
    ("dml_join.json", '"InputCount": 3', '"InputCount": 2', 2,
     "InputCount 2 does not match the 3 tensor descs of InputTensors"),
    ("dml_reduce.json", '"AxisCount": 1', '"AxisCount": 2', 2, "AxisCount 2 does not match the 1 values of Axes"),
    ("dml_reduce.json", "[1,1,3,1]", "[1,1,1,3]", 3,
     "OutputTensor Sizes [1, 1, 1, 3] do not match the Sizes its rule gives"),
], ids=["tensor array count", "axis count", "output sizes against the rule"])
def test_a_desc_that_contradicts_itself_is_refused(tmp_path, shared_dir, model_name, old, new, exit_code, message):
    """A count field that disagrees with its array is a usage error (2); Sizes against the rule, a violation (3)."""
    text = (shared_dir / "dxdispatch_models" / model_name).read_text()
    assert old in text
    model = tmp_path / model_name
    model.write_text(text.replace(old, new))
    result = CliRunner().invoke(cli, ["dispatch", str(model)])
    assert result.exit_code == exit_code
    assert message in result.output
