"""The element-wise families, one module each (bitwise, logical, comparison, arithmetic, selection, transcendental,
activation): each entry with its NumPy kernel and its CUDA body of one element.
"""
