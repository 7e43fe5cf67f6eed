"""The indexing family: GATHER, SCATTER and their ND and ELEMENTS forms, ONE_HOT, TOP_K, NONZERO_COORDINATES (entries.py).
"""
