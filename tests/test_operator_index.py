"""The declared index (dmlcli/operators/index.py) against the whole table, and what lazy loading buys."""

from __future__ import annotations

import subprocess
import sys

import dmlcli
from dmlcli import operators
from dmlcli.operators import regenerate
from dmlcli.operators.table import index


def test_the_index_is_what_the_table_generates():
    modules = regenerate.family_modules()
    assert index.SPELLINGS == regenerate.spelling_index(modules), "regenerate: python -m dmlcli.operators.regenerate"
    assert index.OPTIONS == regenerate.option_index(modules), "regenerate: python -m dmlcli.operators.regenerate"


def test_every_operator_is_found_through_the_index_by_each_spelling():
    for op in operators.OPERATORS:
        for spelling in (op.dml_name, op.cli_name, op.cli_name.upper(), op.key):
            assert dmlcli.find_operator(spelling) is op, spelling


def test_a_run_imports_only_its_family_module():
    code = ("import sys; from dmlcli.cli import main\n"
            "try:\n    main(['run', 'bit_xor', '[1,2]', '[3,4]', '--dtype', 'uint8', '-o', '-'])\n"
            "except SystemExit:\n    pass\n"
            "loaded = sorted(m.removeprefix('dmlcli.operators.') for m in sys.modules if m.startswith('dmlcli.operators.'))\n"
            "print(loaded, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = eval(result.stderr.strip().splitlines()[-1])  # noqa: S307 - our own printed list
    families = {module for _, names in index.FAMILY_MODULES for module in names}
    assert "elementwise.bitwise" in loaded
    assert not (families - {"elementwise.bitwise"}) & set(loaded), loaded


def test_options_owners_resolve_to_the_parameter():
    for option, (key, module) in index.OPTIONS.items():
        assert option in dmlcli.find_operator(key).options
