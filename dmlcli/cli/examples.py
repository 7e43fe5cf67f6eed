"""One working call per operator, as `dmlcli run OP --help` shows it (and `validate OP --help`, with validate).

Each value is what follows `dmlcli run OPERATOR` on a command line: inline JSON tensors (single-quoted for the
shell), --dtype for bare lists, and the options that make the call mean something (a reduction's --function and
--axes, a convolution's --strides). Small on purpose: a reader can check the result by hand. Inputs of different
data types are written as typed JSON objects ({"dtype": "uint32", "data": [...]}), since --dtype names one type
for every bare list. tests/test_operator_help.py runs every one and holds the table to every operator.
"""

from __future__ import annotations

import re

# ---------------------------------------------------------------- element-wise

_BITWISE = {
    "bit_and": "'[12, 10, 255]' '[10, 6, 15]' --dtype uint8",
    "bit_or": "'[12, 10, 0]' '[10, 6, 15]' --dtype uint8",
    "bit_xor": "'[12, 10, 255]' '[10, 6, 15]' --dtype uint8",
    "bit_not": "'[0, 1, 254]' --dtype uint8",
    "bit_count": "'[0, 7, 255]' --dtype uint8",
    "bit_shift_left": "'[1, 3, 128]' '[1, 2, 1]' --dtype uint8",
    "bit_shift_right": "'[8, 12, 255]' '[1, 2, 4]' --dtype uint8",
}

_LOGICAL = {
    "logical_and": "'[0, 1, 1]' '[1, 1, 0]' --dtype uint8",
    "logical_or": "'[0, 1, 0]' '[0, 0, 1]' --dtype uint8",
    "logical_xor": "'[0, 1, 1]' '[1, 1, 0]' --dtype uint8",
    "logical_not": "'[0, 1, 7]' --dtype uint8",
}

_COMPARISON = {
    "is_infinity": "'[1, \"inf\", \"-inf\", \"nan\"]' --dtype float32 --infinity-mode positive",
    "is_nan": "'[1, \"nan\", \"inf\"]' --dtype float32",
    "logical_equals": "'[1, 2, 3]' '[3, 2, 1]' --dtype float32",
    "logical_greater_than": "'[1, 2, 3]' '[3, 2, 1]' --dtype float32",
    "logical_less_than": "'[1, 2, 3]' '[3, 2, 1]' --dtype float32 --output-dtype uint32",
    "logical_greater_than_or_equal": "'[1, 2, 3]' '[3, 2, 1]' --dtype int32",
    "logical_less_than_or_equal": "'[1, 2, 3]' '[3, 2, 1]' --dtype int32",
}

_ARITHMETIC = {
    "identity": "'[1.5, -2]' --dtype float32 --scale 2 --bias 1",
    "abs": "'[-1.5, 2, -0.0]' --dtype float32",
    "add": "'[1.5, 2]' '[0.25, -4]' --dtype float32",
    "subtract": "'[1.5, 2]' '[0.25, -4]' --dtype float32",
    "multiply": "'[1.5, 2]' '[0.25, -4]' --dtype float32",
    "divide": "'[1.5, 2]' '[0.25, -4]' --dtype float32",
    "mean": "'[1, 2]' '[4, 7]' --dtype float32",
    "difference_square": "'[1, 2]' '[4, 7]' --dtype float32",
    "modulus_floor": "'[7, -7, 7]' '[3, 3, -3]' --dtype int32",
    "modulus_truncate": "'[7, -7, 7]' '[3, 3, -3]' --dtype int32",
    "recip": "'[2, 4, -0.5]' --dtype float32",
    "sqrt": "'[4, 2, 0.25]' --dtype float32",
    "negate": "'[1.5, -2]' --dtype float32",
    "sign": "'[-3, 0, 2]' --dtype int32",
    "max": "'[1, 5]' '[3, 2]' --dtype float32",
    "min": "'[1, 5]' '[3, 2]' --dtype float32",
    "clip": "'[-2, 0.5, 3]' --dtype float32 --min 0 --max 1",
    "clip1": "'[-2, 5, 300]' --dtype int32 --min 0 --max 255",
    "threshold": "'[-2, 0.5, 3]' --dtype float32 --min 0",
    "clip_grad": "'[-2, 0.5, 3]' '[1, 1, 1]' --dtype float32 --min 0 --max 1",
    "clip_grad1": "'[-2, 5, 300]' '[1, 1, 1]' --dtype int32 --min 0 --max 255",
    "if": "'[1, 0, 1]' '[10, 20, 30]' '[1, 2, 3]' --dtype uint8",
    "ceil": "'[-1.5, 0.5, 2.25]' --dtype float32",
    "floor": "'[-1.5, 0.5, 2.25]' --dtype float32",
    "round": "'[0.5, 1.5, -2.5]' --dtype float32 --rounding-mode toward_zero",
}

