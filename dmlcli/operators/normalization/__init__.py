"""The normalization family: batch, mean-variance, local response and Lp normalization (entries.py).
"""
