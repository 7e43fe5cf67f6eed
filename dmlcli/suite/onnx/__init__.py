"""ONNX node tests (../shared/onnx_operators) run as DirectML calls: table.py maps each ONNX operator onto the
DirectML operator that computes it, adapters.py builds each call, mapping.py plans a case (or says, with a
DirectML reason, why it is skipped)."""

from .mapping import Planned, Skipped, plan
from .table import ENTRIES, TABLE, Entry

__all__ = ["ENTRIES", "TABLE", "Entry", "Planned", "Skipped", "plan"]
