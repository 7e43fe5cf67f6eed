"""The matrix multiplication family: GEMM and the integer and quantized matrix products (entries.py).
"""