_MATH = {
    "acos": "'[-1, 0, 0.5]' --dtype float32",
    "asin": "'[-1, 0, 0.5]' --dtype float32",
    "atan": "'[-1, 0, 0.5]' --dtype float32",
    "atan_yx": "'[1, -1]' '[1, 1]' --dtype float32",
    "cos": "'[0, 0.5, 1]' --dtype float32",
    "sin": "'[0, 0.5, 1]' --dtype float32",
    "tan": "'[0, 0.5, 1]' --dtype float32",
    "exp": "'[0, 0.5, 1]' --dtype float32",
    "log": "'[1, 2, 10]' --dtype float32",
    "erf": "'[-1, 0, 1]' --dtype float32",
    "sinh": "'[-1, 0, 1]' --dtype float32",
    "cosh": "'[-1, 0, 1]' --dtype float32",
    "tanh": "'[-1, 0, 1]' --dtype float32",
    "asinh": "'[-1, 0, 1]' --dtype float32",
    "acosh": "'[1, 2, 10]' --dtype float32",
    "atanh": "'[-0.5, 0, 0.5]' --dtype float32",
    "pow": "'[2, 3, 4]' '[2, 0.5, -1]' --dtype float32",
    "constant_pow": "'[2, 3, 4]' --dtype float32 --exponent 2",
}

_ACTIVATION_INPUT = "'[-2, -0.5, 0, 1.5]' --dtype float32"
_ACTIVATION = {
    "activation_elu": f"{_ACTIVATION_INPUT} --alpha 0.5",
    "activation_hard_sigmoid": f"{_ACTIVATION_INPUT} --alpha 0.2 --beta 0.5",
    "activation_identity": _ACTIVATION_INPUT,
    "activation_leaky_relu": f"{_ACTIVATION_INPUT} --alpha 0.1",
    "activation_linear": f"{_ACTIVATION_INPUT} --alpha 2 --beta 1",
    "activation_parameterized_relu": "'[-2, -1, 3]' '[0.1, 0.2, 0.3]' --dtype float32",
    "activation_parametric_softplus": f"{_ACTIVATION_INPUT} --alpha 2 --beta 0.5",
    "activation_relu": _ACTIVATION_INPUT,
    "activation_scaled_elu": _ACTIVATION_INPUT,
    "activation_scaled_tanh": f"{_ACTIVATION_INPUT} --alpha 1.7159 --beta 0.6667",
    "activation_sigmoid": _ACTIVATION_INPUT,
    "activation_softplus": f"{_ACTIVATION_INPUT} --steepness 2",
    "activation_softsign": _ACTIVATION_INPUT,
    "activation_tanh": _ACTIVATION_INPUT,
    "activation_thresholded_relu": f"{_ACTIVATION_INPUT} --alpha 1",
    "activation_shrink": f"{_ACTIVATION_INPUT} --threshold 1",
    "activation_celu": f"{_ACTIVATION_INPUT} --alpha 0.5",
    "activation_relu_grad": "'[-1, 0.5, 2]' '[1, 1, 1]' --dtype float32",
    "activation_gelu": _ACTIVATION_INPUT,
    "activation_swish": f"{_ACTIVATION_INPUT} --sigmoid-input-scale 1",
    "activation_hard_swish": _ACTIVATION_INPUT,
    "add1": "'[1, -2]' '[0.5, 0.5]' --dtype float32 --fused-activation leaky_relu --fused-alpha 0.1",
}

