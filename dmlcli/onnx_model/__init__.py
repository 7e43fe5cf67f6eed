"""ONNX models run as ONNX Runtime's DirectML provider runs them, on dmlcli's DirectML operators (`dmlcli onnx`).

Each node goes through the suite runner's ONNX table (dmlcli/suite/onnx/table.py), the one mapping of ONNX
operators onto DirectML's that `dmlcli test` uses too: the DirectML operator, its fields and what is done outside
it. The graph's plumbing is folded or run as views, as that provider does. Modules, bottom up: loading (the model
file, memory-mapped external data), graph (nodes, shape inference), executors (CPU through the engine, GPU with
device-resident tensors), reference (constant folding; ONNX Runtime's CPU provider for --fallback cpu and
--compare ort), planned (a node's call worked out once for its inputs' Sizes), steps (what runs for each node),
session (OnnxSession: plans and runs), compare (--compare ort), files (inputs, outputs, --check and --report of
the command line).
"""

from .session import OnnxSession

__all__ = ["OnnxSession"]
