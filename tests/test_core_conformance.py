"""The peer test vectors in ../shared/conformance (ONNX backend tests, NumPy's own tests)."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import dmlcli
from dmlcli.cli import cli
from dmlcli.suite import load_case

from conftest import SHARED, shared_params

CASES = sorted((SHARED / "conformance").glob("*/*.json")) if SHARED.is_dir() else []
SIXTY_FOUR_BIT = {"int64", "uint64", "float64"}
SIGNED = {"int8", "int16", "int32", "int64"}


def skip_unless_implemented(case) -> None:
    """onnx_elementwise/ holds vectors for operators the table may not have yet: those are skipped, not failed."""
    try:
        dmlcli.find_operator(case["op"])
    except dmlcli.InputError:
        pytest.skip(f"{case['op']}: dmlcli's operator table has no such operator yet")


def load(path: Path):
    """The case's fields as written, and its tensors as `dmlcli test` reads them (dmlcli.suite.load_case; no
    expected tensor where the case must be refused)."""
    loaded = load_case(path)
    return json.loads(path.read_text()), list(loaded.inputs), loaded.expected


def test_all_cases_are_present(shared_dir):
    assert len(list((shared_dir / "conformance" / "onnx").glob("*.json"))) == 96
    assert len(list((shared_dir / "conformance" / "numpy").glob("*.json"))) == 50
    assert len(list((shared_dir / "conformance" / "onnx_elementwise").glob("*.json"))) == 177


def run_case(case, inputs, **extra):
    """dmlcli.run with the case's parameters (DirectML field names in snake_case, as the API takes them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dmlcli.DmlcliWarning)
        return dmlcli.run(case["op"], *inputs, broadcast=case.get("broadcast", False), **case.get("params", {}), **extra)


def assert_matches(got, expected, case):
    """Bit for bit, or within the case's own tolerance (onnx_elementwise/README: |got - want| <= atol + rtol*|want|,
    NaN matches NaN, equal infinities match)."""
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    tolerance = case.get("tolerance", {"exact": True})
    if tolerance.get("exact"):
        assert got.tobytes() == expected.tobytes()
        return
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=tolerance["rtol"],
                               atol=tolerance["atol"], equal_nan=True)


def refused_by_directml(case) -> bool:
    return str(case.get("directml_support", "")).startswith("unsupported")


@pytest.mark.parametrize("path", shared_params(CASES), ids=lambda p: p.stem)
def test_case(path):
    case = json.loads(path.read_text())
    skip_unless_implemented(case)
    case, inputs, expected = load(path)
    if refused_by_directml(case):
        with pytest.raises(dmlcli.ValidationError):
            run_case(case, inputs)
        return
    assert_matches(run_case(case, inputs), expected, case)


@pytest.mark.parametrize("path", shared_params([p for p in CASES if p.parent.name == "onnx_elementwise"]), ids=lambda p: p.stem)
def test_lowest_feature_level_of_the_elementwise_vectors(path):
    """Each case's directml_support names the lowest level whose table accepts it (onnx_elementwise/README)."""
    case = json.loads(path.read_text())
    skip_unless_implemented(case)
    case, inputs, _ = load(path)
    if refused_by_directml(case):
        return
    verdict = dmlcli.validate(case["op"], *inputs, broadcast=case.get("broadcast", False), **case.get("params", {}))
    claimed = case["directml_support"].removeprefix("DML_FEATURE_LEVEL_")
    if len(verdict.call.output.shape) in (4, 5) or claimed >= "3_0":
        # Below 3_0 the rows take 4 (or 4 to 5) dimensions only, so lower-rank cases start at 3_0.
        assert verdict.lowest_feature_level.short == claimed or (
            len(verdict.call.output.shape) not in (4, 5) and verdict.lowest_feature_level.short == "3_0"
            and claimed < "3_0")
    else:
        assert verdict.lowest_feature_level.short == "3_0"


@pytest.mark.parametrize("path", shared_params([p for p in CASES if p.parent.name == "onnx"]), ids=lambda p: p.stem)
def test_lowest_feature_level(path):
    """conformance/README: 64-bit and signed bitwise cases need 4_1; the rest are valid from 3_0."""
    case, inputs, _ = load(path)
    params = case.get("params", {})
    verdict = dmlcli.validate(case["op"], *inputs, broadcast=case.get("broadcast", False),
                              infinity_mode=params.get("infinity_mode", "either"), output_dtype=params.get("output_dtype"))
    dtypes = {t["dtype"] for t in case["inputs"]}
    signed_bitwise = case["op"] in ("bit_and", "bit_or", "bit_xor", "bit_not") and dtypes & SIGNED
    needs_4_1 = dtypes & SIXTY_FOUR_BIT or signed_bitwise
    if needs_4_1:
        assert verdict.lowest_feature_level.short == "4_1"
    elif len(verdict.call.output.shape) == 4:
        # 4-D tensors also fit the older rows, which allowed exactly 4 dimensions.
        assert verdict.lowest_feature_level.short <= "3_0"
    else:
        assert verdict.lowest_feature_level.short == "3_0"


@pytest.mark.parametrize("path", shared_params([p for p in CASES if p.parent.name in ("onnx", "onnx_elementwise")][::6]),
                         ids=lambda p: p.stem)
def test_case_through_the_command_line(path, tmp_path):
    case = json.loads(path.read_text())
    skip_unless_implemented(case)
    case, _, expected = load(path)
    files = []
    for i, tensor in enumerate(case["inputs"]):
        files.append(tmp_path / f"in{i}.json")
        files[-1].write_text(json.dumps(tensor))
    (tmp_path / "expected.json").write_text(json.dumps(case["expected"]))
    args = ["run", case["op"], *map(str, files)]
    if case.get("broadcast"):
        args.append("--broadcast")
    for key, value in case.get("params", {}).items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    result = CliRunner().invoke(cli, args + ["-o", str(tmp_path / "out.npy")])
    if refused_by_directml(case):
        assert result.exit_code == 3, result.output
        return
    assert result.exit_code == 0, result.output
    assert_matches(np.load(tmp_path / "out.npy"), expected, case)
    if case.get("tolerance", {"exact": True}).get("exact"):
        checked = CliRunner().invoke(cli, args + ["--check", str(tmp_path / "expected.json")])
        assert checked.exit_code == 0 and checked.output.startswith("PASSED"), checked.output
