"""The quantization family: linear.py holds QUANTIZE_LINEAR, DEQUANTIZE_LINEAR and QUANTIZED_LINEAR_ADD (element-wise).
"""
