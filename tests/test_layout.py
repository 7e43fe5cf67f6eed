"""The package's layering, as docs/layout.md draws it: imports only go down.

Each module of dmlcli is given a layer (the basics at 0, the command line at the top); a module may import
only modules of its own layer or below, whether it imports them at the top or inside a function. The
lists below are docs/layout.md's, so that a module moved or added without a place in them fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dmlcli"

# Lowest first. A module's layer is that of the longest prefix listed (dmlcli.operators.reduction: operators).
LAYERS = [
    ["dmlcli.errors", "dmlcli.records", "dmlcli.data_types", "dmlcli.feature_levels", "dmlcli.version",
     "dmlcli.versions", "dmlcli.scalars"],
    # The operator table, bottom up: what an entry is; what kernels share; the element-wise families (the shaped ones
    # fuse their activations); the shaped families; the lookup of the whole table.
    ["dmlcli.operators.table"],
    ["dmlcli.operators.numerics"],
    ["dmlcli.operators.elementwise", "dmlcli.operators.quantization"],
    ["dmlcli.operators.reduction", "dmlcli.operators.movement", "dmlcli.operators.indexing", "dmlcli.operators.pooling",
     "dmlcli.operators.generation", "dmlcli.operators.convolution", "dmlcli.operators.matmul",
     "dmlcli.operators.recurrent", "dmlcli.operators.normalization", "dmlcli.operators.resampling"],
    ["dmlcli.operators.attention", "dmlcli.operators.training"],  # built on the shaped families' rules and kernels
    ["dmlcli.operators"],
    ["dmlcli.io", "dmlcli.backends"],
    ["dmlcli.calls"],
    ["dmlcli.checking", "dmlcli.distributed"],
    ["dmlcli.engine"],
    # DxDispatch models, bottom up (docs/layout.md: dispatch/), then the package's face beside the test suites.
    ["dmlcli.dispatch.jsonc", "dmlcli.dispatch.files", "dmlcli.dispatch.memory"],
    ["dmlcli.dispatch.fields", "dmlcli.dispatch.images", "dmlcli.dispatch.onnx"],
    ["dmlcli.dispatch.dispatchable"],
    ["dmlcli.dispatch.binding"],
    ["dmlcli.dispatch.serialized_graph"],
    ["dmlcli.dispatch.model"],
    ["dmlcli.dispatch.plan", "dmlcli.dispatch.printing"],
    ["dmlcli.dispatch.run"],
    ["dmlcli.dispatch", "dmlcli.suite"],
    ["dmlcli.onnx_model"],  # whole ONNX models on the suite's ONNX table and the engine
    # ONNX's operator names for the command line and the API, read from the suite's ONNX table.
    ["dmlcli.onnx_spellings"],
    ["dmlcli.api", "dmlcli.dask"],
    ["dmlcli.display"],
    # The generated documentation (docs/reference/) prints what the command line prints.
    ["dmlcli.cli", "dmlcli.__main__", "dmlcli.docs"],
]
# The package's own __init__ names the API lazily (PEP 562): it sits above everything it names.
TOP = "dmlcli"


def layer_of(module: str) -> int:
    if module == TOP:
        return len(LAYERS)
    best, found = -1, None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    assert found is not None, f"{module} has no place in the layout (docs/layout.md, tests/test_layout.py)"
    return found


def module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path, module: str):
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("dmlcli"):
                continue
            if node.module is None or target in ("dmlcli",):
                # `from . import streaming` names modules: each is the import
                for alias in node.names:
                    yield f"{target}.{alias.name}", node.lineno
            else:
                yield target, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dmlcli"):
                    yield alias.name, node.lineno


def test_every_module_has_a_place_and_imports_only_downwards():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_of(path)
        own = layer_of(module)
        for target, line in imported(path, module):
            if target == TOP:
                wrong.append(f"{module}:{line} imports the package dmlcli itself (import the module it needs)")
                continue
            if layer_of(target) > own:
                wrong.append(f"{module}:{line} imports {target}, a layer above it")
    assert not wrong, "\n".join(wrong)
