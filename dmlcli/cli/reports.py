"""Structured data for scripts (`--format json` of validate, ops, describe and info): plain dicts of
strings, numbers, booleans, lists and None, built from the operator table and the verdicts.

The keys are a documented interface (README, "JSON reports"): add keys, never rename or remove them.
Feature levels are DirectML's full names (DML_FEATURE_LEVEL_3_0), data types DirectML's short names (UINT8).
"""

from __future__ import annotations

from ..feature_levels import ALL_FEATURE_LEVELS, FeatureLevel
from ..operators.table.options import option_flag
from ..operators.table.parameters import EnumParameter
from ..operators.table.schema import Operator


def _level(level: FeatureLevel | None) -> str | None:
    return None if level is None else level.name


def _output_types(op: Operator) -> list[str]:
    """Every data type the output (the chosen one, where several) takes in some support row, newest row first,
    each once."""
    found: list[str] = []
    for row in op.all_rows():
        for data_type in row.tensors[op.choice_output or op.output].data_types:
            if data_type.name not in found:
                found.append(data_type.name)
    return found


def parameter_record(parameter) -> dict:
    record = {"field": parameter.field, "options": [option_flag(option) for option in parameter.options],
              "help": parameter.help, "default": parameter.describe_default(),
              "choices": list(parameter.choices(parameter.options[0]) or []) or None}
    if isinstance(parameter, EnumParameter):
        record["enum"] = {f"{parameter.enum_prefix}{short}": number for short, number in parameter.values}
    return record


def operator_record(op: Operator) -> dict:
    """What `dmlcli ops` shows of one operator."""
    tied = [name for name in op.same_data_type if name != op.output]
    return {
        "name": op.cli_name,
        "dml_name": op.dml_name,
        "family": op.family,
        "summary": op.summary,
        "inputs": list(op.inputs),
        "parameters": [parameter_record(parameter) for parameter in op.parameters],
        # The output's type is either tied to an input's (output_type_same_as) or chosen among output_types.
        "output_type_same_as": None if op.output_type_is_choice or not tied else tied[0],
        "output_types": _output_types(op),
        "default_output_type": None if op.default_output_type is None else op.default_output_type.name,
        "introduced": _level(op.introduced),
        # Added with issue 31: the ONNX names that resolve to the operator (dmlcli run NAME runs it).
        "onnx_names": _onnx_names(op),
    }


def _onnx_names(op: Operator) -> list[str]:
    from ..onnx_spellings import names_for

    return [spelling.name for spelling in names_for(op)[0]]


def support_table(op: Operator, group=None) -> list[dict]:
    """The operator's support at every feature level: dimension counts and data types of each tensor (of one
    group of support rows, where they depend on a parameter)."""
    group = op.support if group is None else group
    table = []
    for level in ALL_FEATURE_LEVELS:
        found = [row for row in group if row.level <= level]
        row = max(found, key=lambda r: r.level) if found else None
        entry = {"feature_level": level.name, "available": row is not None}
        if row is not None:
            entry["tensors"] = {name: {"dimension_counts": list(row.tensors[name].dims),
                                       "data_types": [t.name for t in row.tensors[name].data_types]}
                                for name in op.tensors}
        table.append(entry)
    return table


def operator_details(op: Operator) -> dict:
    """What `dmlcli describe` shows of one operator."""
    tolerance = None
    if op.tolerance is not None:
        ulp = op.tolerance.kind == "ulp"
        tolerance = {"kind": op.tolerance.kind, "float32": op.tolerance.float32, "float16": op.tolerance.float16,
                     "source": op.tolerance.source,
                     # A "ulp" tolerance's absolute floors (an element passes within either) and their reason.
                     "atol_floor": ({"float32": op.tolerance.floor_for("float32"),
                                     "float16": op.tolerance.floor_for("float16")} if ulp else None),
                     "floor_source": op.tolerance.floor_reason,
                     # Added with the sum bounds (issue 31): whether the figure is multiplied by a count of each call
                     # (validate gives a call's), and the per-element bound of an operator that sums terms.
                     "scaled_by_call": op.tolerance_scale is not None,
                     "sum_bound": _sum_bound_record(op)}
    return {
        **operator_record(op),
        "enum_value": op.enum_value,
        "formula": op.formula,
        "tensors": list(op.tensors),
        "output": op.output,
        "exactness": op.exactness,
        "tolerance": tolerance,
        "same_data_type": list(op.same_data_type),
        "same_sizes": list(op.same_sizes),
        "in_place": op.in_place,
        "notes": list(op.notes),
        "support": support_table(op),
        # Added with the shaped operators: every output, the variadic tensor, and support rows by parameter.
        "outputs": list(op.outputs),
        "variadic": op.variadic,
        "support_by": op.support_by,
        "support_groups": [{"values": list(values), "support": support_table(op, group)}
                           for values, group in op.support_groups] or None,
        # Added with --allow-tf32: whether it changes the operator's FLOAT32 results (GPU) and their tolerance.
        "tf32_products": op.tf32_products,
        # Added with the attention family: the _Maybenull_ inputs (and the first level that lets a call leave them
        # out) and outputs.
        "optional_inputs": [name for name, _ in op.optional_inputs],
        "optional_since": _level(op.optional_since) if op.optional_since is not None else None,
        "optional_outputs": list(op.optional_outputs),
        # Added with issue 31: what --broadcast does to the operator's inputs (None: it is refused; element-wise
        # operators broadcast every input by NumPy's rules).
        "broadcast": broadcast_summary(op),
    }


