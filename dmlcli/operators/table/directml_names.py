"""DirectML.h's other names for an operator: each alias stands for the operator it names (the same
DML_OPERATOR_TYPE value). Transcribed from microsoft/DirectX-Headers include/directx/DirectML.h at
DML_TARGET_VERSION 0x6400, whose every DML_OPERATOR_TYPE dmlcli's table holds (tests/test_directml_enum.py).
"""

from __future__ import annotations

OPERATOR_ALIASES = {"SCATTER": "SCATTER_ELEMENTS"}
