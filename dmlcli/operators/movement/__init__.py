"""The data movement family: JOIN, SPLIT, SLICE, PADDING, TILE, the depth/space operators, REVERSE_SUBSEQUENCES (entries.py), and the
family's own CUDA kernels (gpu.py).
"""