_U8 = '{"dtype": "uint8", "data": [10]}'
_F32_HALF = '{"dtype": "float32", "data": [0.5]}'
_QUANTIZATION_ELEMENTWISE = {
    "quantize_linear": f"'{{\"dtype\": \"float32\", \"data\": [0, 1.5, 300]}}' '{_F32_HALF}' '{_U8}' --broadcast",
    "dequantize_linear": f"'{{\"dtype\": \"uint8\", \"data\": [10, 12, 255]}}' '{_F32_HALF}' '{_U8}' --broadcast",
    "quantized_linear_add": (f"'{{\"dtype\": \"uint8\", \"data\": [12, 20]}}' '{_F32_HALF}' '{_U8}' "
                             f"'{{\"dtype\": \"uint8\", \"data\": [14, 10]}}' '{_F32_HALF}' '{_U8}' "
                             f"'{{\"dtype\": \"float32\", \"data\": [1]}}' '{_U8}'"),
}

# ---------------------------------------------------------------- shaped

_MATRIX_2X3 = "'[[1, 2, 3], [4, 5, 6]]'"
_IMAGE_1X1X4X4 = "'[[[[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]]]'"
_IMAGE_1X4X1X1 = "'[[[[1]], [[2]], [[3]], [[4]]]]'"
_POOLING = f"{_IMAGE_1X1X4X4} --dtype float32 --window-size 2,2 --strides 2,2"

_QUANTIZATION = {
    "dynamic_quantize_linear": "'[0, 1.5, -3, 10]' --dtype float32",
    "quantize": "'{\"dtype\": \"float32\", \"data\": [0, 1.5, 300]}' '{\"dtype\": \"float32\", \"data\": [0.5]}' "
                "'{\"dtype\": \"uint8\", \"data\": [10]}' --quantization-type scale_zero_point",
    "dequantize": "'{\"dtype\": \"uint8\", \"data\": [10, 12, 255]}' '{\"dtype\": \"float32\", \"data\": [0.5]}' "
                  "'{\"dtype\": \"uint8\", \"data\": [10]}' --quantization-type scale_zero_point",
}

_REDUCTION = {
    "reduce": f"{_MATRIX_2X3} --dtype float32 --function sum --axes 1",
    "argmin": f"{_MATRIX_2X3} --dtype float32 --axes 1",
    "argmax": f"{_MATRIX_2X3} --dtype float32 --axes 1 --output-dtype int64",
    "activation_softmax": f"{_MATRIX_2X3} --dtype float32",
    "activation_softmax1": f"{_MATRIX_2X3} --dtype float32 --axes 0",
    "activation_log_softmax": f"{_MATRIX_2X3} --dtype float32",
    "activation_log_softmax1": f"{_MATRIX_2X3} --dtype float32 --axes 0",
    "activation_hardmax": f"{_MATRIX_2X3} --dtype float32",
    "activation_hardmax1": f"{_MATRIX_2X3} --dtype float32 --axes 0",
    "cumulative_summation": f"{_MATRIX_2X3} --dtype float32 --axis 1",
    "cumulative_product": f"{_MATRIX_2X3} --dtype float32 --axis 1 --has-exclusive-product true",
}

