"""The pooling family: average, Lp and max pooling, unpooling and the ROI operators (entries.py), and the family's
own CUDA kernels (gpu.py).
"""
