"""The Python API: `run`, `validate`, `check` and `run_files`, thin over the engine (which the command line uses
too).

Parameters are keyword arguments named after the operator's DESC fields in snake_case
(`infinity_mode=`, later `scale=`, `alpha=`, ...), as `dmlcli describe OP` lists them.
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

from . import engine
from .errors import DmlcliWarning
from .calls.validation import Verdict
from .onnx_spellings import request as _request


def _warn(messages) -> None:
    for message in messages:
        warnings.warn(message, DmlcliWarning, stacklevel=3)


def plan(op, inputs: Sequence[tuple], *, feature_level=None, broadcast=False, output_dtype=None, outputs=None,
         **parameters) -> Verdict:
    """Validate a call described by its inputs' (DataType, shape) pairs alone, with no data. `outputs` as run's."""
    req = _request(op, parameters, feature_level=feature_level, broadcast=broadcast, output_dtype=output_dtype,
                   outputs=outputs)
    return engine.plan(req, inputs)


def _converted(arrays, convert) -> list:
    """The arrays as NumPy arrays, each typed one converted as `convert` asks (--convert's types: io/convert.py)."""
    given = [engine.as_input_array(a, i + 1) for i, a in enumerate(arrays)]
    if convert is None:
        return given
    from .io.convert import conversion_targets, convert_inputs

    return convert_inputs(given, conversion_targets(convert), [f"input {i + 1}" for i in range(len(given))])[0]


def validate(op, *arrays, feature_level=None, broadcast=False, output_dtype=None, float_rules=None,
             allow_tf32=False, convert=None, outputs=None, **parameters) -> Verdict:
    """Check a call without running it; raise dmlcli.ValidationError if DirectML would reject it.

    Returns the Verdict, whose `lowest_feature_level` is the first level that accepts the call. `float_rules` and
    `allow_tf32` change nothing that is checked; the verdict's call records them (the rule --check would use:
    dmlcli.checking.comparison.rule_for). `convert` and `outputs` as run's: the verdict's call then has only the
    outputs named (`verdict.call.outputs`), and the ones left out are not checked, as DirectML does not check a
    NULL desc.
    """
    req = _request(op, parameters, feature_level=feature_level, broadcast=broadcast, output_dtype=output_dtype,
                   float_rules=float_rules, allow_tf32=allow_tf32, outputs=outputs)
    return engine.plan_arrays(req, _converted(arrays, convert))


def run(op, *arrays, feature_level=None, broadcast=False, output_dtype=None, backend="cpu", float_rules=None,
        allow_tf32=False, convert=None, outputs=None, **parameters) -> np.ndarray:
    """Validate and run a DirectML operator; return the output as a NumPy array (a tuple of arrays for an
    operator with several outputs, such as SPLIT or TOP_K: those the call gives, in DESC order; ROI_ALIGN_GRAD
    without its optional InputTensor gives only OutputGradientTensor).

    `outputs` (output names as DirectML.h spells them, in any case: ("OutputTensor",), or "OutputTensor,
    OutputStateTensor") asks for those outputs alone, as a DESC whose other _Maybenull_ outputs are NULL does
    (`dmlcli describe OP` lists an operator's optional outputs): the ones left out are neither computed nor
    returned, and the tuple holds those named, in DESC order (a one-element tuple for one). MULTIHEAD_ATTENTION
    without its present keys and values, LSTM without OutputSequenceTensor, RANDOM_GENERATOR without its
    OutputStateTensor skip that work. A name that is not an output, or an output left out that is not optional,
    raises dmlcli.InputError; None (the default) gives every output the call can give.

    Raises dmlcli.ValidationError when the call breaks the operator's rules at `feature_level`
    (default: the newest, 6_4), and dmlcli.BackendUnavailableError when `backend` cannot run.
    Warnings (such as shift counts past the width) are issued as dmlcli.DmlcliWarning.
    `float_rules="d3d"` gives the result under Direct3D's float rules instead of IEEE-754's.
    `allow_tf32=True` (DirectML's DML_EXECUTION_FLAG_ALLOW_HALF_PRECISION_COMPUTATION) lets FLOAT32 matrix
    products on the GPU (GEMM, CONVOLUTION, RNN, GRU, LSTM, MULTIHEAD_ATTENTION(1)) use TF32 tensor cores;
    elsewhere it changes nothing.
    `convert="float32"` (or a type of another kind, or one float and one integer type: ("float32", "int32"))
    converts each array of another type of that kind first, as --convert does: floats rounded to nearest (NumPy's
    default FLOAT64), integers exactly.
    """
    req = _request(op, parameters, feature_level=feature_level, broadcast=broadcast, output_dtype=output_dtype,
                   float_rules=float_rules, allow_tf32=allow_tf32, outputs=outputs)
    outcome = engine.run(req, _converted(arrays, convert), backend=backend)
    _warn(outcome.warnings)
    op = req.operator
    if op.extra_outputs or (op.variadic is not None and op.variadic in op.outputs):
        return outcome.all_outputs  # SPLIT, TOP_K: a tuple, one array per output tensor in DESC order
    return outcome.output


def check(op, *arrays, expected, tolerance=None, feature_level=None, broadcast=False, output_dtype=None,
          backend="cpu", float_rules=None, allow_tf32=False, max_listed=None, convert=None, outputs=None,
          **parameters):
    """Run a call and compare its (first) output with `expected`, as `dmlcli run ... --check` does; return the
    Comparison: `passed`, `mismatches`, `kinds`, `text()` (the verdict --check prints) and `to_json()` (its
    --report fields). With `outputs` (as run's), the first output named is the one compared, and the others left
    out are not computed (outputs=("OutputSingleTensor",) checks an LSTM's last state alone).

    Without `tolerance`, the operator's own rule: bit for bit for exact operators and integer outputs, else its
    ULP figure for the call or its absolute floor, and for an operator that sums terms each element's sum bound
    (computed from `arrays`). `tolerance` takes --tolerance's text ("rtol:1e-5,atol:1e-6" as numpy.allclose,
    "ulp:4", "atol:1e-6", "ulp:4,atol:1e-6", "exact", "bits") or a dmlcli.checking.comparison.Rule.
    """
    from .checking.comparison import MAX_LISTED, Rule, compare_arrays, parse_tolerance, rule_for

    override = None
    if tolerance is not None:
        override = tolerance if isinstance(tolerance, Rule) else parse_tolerance(tolerance, "tolerance")
    req = _request(op, parameters, feature_level=feature_level, broadcast=broadcast, output_dtype=output_dtype,
                   float_rules=float_rules, allow_tf32=allow_tf32, outputs=outputs)
    outcome = engine.run(req, _converted(arrays, convert), backend=backend)
    _warn(outcome.warnings)
    call = outcome.verdict.call
    rule = rule_for(req.operator, outcome.output.dtype, override, call.parameters, call,
                    inputs=None if override is not None else outcome.inputs)
    # A list has no type of its own: it takes the output's (as a bare JSON list after --check does); an array keeps
    # its own, which must be the output's.
    expected = expected if isinstance(expected, np.ndarray) else np.asarray(expected, dtype=outcome.output.dtype)
    return compare_arrays(outcome.output, expected, rule,
                          max_listed=MAX_LISTED if max_listed is None else max_listed,
                          d3d_flushes=not req.operator.native_encoding)


def run_files(op, inputs: Sequence[str], output: str, *, dtype=None, feature_level=None, broadcast=False,
              output_dtype=None, backend="cpu", chunk_bytes: int | None = None, progress=None,
              float_rules=None, allow_tf32=False, **parameters) -> Verdict:
    """Run an operator from .npy files (or .npz arrays, `x.npz:name`) into a .npy file (JSON text for a .json
    `output`) in constant memory
    (read, compute, write chunk by chunk).

    The call is validated from the files' headers alone; the output is written atomically, so it may
    name one of the inputs. `dtype`, when given, must agree with the files. `progress(total_bytes)`
    may return a context manager that yields an `advance(bytes)` callable. Returns the Verdict.
    """
    req = _request(op, parameters, feature_level=feature_level, broadcast=broadcast, output_dtype=output_dtype,
                         float_rules=float_rules, allow_tf32=allow_tf32)
    declared = None if dtype is None else engine.data_type_of(dtype)
    outcome = engine.run_files(req, [str(x) for x in inputs], str(output), dtype=declared, backend=backend,
                               chunk_bytes=chunk_bytes, progress=progress)
    _warn(outcome.warnings)
    return outcome.verdict


def run_case(case_or_path, *, backend="cpu", feature_level=None, float_rules=None, allow_tf32=None):
    """Run one test case (a case file's path, or a dmlcli.suite.Case) as `dmlcli test` does; return its
    CaseResult: `verdict` (passed, failed, error, skipped), `passed`, `message`, `differences` (--check's
    report) and `timings`. A malformed case is a result with verdict "error", not an exception.
    `feature_level`, `float_rules` and `allow_tf32` apply where the case sets none.
    """
    from .suite.runner import run_case as run_one

    return run_one(case_or_path, backend, feature_level=feature_level, float_rules=float_rules,
                   allow_tf32=allow_tf32)


def run_onnx(model, inputs, *, backend="cpu", feature_level=None, fallback=None, fusions=True) -> dict:
    """Run an ONNX model as ONNX Runtime's DirectML provider runs it; return its outputs by name.

    `model`: an .onnx path, an onnx.ModelProto, or a dmlcli.onnx_model.OnnxSession (which keeps the model read and
    its plan made between calls: the weights converted once). `inputs`: arrays by the model's input names.
    Every node runs on its DirectML operator, validated at `feature_level` (default 6_4): dmlcli.ValidationError
    names a node DirectML cannot run, unless `fallback="cpu"` runs it on ONNX Runtime's CPU provider.
    `fusions=False` runs the model's nodes as they are, without the graph fusions ONNX Runtime applies for its
    DirectML provider (docs/onnx.md).
    dmlcli.BackendUnavailableError where the onnx package (or, for the fallback, onnxruntime) is missing.
    """
    from .onnx_model import OnnxSession

    session = model if isinstance(model, OnnxSession) else OnnxSession(
        model, backend=backend, feature_level=feature_level, fallback=fallback, fusions=fusions)
    return session.run(inputs)