_MOVEMENT = {
    "join": f"{_MATRIX_2X3} '[[7, 8, 9]]' --dtype float32 --axis 0",
    "split": f"{_MATRIX_2X3} --dtype float32 --axis 1 --output-sizes 1,2",
    "slice": f"{_MATRIX_2X3} --dtype float32 --offsets 0,1 --sizes 2,2 --strides 1,1",
    "slice1": f"{_MATRIX_2X3} --dtype float32 --input-window-offsets 0,0 --input-window-sizes 2,3 "
              "--input-window-strides 1,-1",
    "padding": f"{_MATRIX_2X3} --dtype float32 --start-padding 0,1 --end-padding 0,1 --padding-mode edge",
    "padding1": f"{_MATRIX_2X3} --dtype int32 --start-padding 1,0 --end-padding 0,0 --padding-value -1",
    "tile": f"{_MATRIX_2X3} --dtype float32 --repeats 2,1",
    "depth_to_space": f"{_IMAGE_1X4X1X1} --dtype float32 --block-size 2",
    "depth_to_space1": f"{_IMAGE_1X4X1X1} --dtype float32 --block-size 2 --order column_row_depth",
    "space_to_depth": "'[[[[1, 2], [3, 4]]]]' --dtype float32 --block-size 2",
    "space_to_depth1": "'[[[[1, 2], [3, 4]]]]' --dtype float32 --block-size 2 --order column_row_depth",
    "reverse_subsequences": "'{\"dtype\": \"float32\", \"data\": [[1, 2], [3, 4], [5, 6]]}' "
                            "'{\"dtype\": \"uint32\", \"data\": [[2, 3]]}' --axis 0",
    "fold": "'[[[1, 2], [3, 4], [5, 6], [7, 8]]]' --dtype float32 --window-sizes 2,2 --output-shape 1,1,2,3",
    "unfold": "'[[[[1, 2, 3], [4, 5, 6]]]]' --dtype float32 --window-sizes 2,2",
}

_I64 = "int64"
_INDEXING = {
    "gather": f"'{{\"dtype\": \"float32\", \"data\": [[1, 2], [3, 4], [5, 6]]}}' "
              f"'{{\"dtype\": \"{_I64}\", \"data\": [[2, 0]]}}' --axis 0",
    "gather_elements": f"'{{\"dtype\": \"float32\", \"data\": [[1, 2], [3, 4]]}}' "
                       f"'{{\"dtype\": \"{_I64}\", \"data\": [[1, 0], [0, 0]]}}' --axis 1",
    "gather_nd": f"'{{\"dtype\": \"float32\", \"data\": [[1, 2], [3, 4]]}}' "
                 f"'{{\"dtype\": \"{_I64}\", \"data\": [[1, 0], [0, 1]]}}'",
    "gather_nd1": f"'{{\"dtype\": \"float32\", \"data\": [[1, 2], [3, 4]]}}' "
                  f"'{{\"dtype\": \"{_I64}\", \"data\": [[1], [0]]}}' --batch-dimension-count 1",
    "scatter_elements": f"'{{\"dtype\": \"float32\", \"data\": [[0, 0, 0]]}}' "
                        f"'{{\"dtype\": \"{_I64}\", \"data\": [[2, 0]]}}' "
                        "'{\"dtype\": \"float32\", \"data\": [[5, 7]]}' --axis 1",
    "scatter_nd": f"'{{\"dtype\": \"float32\", \"data\": [[0, 0], [0, 0]]}}' "
                  f"'{{\"dtype\": \"{_I64}\", \"data\": [[1, 0], [0, 1]]}}' "
                  "'{\"dtype\": \"float32\", \"data\": [[9, 8]]}'",
    "one_hot": f"'{{\"dtype\": \"{_I64}\", \"data\": [[0], [2]]}}' "
               "'{\"dtype\": \"float32\", \"data\": [[0, 1]]}' --axis 1 --output-shape 2,3",
    "top_k": "'[[3, 1, 2, 5]]' --dtype float32 --axis 1 --k 2",
    "top_k1": "'[[3, 1, 2, 5]]' --dtype float32 --axis 1 --k 2 --axis-direction increasing",
    "nonzero_coordinates": "'[[0, 1], [2, 0]]' --dtype float32",
}

# A 2x2 image, one region over the whole of it (x1, y1, x2, y2) in image 0.
_ROI_ALIGN_INPUTS = ("'{\"dtype\": \"float32\", \"data\": [[[[1, 2], [3, 4]]]]}' "
                     "'{\"dtype\": \"float32\", \"data\": [[0, 0, 1, 1]]}' '{\"dtype\": \"uint32\", \"data\": [0]}'")
