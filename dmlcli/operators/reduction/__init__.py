"""The reduction family: REDUCE, ARGMIN/ARGMAX, the axis-wise activations (softmax, log-softmax, hardmax), the
cumulative operators (entries.py), and the family's own CUDA kernels (gpu.py).
"""
