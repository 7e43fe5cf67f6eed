"""The conversion and generation families: CAST, FILL_VALUE_CONSTANT, FILL_VALUE_SEQUENCE, DIAGONAL_MATRIX (entries.py).
"""
