"""What the kernels of several families share: float specials (NaN and zero tests), Direct3D's float-to-integer
conversions, ScaleBias, the optional compiled CPU loops, the CUDA prelude every GPU kernel starts with, and the
progress meter of long kernels (work.py), constant padding (padding.py).
"""
