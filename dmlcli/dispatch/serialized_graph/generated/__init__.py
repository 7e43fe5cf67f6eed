"""DirectML's serialized graph schema (DmlGraphDesc.fbs, OperatorFieldTypes.fbs: Copyright (c) Microsoft Corporation,
MIT License) and the Python that flatc generated from it (dml_graph_generated.py). Regenerate with
`python dmlcli/dispatch/serialized_graph/generated/regenerate.py --flatc PATH/TO/flatc` (its docstring says how).
"""
