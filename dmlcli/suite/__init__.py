"""Test suites: folders of case files run the way pytest runs tests (`dmlcli test`, `dmlcli.run_case`).

case.py reads and checks case files; select.py is -k; runner.py runs cases through the engine (in
worker processes); parity.py compares backends; junit.py and report.py write JUnit XML and JSON;
save.py writes a run as a case (--save-case). The screen's summary of a run is the command line's
(cli/suite_summary.py).
"""

from .case import Case, CaseError, discover, load_case
from .runner import CaseResult, SuiteRun, run_case, run_suite

__all__ = ["Case", "CaseError", "CaseResult", "SuiteRun", "discover", "load_case", "run_case", "run_suite"]