_POOLING_FAMILY = {
    "average_pooling": _POOLING,
    "average_pooling1": f"{_IMAGE_1X1X4X4} --dtype float32 --window-size 2,2 --dilations 2,2",
    "lp_pooling": f"{_POOLING} --p 2",
    "lp_pooling1": f"{_POOLING} --p 1 --dilations 1,1",
    "max_pooling": _POOLING,
    "max_pooling1": _POOLING,
    "max_pooling2": f"{_IMAGE_1X1X4X4} --dtype float32 --window-size 2,2 --dilations 2,2",
    "max_unpooling": "'{\"dtype\": \"float32\", \"data\": [[[[5, 7]]]]}' "
                     "'{\"dtype\": \"uint32\", \"data\": [[[[1, 2]]]]}' --output-shape 1,1,2,2",
    "roi_pooling": f"'{{\"dtype\": \"float32\", \"data\": {_IMAGE_1X1X4X4[1:-1]}}}' "
                   "'{\"dtype\": \"float32\", \"data\": [[[[0, 0, 0, 3, 3]]]]}' --pooled-size 2,2",
    "roi_align": f"{_ROI_ALIGN_INPUTS} --output-shape 1,1,2,2",
    "roi_align1": f"{_ROI_ALIGN_INPUTS} --output-shape 1,1,2,2 --reduction-function max",
    "quantized_linear_average_pooling": f"'{{\"dtype\": \"uint8\", \"data\": {_IMAGE_1X1X4X4[1:-1]}}}' "
                                        f"'{_F32_HALF}' '{_U8}' '{_F32_HALF}' '{_U8}' "
                                        "--window-size 2,2 --strides 2,2",
}

_GENERATION = {
    "cast": "'[1.5, -2.5, 300]' --dtype float32 --output-dtype int8",
    "fill_value_constant": "--output-shape 2,3 --output-dtype int32 --value 7",
    "fill_value_sequence": "--output-shape 2,3 --output-dtype int32 --value-start 5 --value-delta -1",
    "diagonal_matrix": "--output-shape 3,3 --offset 1 --value 2",
    "diagonal_matrix1": "--output-shape 3,4 --diagonal-fill-begin -1 --diagonal-fill-end 1",
    "random_generator": "'[[[[1, 2, 3, 4, 5, 6]]]]' --dtype uint32 --output-shape 1,1,1,4",
}

_CONVOLUTION = {
    "convolution": "'[[[[1, 2, 3], [4, 5, 6], [7, 8, 9]]]]' '[[[[1, 0], [0, 2]]]]' '[[[[0.5]]]]' --dtype float32 "
                   "--fused-activation relu",
    "convolution_integer": f"{_IMAGE_1X1X4X4} '[1]' '[[[[1, 0], [0, 2]]]]' '[0]' --dtype uint8 --strides 2,2",
    "quantized_linear_convolution": f"'{{\"dtype\": \"uint8\", \"data\": {_IMAGE_1X1X4X4[1:-1]}}}' "
                                    f"'{_F32_HALF}' '{_U8}' '{{\"dtype\": \"uint8\", \"data\": [[[[1, 0], [0, 2]]]]}}' "
                                    f"'{_F32_HALF}' '{{\"dtype\": \"uint8\", \"data\": [0]}}' "
                                    "'{\"dtype\": \"int32\", \"data\": [[[[4]]]]}' "
                                    f"'{{\"dtype\": \"float32\", \"data\": [1]}}' '{_U8}' --strides 2,2",
}