def broadcast_summary(op: Operator) -> str | None:
    """What --broadcast (broadcast=True) does to the operator's inputs, or None where it refuses it."""
    if op.is_elementwise:
        return "every input broadcasts to one Sizes by NumPy's rules, as DirectML's zero Strides express it"
    return None if op.input_broadcast is None else op.input_broadcast.text


def _sum_bound_record(op: Operator) -> dict | None:
    """describe's structured form of the sum bound: the rule 2 x (K x u + u_out) x M and what K and M are."""
    if op.sum_bound is None:
        return None
    from ..operators.table.schema import BOUND_MULTIPLE, FLOAT32_ROUNDOFF, TF32_ROUNDOFF

    return {"rule": "|got - expected| <= multiple * (terms * roundoff + output_roundoff) * magnitude",
            "multiple": BOUND_MULTIPLE, "terms": op.sum_bound.terms_text, "magnitude": op.sum_bound.magnitude_text,
            "roundoff": {"float32": FLOAT32_ROUNDOFF, "float16": FLOAT32_ROUNDOFF,
                         "tf32": TF32_ROUNDOFF if op.tf32_products else None},
            "output_roundoff": {"float32": 2.0 ** -24, "float16": 2.0 ** -11},
            "text": op.sum_bound.describe(op.tf32_products)}


def check_record(call) -> dict:
    """validate's structured form of the rule --check uses for the call's first output, with this call's figures."""
    from ..checking.bounds import bound_figures
    from ..checking.comparison import rule_for

    rule = rule_for(call.operator, call.output.data_type.numpy_dtype, None, call.parameters, call)
    figures = bound_figures(call)
    return {"output": call.output.name, "kind": rule.kind,
            "ulp_limit": rule.limit if rule.kind == "ulp" else None,
            "atol": rule.limit if rule.kind == "atol" else None,
            "atol_floor": rule.floor if rule.kind == "ulp" else None,
            "sum_bound": None if figures is None else figures.to_json(), "text": rule.describe()}


def validation_report(op: Operator, feature_level: FeatureLevel, *, verdict=None, error=None, onnx=None) -> dict:
    """The verdict of `dmlcli validate`: ok with the tensors, or rejected with the broken rule; `onnx`: the ONNX
    spelling the operator was named by (onnx_spellings.OnnxSpelling), or None."""
    from ..errors import EXIT_OK

    # Added with issue 31: the ONNX name's resolution (null for a DirectML name).
    spelled = {"onnx": None if onnx is None else onnx.record()}
    if error is not None:
        return {"verdict": "rejected", "operator": op.dml_name, "feature_level": feature_level.name,
                "lowest_feature_level": _level(getattr(error, "lowest_feature_level", None)),
                "message": str(error), "exit_code": error.exit_code, "tensors": None, "check": None,
                "work": None, **spelled}
    tensors = {name: {"data_type": t.data_type.name, "shape": list(t.shape)}
               for name, t in verdict.call.tensors.items()}
    described = ", ".join(t.describe() for t in verdict.call.tensors.values())
    return {"verdict": "ok", "operator": op.dml_name, "feature_level": verdict.feature_level.name,
            "lowest_feature_level": _level(verdict.lowest_feature_level),
            "message": f"valid: {op.name} accepts {described} at {verdict.feature_level}",
            "exit_code": EXIT_OK, "tensors": tensors, "check": check_record(verdict.call),
            "work": work_report(verdict.call), **spelled}


def work_report(call) -> dict | None:
    """What the call's kernel reads against what it holds, where its entry counts it (the window operators: output
    elements x window elements): {"element_reads", "tensor_elements"}; None for the others."""
    from ..engine import tensor_elements, work_reads

    reads = work_reads(call)
    if reads is None:
        return None
    return {"element_reads": reads, "tensor_elements": tensor_elements(call)}


def backends_report() -> dict:
    """The backends found, as `dmlcli info` lists them, with versions; the GPU's reason where it is unusable."""
    from ..backends import survey
    from ..version import __version__

    backends = survey()
    usable = [b["name"] for b in backends if b["available"]]
    return {"dmlcli": __version__, "backends": backends, "auto": usable[-1]}
