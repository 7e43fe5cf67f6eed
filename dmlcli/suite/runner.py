"""Running cases: each through the engine (the path `dmlcli run` takes), on one backend or several.

`run_case` runs one case and gives a `CaseResult` per backend (and, with several backends, one per
comparison of a backend's result with the first's). `run_suite` finds the case files under the paths
given, runs them in worker processes (chunks of cases per task, so that a case costs no process
start-up), and returns the results in a stable order (by file, then backend) whatever the number of
workers. A case that cannot be read, or that breaks anything, is that case's error, never the run's.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from ..errors import BackendUnavailableError, DmlcliError, InputError, ValidationError, quoted
from .case import Case, CaseError, case_id_for, discover, load_case, read_document

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
OUT_OF_MEMORY = "ran out of memory (more than the room check counted was taken); nothing of this case was kept"
VERDICTS = (PASSED, FAILED, ERROR, SKIPPED)
CROSS = "-vs-"  # a comparison's backend name: "cpu-vs-gpu"


@dataclass(frozen=True)
class CaseResult:
    """One case on one backend (or one comparison of two backends' results)."""

    case_id: str
    file: str
    op: str  # the operator's command-line name, or the case's "op" as written where no operator has it
    backend: str  # "cpu", "gpu", or "cpu-vs-gpu" for a comparison of the two
    verdict: str  # passed, failed, error or skipped
    message: str = ""  # one line: why it failed, erred or was skipped
    differences: str = ""  # --check's report (counts, largest errors, first differing elements)
    time: float = 0.0  # seconds: reading the case (on its first backend), running and comparing
    timings: Mapping[str, float] = field(default_factory=dict)  # load, run, compare
    warnings: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    @property
    def name(self) -> str:
        return f"{self.case_id}[{self.backend}]"


@dataclass(frozen=True)
class Settings:
    """What applies to every case that does not set its own."""

    feature_level: str | None = None
    float_rules: str | None = None
    keyword: str | None = None
    allow_tf32: bool = False


@dataclass
class SuiteRun:
    results: list[CaseResult]
    backends: tuple[str, ...]
    unavailable: dict[str, str]
    files: int
    deselected: int = 0
    not_run: int = 0  # cases left out after the first failure (-x)
    duration: float = 0.0
    started: str = ""
    jobs: int = 1
    settings: Settings = field(default_factory=Settings)

    def counts(self) -> dict[str, int]:
        return {verdict: sum(r.verdict == verdict for r in self.results) for verdict in VERDICTS}

    @property
    def ok(self) -> bool:
        return not any(r.verdict in (FAILED, ERROR) for r in self.results)


# ---------------------------------------------------------------- backends

_BACKENDS: dict[str, object] = {}  # by name, one per process: the GPU's set-up (context, buffers) is paid once


def resolve_backends(name: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """The backends to run (in order) and those left out with the reason: `all` is every backend found;
    `gpu` raises BackendUnavailableError (exit 4) where there is none; `auto` falls back to the CPU."""
    from ..backends import get_backend

    key = str(name).strip().lower()
    if key == "cpu":
        return ("cpu",), {}
    if key == "gpu":
        _BACKENDS["gpu"] = get_backend("gpu")
        return ("gpu",), {}
    if key in ("auto", "all"):
        try:
            _BACKENDS["gpu"] = get_backend("gpu")
        except (BackendUnavailableError, ImportError) as why:
            reason = str(why).removeprefix("GPU backend: ")
            return ("cpu",), {"gpu": reason}
        return (("cpu", "gpu") if key == "all" else ("gpu",)), {}
    raise InputError(f"unknown backend {quoted(name)} (expected cpu, gpu, auto or all)")


def _backend(name: str):
    """This process's backend object for `name`."""
    if name not in _BACKENDS:
        from ..backends import get_backend

        _BACKENDS[name] = get_backend(name)
    return _BACKENDS[name]


# ---------------------------------------------------------------- one case


def _names(case_id: str, path: Path, document: Mapping) -> list[str]:
    """What -k matches: the id and its parts, the file name, the operator (as written and canonical), case_name."""
    names = [case_id, *case_id.split("/"), path.name]
    op = document.get("op")
    if isinstance(op, str):
        names.append(op)
        try:
            from ..operators import find_operator

            names.append(find_operator(op).cli_name)
        except InputError:
            pass
    if isinstance(document.get("case_name"), str):
        names.append(document["case_name"])
    if isinstance(document.get("onnx_op"), str):
        names.append(document["onnx_op"])  # an ONNX node test: its ONNX operator (ReduceSum, Split, ...)
    return names


def _op_label(op, onnx_op=None) -> str:
    """What results are grouped by: dmlcli's name of the operator, or an ONNX case's ONNX operator."""
    if isinstance(onnx_op, str) and onnx_op:
        return onnx_op
    if not isinstance(op, str) or not op:
        return "(no operator)"
    try:
        from ..operators import find_operator

        return find_operator(op).cli_name
    except InputError:
        return op


def run_file(path: Path, case_id: str, backends: Sequence[str], settings: Settings = Settings(),
             selected: Callable | None = None) -> tuple[bool, list[CaseResult]]:
    """(selected, results) for one case file: read, selected by -k, run on each backend, compared across them."""
    started = time.perf_counter()
    try:
        document = read_document(path)
    except CaseError as error:
        return True, _all(backends, case_id, path, "(unreadable)", ERROR, str(error), time.perf_counter() - started)
    if selected is not None and not selected(_names(case_id, path, document)):
        return False, []
    op = _op_label(document.get("op"), document.get("onnx_op"))
    try:
        case = load_case(path, case_id, document)
    except CaseError as error:
        return True, _all(backends, case_id, path, op, ERROR, str(error), time.perf_counter() - started)
    return True, run_loaded(case, backends, settings, load_time=time.perf_counter() - started)


def _all(backends, case_id, path, op, verdict, message, elapsed) -> list[CaseResult]:
    return [CaseResult(case_id, str(path), op, backend, verdict, message, time=elapsed if i == 0 else 0.0,
                       timings={"load": elapsed if i == 0 else 0.0})
            for i, backend in enumerate(backends)]


@dataclass(frozen=True)
class Invocation:
    """The DirectML call a case makes: its own "op" and "params", or an ONNX case's call from the ONNX table."""

    operator: object
    keywords: Mapping[str, object]
    inputs: tuple
    expected: tuple  # every expected output, in order
    output_dtype: object = None
    output_shapes: Mapping[str, object] | None = None
    broadcast: bool = False
    finish: Callable = tuple  # DirectML's outputs -> what the expected tensors hold (ONNX's outputs)
    label: str = ""  # what results are grouped by
    tolerance: object = None  # a Rule the ONNX table gives a case (expected values printed rounded), else None


def invocation(case: Case) -> Invocation | str:
    """The case's call; a reason (str) where an ONNX case is skipped; InputError where it cannot be made."""
    from ..operators import find_operator

    if case.onnx_op is not None:
        from .onnx import Skipped, plan

        planned = plan(case)
        if isinstance(planned, Skipped):
            return planned.reason
        return Invocation(planned.operator, planned.keywords, tuple(planned.inputs),
                          planned.arrange(case.all_expected), planned.output_dtype, planned.output_shapes or None,
                          planned.broadcast, planned.finish, case.onnx_op, planned.tolerance)
    operator = find_operator(case.op)
    params = dict(case.params)
    output_dtype = params.pop("output_dtype", None)
    return Invocation(operator, params, case.inputs, case.all_expected, output_dtype, None, case.broadcast,
                      label=operator.cli_name)


def run_loaded(case: Case, backends: Sequence[str], settings: Settings = Settings(), *,
               load_time: float = 0.0) -> list[CaseResult]:
    """A read case on each backend, then each backend's result against the first's."""
    op = _op_label(case.op, case.onnx_op)
    if case.skip is not None:
        return _all(backends, case.case_id, case.path, op, SKIPPED, case.skip, load_time)
    try:
        call = invocation(case)
    except InputError as error:
        return _all(backends, case.case_id, case.path, op, ERROR, f"{quoted(case.path)}: {error}", load_time)
    except MemoryError:
        return _all(backends, case.case_id, case.path, op, ERROR, f"{quoted(case.path)}: {OUT_OF_MEMORY}", load_time)
    except Exception as error:  # noqa: BLE001 - a bug in mapping one case is that case's error; the run goes on
        return _all(backends, case.case_id, case.path, op, ERROR,
                    f"internal error mapping the case: {type(error).__name__}: {error}", load_time)
    if isinstance(call, str):
        return _all(backends, case.case_id, case.path, op, SKIPPED, call, load_time)
    results, outputs = [], []
    for index, backend in enumerate(backends):
        load = load_time if index == 0 else 0.0
        result, output = _run_on(case, call, backend, settings, load)
        results.append(result)
        if output is not None:
            outputs.append((backend, output))
    if len(backends) > 1:
        results += _cross_checks(case, call, backends, outputs)
    return results


def _run_on(case: Case, call: Invocation, backend: str, settings: Settings, load: float):
    """(result, (outputs, the validated call, inputs) or None where no output) of the case on one backend."""
    from .. import engine

    operator = call.operator
    base = dict(case_id=case.case_id, file=str(case.path), op=call.label, backend=backend)
    started = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
            warnings.simplefilter("always")
            req = engine.request(operator, feature_level=case.feature_level or settings.feature_level,
                                 broadcast=call.broadcast, output_dtype=call.output_dtype,
                                 output_shapes=call.output_shapes,
                                 float_rules=case.float_rules or settings.float_rules,
                                 allow_tf32=settings.allow_tf32 if case.allow_tf32 is None else case.allow_tf32,
                                 **call.keywords)
            outcome = engine.run(req, call.inputs, backend=_backend(backend))
    except DmlcliError as error:
        ran = time.perf_counter() - started
        timings = {"load": load, "run": ran, "compare": 0.0}
        code = error.exit_code
        if case.expect_error is not None:
            verdict = PASSED if code == case.expect_error else FAILED
            message = (f"refused with exit code {code} as expected: {error}" if verdict == PASSED else
                       f"refused with exit code {code}, but the case expects exit code {case.expect_error}: {error}")
            return CaseResult(**base, verdict=verdict, message=message, time=load + ran, timings=timings), None
        if isinstance(error, ValidationError):
            message = f"dmlcli refused the call (exit code 3), but the case expects a result: {error}"
            return CaseResult(**base, verdict=FAILED, message=message, time=load + ran, timings=timings), None
        return CaseResult(**base, verdict=ERROR, message=f"{quoted(case.path)}: {error}", time=load + ran,
                          timings=timings), None
    except MemoryError:  # past what the room check counts (another process took the memory meanwhile)
        ran = time.perf_counter() - started
        return CaseResult(**base, verdict=ERROR, message=f"{quoted(case.path)}: {OUT_OF_MEMORY}", time=load + ran,
                          timings={"load": load, "run": ran, "compare": 0.0}), None
    except Exception as error:  # noqa: BLE001 - a bug shows as this case's error, and the run goes on
        ran = time.perf_counter() - started
        return CaseResult(**base, verdict=ERROR, message=f"internal error: {type(error).__name__}: {error}",
                          time=load + ran, timings={"load": load, "run": ran, "compare": 0.0}), None
    ran = time.perf_counter() - started
    notes = tuple(outcome.warnings) + tuple(str(w.message) for w in caught
                                            if issubclass(w.category, Warning) and str(w.message) not in outcome.warnings)
    if case.expect_error is not None:
        message = f"dmlcli accepted the call, but the case expects it refused with exit code {case.expect_error}"
        return CaseResult(**base, verdict=FAILED, message=message, time=load + ran,
                          timings={"load": load, "run": ran, "compare": 0.0}, warnings=notes), None
    started = time.perf_counter()
    try:
        outputs = tuple(call.finish(outcome.all_outputs))
    except Exception as error:  # noqa: BLE001 - an adapter's bug is this case's error
        return CaseResult(**base, verdict=ERROR, message=f"internal error turning {operator.name}'s outputs into the "
                          f"case's: {type(error).__name__}: {error}", time=load + ran), None
    given = case.tolerance or call.tolerance
    try:
        bounds = None if given is not None else _Bounds(call, outcome.verdict.call, outcome.inputs, outputs)
        report, same = _compared_all(operator, outputs, call.expected, given, outcome.verdict.call, bounds)
    except Exception as error:  # noqa: BLE001 - a comparison's failure (memory included) is this case's error
        what = OUT_OF_MEMORY if isinstance(error, MemoryError) else f"{type(error).__name__}: {error}"
        return CaseResult(**base, verdict=ERROR, message=f"internal error comparing the outputs: {what}",
                          time=load + ran), None
    compared = time.perf_counter() - started
    message = "" if same else report.splitlines()[0].removeprefix("FAILED: ")
    result = CaseResult(**base, verdict=PASSED if same else FAILED, message=message, differences=report,
                        time=load + ran + compared, timings={"load": load, "run": ran, "compare": compared},
                        warnings=notes)
    return result, (outputs, outcome.verdict.call, outcome.inputs)


class _Bounds:
    """A case's sum bounds, computed when a comparison first needs one (an output whose bits differ from the
    expected ones): a golden suite whose results match costs no magnitude run."""

    def __init__(self, call: Invocation, verdict_call, inputs, outputs) -> None:
        self.arguments = (call, verdict_call, inputs, outputs)
        self.found: list | None = None

    def of(self, position: int):
        if self.found is None:
            self.found = _case_bounds(*self.arguments)
        return self.found[position] if position < len(self.found) else None


def _case_bounds(call: Invocation, verdict_call, inputs, outputs) -> list:
    """Each compared output's sum bound (None where it has none), from the inputs the case ran on, carried through
    the case's finish (an ONNX adapter's reshapes, transpositions and choice of outputs)."""
    from ..checking.bounds import finished_bounds

    return finished_bounds(verdict_call, inputs, call.finish, outputs)


def _compared_all(operator, outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray], tolerance,
                  verdict_call, bounds: _Bounds | None = None) -> tuple[str, bool]:
    """Every expected output against the output in its place, each by the operator's rule for its type (a
    case's own tolerance where it gives one) with its sum bound (from `bounds`). One expected tensor checks the
    first output (a case written before outputs were lists); a list must have one tensor per output."""
    from ..checking.comparison import rule_for, with_bound
    from ..data_types import as_bits

    if len(expected) > 1 and len(expected) != len(outputs):
        return (f"FAILED: {operator.name} gave {len(outputs)} outputs but the case expects {len(expected)}", False)
    reports, passed = [], True
    for index, (got, want) in enumerate(zip(outputs, expected)):
        rule = tolerance or rule_for(operator, got.dtype, None, verdict_call.parameters, verdict_call)
        if (tolerance is None and bounds is not None and got.dtype == want.dtype and got.shape == want.shape
                and not np.array_equal(as_bits(got), as_bits(want))):
            rule = with_bound(rule, bounds.of(index))
        report, same = _compared(got, want, rule)
        if len(expected) > 1:
            verdict, _, rest = report.partition(": ")
            report = f"{verdict}: output {index + 1} of {len(expected)}: {rest}"
        if not same and passed:
            reports.insert(0, report)  # the first failing output's line is the case's message
        else:
            reports.append(report)
        passed = passed and same
    return "\n".join(reports), passed


def _compared(output: np.ndarray, expected: np.ndarray, rule) -> tuple[str, bool]:
    """--check's comparison; identical bits pass at once: the common case of a golden suite, where measuring
    the ULP and absolute errors would cost more than running the operator."""
    from ..checking.comparison import compare
    from ..data_types import as_bits

    if (output.dtype == expected.dtype and output.shape == expected.shape
            and np.array_equal(as_bits(output), as_bits(expected))):
        return f"PASSED: all {output.size} elements match {rule.describe()}", True
    return compare(output, expected, rule)


def _cross_checks(case: Case, call: Invocation, backends: Sequence[str], outputs) -> list[CaseResult]:
    from .parity import backends_agree

    operator = call.operator
    first = backends[0]
    by_backend = dict(outputs)
    results = []
    for other in backends[1:]:
        name = f"{first}{CROSS}{other}"
        base = dict(case_id=case.case_id, file=str(case.path), op=call.label, backend=name)
        if first not in by_backend or other not in by_backend:
            if case.expect_error is None:
                results.append(CaseResult(**base, verdict=SKIPPED, message="not both backends gave a result"))
            continue
        references, verdict_call, inputs = by_backend[first]
        started = time.perf_counter()
        reports, same = [], True
        bounds = _Bounds(call, verdict_call, inputs, references)
        for index, (got, reference) in enumerate(zip(by_backend[other][0], references)):
            report, agree = backends_agree(operator, got, reference, verdict_call.parameters, inputs, verdict_call,
                                           bound=lambda position=index: bounds.of(position))
            if len(references) > 1:
                verdict, _, rest = report.partition(": ")
                report = f"{verdict}: output {index + 1} of {len(references)}: {rest}"
            if not agree and same:
                reports.insert(0, report)  # the first differing output's line is the message
            else:
                reports.append(report)
            same = same and agree
        report = "\n".join(reports)
        elapsed = time.perf_counter() - started
        message = "" if same else f"{other} differs from {first}: " + report.splitlines()[0].removeprefix("FAILED: ")
        results.append(CaseResult(**base, verdict=PASSED if same else FAILED, message=message, differences=report,
                                  time=elapsed, timings={"compare": elapsed}))
    return results


def run_case(case_or_path, backend: str = "cpu", *, feature_level=None, float_rules=None,
             allow_tf32=None) -> CaseResult:
    """One case (a Case, or a case file's path) on one backend ("cpu", "gpu" or "auto")."""
    settings = Settings(feature_level=feature_level, float_rules=float_rules, allow_tf32=_tf32_setting(allow_tf32))
    names, _ = resolve_backends(backend)
    if isinstance(case_or_path, Case):
        return run_loaded(case_or_path, names[:1], settings)[0]
    path = Path(case_or_path)
    if not path.is_file():
        raise InputError(f"case {quoted(case_or_path)}: no such file")
    return run_file(path, case_id_for(path, None), names[:1], settings)[1][0]


def _tf32_setting(value) -> bool:
    """allow_tf32 for every case that sets none: True or False (None: False), checked as the API checks it."""
    if value is None or isinstance(value, bool):
        return bool(value)
    raise InputError(f"allow_tf32 must be True or False (found {quoted(repr(value))})")


# ---------------------------------------------------------------- a suite


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _run_chunk(items: Sequence[tuple[Path, str]], backends: Sequence[str], settings: Settings):
    """A worker's task: several case files, so that the per-task cost is spread over them."""
    from .select import matcher

    selected = matcher(settings.keyword)
    return [run_file(path, case_id, backends, settings, selected) for path, case_id in items]


def _chunks(items: list, jobs: int) -> list[list]:
    # About four tasks per worker: few enough that a task's cost is small, enough to even out slow cases.
    size = max(1, -(-len(items) // (jobs * 4)))
    return [items[i:i + size] for i in range(0, len(items), size)]


def _failed(results: list[CaseResult]) -> bool:
    return any(r.verdict in (FAILED, ERROR) for r in results)


def _pool_context(backends: Sequence[str]):
    # CUDA does not survive fork: with the GPU, workers start fresh. Without it fork is the cheap start.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "gpu" not in backends and "fork" in methods else "spawn")


def run_suite(paths: Sequence[str | Path], *, backend: str = "cpu", keyword: str | None = None,
              jobs: int | None = None, feature_level=None, float_rules=None, allow_tf32=None, stop_first: bool = False,
              on_progress: Callable[[int, int, list[CaseResult]], None] | None = None) -> SuiteRun:
    """Run every case file under `paths`. `on_progress(done_files, total_files, new_results)` after each piece."""
    from ..backends.float_rules import parse_float_rules
    from ..feature_levels import parse_feature_level
    from .select import matcher

    matcher(keyword)  # a malformed -k is a usage error before anything runs
    settings = Settings(None if feature_level is None else parse_feature_level(feature_level).short,
                        None if float_rules is None else parse_float_rules(float_rules), keyword,
                        _tf32_setting(allow_tf32))
    names, unavailable = resolve_backends(backend)
    items = discover(paths)
    if not items:
        raise InputError(f"no case files (*.json) found in {', '.join(quoted(p) for p in paths)}")
    started_at = datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "")
    started = time.perf_counter()
    jobs = max(1, min(jobs or default_jobs(), len(items)))
    by_file: dict[tuple[Path, str], tuple[bool, list[CaseResult]]] = {}
    progress = on_progress or (lambda done, total, new: None)
    if jobs == 1:
        selected = matcher(keyword)
        for item in items:
            by_file[item] = run_file(item[0], item[1], names, settings, selected)
            progress(len(by_file), len(items), by_file[item][1])
            if stop_first and _failed(by_file[item][1]):
                break
    else:
        _run_in_pool(items, names, settings, jobs, stop_first, by_file, progress)
    run = _assemble(items, by_file, names, unavailable, stop_first)
    run.duration, run.started, run.jobs, run.settings = time.perf_counter() - started, started_at, jobs, settings
    return run


def _warm_up(names: Sequence[str]) -> None:
    """Import what every case needs before the workers fork, so that each does not import it again."""
    from .. import engine  # noqa: F401
    from ..checking.comparison import compare  # noqa: F401
    from ..io import json_tensor, npy  # noqa: F401
    from ..operators import OPERATORS  # noqa: F401

    if "cpu" in names:
        _backend("cpu")


def _run_in_pool(items, names, settings, jobs, stop_first, by_file, progress) -> None:
    chunks = _chunks(items, jobs)
    _warm_up(names)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=_pool_context(names), initializer=_share_memory,
                             initargs=(jobs,)) as pool:
        futures = {pool.submit(_run_chunk, chunk, names, settings): chunk for chunk in chunks}
        try:
            for future in as_completed(futures):
                new = _collect(future, futures[future], names, by_file)
                progress(len(by_file), len(items), new)
                if stop_first and _failed(new):
                    break
        finally:
            # -x: the chunks not started are dropped; those started (all that come before, in file order, since
            # workers take chunks in order) are finished, so the first failure in file order is always found.
            for future in futures:
                future.cancel()
            for future, chunk in futures.items():
                if not future.cancelled() and chunk[0] not in by_file:
                    _collect(future, chunk, names, by_file)


def _share_memory(jobs: int) -> None:
    """A worker's start: its room checks count on its share of the memory, the others running beside it."""
    from ..io.room import share_memory

    share_memory(jobs)


def _collect(future, chunk, names, by_file) -> list[CaseResult]:
    try:
        outcomes = future.result()
    except Exception as error:  # noqa: BLE001 - a worker that died (killed, out of memory)
        reason = f"the worker process running this case failed: {type(error).__name__}: {error}"
        outcomes = [(True, _all(names, case_id, path, "(unknown)", ERROR, reason, 0.0)) for path, case_id in chunk]
    new = []
    for item, outcome in zip(chunk, outcomes):
        by_file[item] = outcome
        new += outcome[1]
    return new


def _assemble(items, by_file, names, unavailable, stop_first) -> SuiteRun:
    """Results in the order of the files (sorted), whatever order the workers finished in; with -x, up to the
    first failing case in that order."""
    results: list[CaseResult] = []
    deselected = not_run = 0
    stopped = False
    for item in items:
        if stopped or item not in by_file:
            not_run += 1
            continue
        selected, outcome = by_file[item]
        if not selected:
            deselected += 1
            continue
        results += outcome
        stopped = stop_first and _failed(outcome)
    return SuiteRun(results, names, unavailable, len(items), deselected, not_run)