_MATMUL = {
    "gemm": f"{_MATRIX_2X3} '[[1, 0], [0, 1], [1, 1]]' --dtype float32 --alpha 2",
    "matrix_multiply_integer": "'[[1, 2, 3], [4, 5, 6]]' '[1]' '[[1, 0], [0, 1], [1, 1]]' '[0]' --dtype uint8",
    "matrix_multiply_integer_to_float": "'{\"dtype\": \"int8\", \"data\": [[1, 2, 3], [4, 5, 6]]}' "
                                        f"'{_F32_HALF}' "
                                        "'{\"dtype\": \"int8\", \"data\": [[1, 0], [0, 1], [1, 1]]}' "
                                        "'{\"dtype\": \"float32\", \"data\": [2]}'",
    "quantized_linear_matrix_multiply": "'{\"dtype\": \"uint8\", \"data\": [[1, 2, 3], [4, 5, 6]]}' "
                                        f"'{_F32_HALF}' '{{\"dtype\": \"uint8\", \"data\": [0]}}' "
                                        "'{\"dtype\": \"uint8\", \"data\": [[1, 0], [0, 1], [1, 1]]}' "
                                        f"'{_F32_HALF}' '{{\"dtype\": \"uint8\", \"data\": [0]}}' "
                                        f"'{_F32_HALF}' '{_U8}'",
}

# Recurrent: one step of a batch of one, input size 2, hidden size 1: {1, 1, 1, 2} input, {1, 1, gates, 2}
# weights, {1, 1, gates, 1} recurrence.
_RECURRENT = {
    "rnn": "'[[[[1, 2]]]]' '[[[[0.5, -0.5]]]]' '[[[[1]]]]' --dtype float32",
    "lstm": "'[[[[1, 2]]]]' '[[[[0.5, -0.5], [1, 1], [0, 1], [1, 0]]]]' '[[[[1], [1], [1], [1]]]]' --dtype float32",
    "gru": "'[[[[1, 2]]]]' '[[[[0.5, -0.5], [1, 1], [0, 1]]]]' '[[[[1], [1], [1]]]]' --dtype float32",
}

_CHANNEL_4 = "'[[[[1]], [[2]], [[3]], [[4]]]]'"
_NORMALIZATION = {
    "batch_normalization": "'[[[[1, 2]], [[3, 4]]]]' '[[[[1.5]], [[3.5]]]]' '[[[[0.25]], [[0.25]]]]' "
                           "'[[[[1]], [[2]]]]' '[[[[0]], [[1]]]]' --dtype float32",
    "mean_variance_normalization": "'[[[[1, 2], [3, 4]]]]' --dtype float32",
    "mean_variance_normalization1": f"{_MATRIX_2X3} --dtype float32 --axes 1",
    "mean_variance_normalization2": f"{_MATRIX_2X3} --dtype float32 --axes 1 --use-mean false",
    "local_response_normalization": f"{_CHANNEL_4} --dtype float32 --cross-channel true --local-size 3",
    "lp_normalization": f"{_MATRIX_2X3} --dtype float32 --axis 1 --p 1",
}

_RESAMPLING = {
    "upsample_2d": "'[[[[1, 2], [3, 4]]]]' --dtype float32 --scale-size 2,2 --interpolation-mode linear",
    "resample": "'[[[[1, 2], [3, 4]]]]' --dtype float32 --scales 1,1,2,2",
    "resample1": "'[[[[1, 2], [3, 4]]]]' --dtype float32 --scales 1,1,2,2 --interpolation-mode linear",
    "resample2": "'[[[[1, 2], [3, 4]]]]' --dtype float32 --scales 1,1,1.5,1.5 --rounding-direction increasing",
    "resample3": f"{_IMAGE_1X1X4X4} --dtype float32 --scales 1,1,0.5,0.5 --interpolation-mode linear "
                 "--antialiased true",
    "value_scale_2d": "'[[[[1, 2]], [[3, 4]], [[5, 6]]]]' --dtype float32 --scale 2 --bias 1,0,-1",
}

# Attention: a batch of one, two query and two key positions, one head of size 2 ({batch, sequence, hidden}).
_ATTENTION_QKV = "'[[[1, 0], [0, 1]]]' '[[[1, 0], [0, 1]]]' '[[[1, 2], [3, 4]]]'"
_ATTENTION = {
    "multihead_attention": f"{_ATTENTION_QKV} --dtype float32 --head-count 1 --scale 1",
    "multihead_attention1": f"{_ATTENTION_QKV} --dtype float32 --query-head-count 1 --key-value-head-count 1",
}

