"""What the shaped families' tests share: a call's tensors and parameters as `dmlcli run` arguments, a refusal
checked as a person sees it, and the judgement of one cell of a feature-level grid."""

from __future__ import annotations

import json
from typing import Callable

import numpy as np
from click.testing import CliRunner, Result

import dmlcli
from dmlcli.cli import cli


def json_input(array: np.ndarray) -> str:
    """A tensor as an inline JSON INPUT, exactly (its dtype, shape and values)."""
    return json.dumps({"dtype": array.dtype.name, "shape": list(array.shape), "data": array.tolist()})


def cli_args(op, inputs, parameters, *extra) -> list[str]:
    """`dmlcli run OP INPUT... --option value ...` for API keywords and values (sequences as 1,2,3)."""
    args = ["run", op, *[json_input(np.asarray(x)) for x in inputs]]
    for key, value in parameters.items():
        text = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
        args += ["--" + key.replace("_", "-"), text]
    return args + list(extra)


def judge_cell(label: str, plan_call: Callable, want: bool, lowest: Callable[[], str], failures: list[str], *,
               any_message: bool = False) -> None:
    """Runs `plan_call` (one cell of a validation grid) and appends to `failures` what disagrees with the tables:
    acceptance other than `want`, a refusal that does not name a level or type (unless `any_message`), or an
    accepted call whose lowest feature level is not `lowest()`."""
    try:
        verdict = plan_call()
        got = True
    except dmlcli.ValidationError as error:
        got = False
        if not any_message and "supported" not in str(error) and "not available" not in str(error):
            failures.append(f"{label}: odd message {error}")
    if got != want:
        failures.append(f"{label}: accepted={got}, expected {want}")
    elif got and verdict.lowest_feature_level.short != lowest():
        failures.append(f"{label}: lowest {verdict.lowest_feature_level}")


def refused_in_one_line(args: list[str], exit_code: int, text: str) -> Result:
    """`dmlcli ARGS` through CliRunner, checked to end with `exit_code`, nothing on stdout and one line on stderr
    that holds `text` (no traceback). The result is returned for further checks."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == exit_code, result.output
    assert result.stdout == ""
    assert text in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    return result


def dispatch_one(folder, operator: str, desc: dict, inputs: dict[str, list], output_count: int) -> Result:
    """`dmlcli dispatch` of a DxDispatch model (written in `folder`) with one dispatchable of DML_OPERATOR_`operator`:
    each input tensor's FLOAT32 values by its DESC field, OutputTensor `output_count` zeros, printed after the
    dispatch as "Resource 'OutputTensor': ..."."""
    resources = {name: {"initialValuesDataType": "FLOAT32", "initialValues": values} for name, values in inputs.items()}
    resources["OutputTensor"] = {"initialValuesDataType": "FLOAT32",
                                 "initialValues": {"valueCount": output_count, "value": 0}}
    model = {"resources": resources, "dispatchables": {"op": {"type": f"DML_OPERATOR_{operator}", "desc": desc}},
             "commands": [{"type": "dispatch", "dispatchable": "op", "bindings": {name: name for name in resources}},
                          {"type": "print", "resource": "OutputTensor"}]}
    path = folder / "model.json"
    path.write_text(json.dumps(model))
    return CliRunner().invoke(cli, ["dispatch", str(path), "--no-timing"])
