"""The resampling family: UPSAMPLE_2D, RESAMPLE, RESAMPLE1, VALUE_SCALE_2D (entries.py).
"""