_TRAINING = {
    "batch_normalization_training": "'[[[[1, 2]], [[3, 5]]]]' '[[[[1]], [[2]]]]' '[[[[0]], [[1]]]]' --dtype float32",
    "batch_normalization_grad": "'[[[[1, 2]], [[3, 5]]]]' '[[[[1, -1]], [[1, 1]]]]' '[[[[1.5]], [[4]]]]' "
                                "'[[[[0.25]], [[1]]]]' '[[[[1]], [[2]]]]' --dtype float32",
    "batch_normalization_training_grad": "'[[[[1, 2]], [[3, 5]]]]' '[[[[1, -1]], [[1, 1]]]]' '[[[[1.5]], [[4]]]]' "
                                         "'[[[[0.25]], [[1]]]]' '[[[[1]], [[2]]]]' --dtype float32",
    "local_response_normalization_grad": f"{_CHANNEL_4} '[[[[1]], [[1]], [[1]], [[1]]]]' --dtype float32 "
                                         "--cross-channel true --local-size 3",
    "adam_optimizer": "'{\"dtype\": \"float32\", \"data\": [[[[1, 2]]]]}' "
                      "'{\"dtype\": \"float32\", \"data\": [[[[0, 0]]]]}' "
                      "'{\"dtype\": \"float32\", \"data\": [[[[0, 0]]]]}' "
                      "'{\"dtype\": \"float32\", \"data\": [[[[0.5, -0.5]]]]}' "
                      "'{\"dtype\": \"uint32\", \"data\": [[[[1]]]]}' --learning-rate 0.1",
    "average_pooling_grad": "'[[[[1, 2], [3, 4]]]]' --dtype float32 --window-size 2,2 --strides 2,2 "
                            "--output-shape 1,1,4,4",
    "max_pooling_grad": f"{_IMAGE_1X1X4X4} '[[[[1, 2], [3, 4]]]]' --dtype float32 --window-size 2,2 --strides 2,2",
    "resample_grad": "'[[[[1, 2, 3, 4], [5, 6, 7, 8]]]]' --dtype float32 --scales 1,1,2,2 --output-shape 1,1,1,2",
    "resample_grad1": "'[[[[1, 2, 3, 4], [5, 6, 7, 8]]]]' --dtype float32 --scales 1,1,2,2 --output-shape 1,1,1,2",
    "slice_grad": "'[[1, 2]]' --dtype float32 --input-window-offsets 1,1 --input-window-sizes 1,2 "
                  "--output-shape 2,3",
    "roi_align_grad": "'{\"dtype\": \"float32\", \"data\": [[[[1, 2], [3, 4]]]]}' "
                      "'{\"dtype\": \"float32\", \"data\": [[0, 0, 3, 3]]}' '{\"dtype\": \"uint32\", \"data\": [0]}' "
                      "--output-shape 1,1,4,4",
}

EXAMPLES: dict[str, str] = {
    **_BITWISE, **_LOGICAL, **_COMPARISON, **_ARITHMETIC, **_MATH, **_ACTIVATION, **_QUANTIZATION_ELEMENTWISE,
    **_QUANTIZATION, **_REDUCTION, **_MOVEMENT, **_INDEXING, **_POOLING_FAMILY, **_GENERATION, **_CONVOLUTION,
    **_MATMUL, **_RECURRENT, **_NORMALIZATION, **_RESAMPLING, **_ATTENTION, **_TRAINING,
}

# A shell word: runs of single-quoted text (which may hold blanks) and other non-blank characters.
_SHELL_WORD = re.compile(r"(?:'[^']*'|\S)+")


def example_words(operator_name: str) -> list[str] | None:
    """The example's arguments after the operator's name, each a shell word as it is typed (quotes kept); None
    where the operator has none (one added at run time, by register_family)."""
    text = EXAMPLES.get(operator_name)
    return None if text is None else _SHELL_WORD.findall(text)
