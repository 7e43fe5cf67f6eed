"""ONNX operator names and the DirectML element-wise operators they map to, to answer `dmlcli run Xor`
with the operator to use instead of "unknown operator".

Only a suggestion: a name dmlcli accepts today (Add, Abs, Relu, Sigmoid, ...) keeps its meaning, since
find_operator looks these up only after every DirectML spelling failed. ONNX's operator list
(onnx/docs/Operators.md) against DirectML.h's element-wise operators; where ONNX has one operator with
an attribute that DirectML splits (BitShift's direction, Mod's fmod, Clip's opset), all are named.
"""

from __future__ import annotations

# ONNX name -> DirectML operator names (as the table spells them, without DML_OPERATOR_).
ONNX_TO_DIRECTML: dict[str, tuple[str, ...]] = {
    "Abs": ("ELEMENT_WISE_ABS",),
    "Acos": ("ELEMENT_WISE_ACOS",),
    "Acosh": ("ELEMENT_WISE_ACOSH",),
    "Add": ("ELEMENT_WISE_ADD",),
    "And": ("ELEMENT_WISE_LOGICAL_AND",),
    "Asin": ("ELEMENT_WISE_ASIN",),
    "Asinh": ("ELEMENT_WISE_ASINH",),
    "Atan": ("ELEMENT_WISE_ATAN",),
    "Atanh": ("ELEMENT_WISE_ATANH",),
    "BitShift": ("ELEMENT_WISE_BIT_SHIFT_LEFT", "ELEMENT_WISE_BIT_SHIFT_RIGHT"),
    "BitwiseAnd": ("ELEMENT_WISE_BIT_AND",),
    "BitwiseNot": ("ELEMENT_WISE_BIT_NOT",),
    "BitwiseOr": ("ELEMENT_WISE_BIT_OR",),
    "BitwiseXor": ("ELEMENT_WISE_BIT_XOR",),
    "Ceil": ("ELEMENT_WISE_CEIL",),
    "Celu": ("ACTIVATION_CELU",),
    "Clip": ("ELEMENT_WISE_CLIP", "ELEMENT_WISE_CLIP1"),
    "Cos": ("ELEMENT_WISE_COS",),
    "Cosh": ("ELEMENT_WISE_COSH",),
    "DequantizeLinear": ("ELEMENT_WISE_DEQUANTIZE_LINEAR",),
    "Div": ("ELEMENT_WISE_DIVIDE",),
    "Elu": ("ACTIVATION_ELU",),
    "Equal": ("ELEMENT_WISE_LOGICAL_EQUALS",),
    "Erf": ("ELEMENT_WISE_ERF",),
    "Exp": ("ELEMENT_WISE_EXP",),
    "Floor": ("ELEMENT_WISE_FLOOR",),
    "Gelu": ("ACTIVATION_GELU",),
    "Greater": ("ELEMENT_WISE_LOGICAL_GREATER_THAN",),
    "GreaterOrEqual": ("ELEMENT_WISE_LOGICAL_GREATER_THAN_OR_EQUAL",),
    "HardSigmoid": ("ACTIVATION_HARD_SIGMOID",),
    "HardSwish": ("ACTIVATION_HARD_SWISH",),
    "Identity": ("ELEMENT_WISE_IDENTITY",),
    "IsInf": ("ELEMENT_WISE_IS_INFINITY",),
    "IsNaN": ("ELEMENT_WISE_IS_NAN",),
    "LeakyRelu": ("ACTIVATION_LEAKY_RELU",),
    "Less": ("ELEMENT_WISE_LOGICAL_LESS_THAN",),
    "LessOrEqual": ("ELEMENT_WISE_LOGICAL_LESS_THAN_OR_EQUAL",),
    "Log": ("ELEMENT_WISE_LOG",),
    "Max": ("ELEMENT_WISE_MAX",),
    "Mean": ("ELEMENT_WISE_MEAN",),
    "Min": ("ELEMENT_WISE_MIN",),
    "Mod": ("ELEMENT_WISE_MODULUS_FLOOR", "ELEMENT_WISE_MODULUS_TRUNCATE"),
    "Mul": ("ELEMENT_WISE_MULTIPLY",),
    "Neg": ("ELEMENT_WISE_NEGATE",),
    "Not": ("ELEMENT_WISE_LOGICAL_NOT",),
    "Or": ("ELEMENT_WISE_LOGICAL_OR",),
    "PRelu": ("ACTIVATION_PARAMETERIZED_RELU",),
    "Pow": ("ELEMENT_WISE_POW",),
    "QuantizeLinear": ("ELEMENT_WISE_QUANTIZE_LINEAR",),
    "Reciprocal": ("ELEMENT_WISE_RECIP",),
    "Relu": ("ACTIVATION_RELU",),
    "Round": ("ELEMENT_WISE_ROUND",),
    "Selu": ("ACTIVATION_SCALED_ELU",),
    "Shrink": ("ACTIVATION_SHRINK",),
    "Sigmoid": ("ACTIVATION_SIGMOID",),
    "Sign": ("ELEMENT_WISE_SIGN",),
    "Sin": ("ELEMENT_WISE_SIN",),
    "Sinh": ("ELEMENT_WISE_SINH",),
    "Softplus": ("ACTIVATION_SOFTPLUS",),
    "Softsign": ("ACTIVATION_SOFTSIGN",),
    "Sqrt": ("ELEMENT_WISE_SQRT",),
    "Sub": ("ELEMENT_WISE_SUBTRACT",),
    "Sum": ("ELEMENT_WISE_ADD",),
    "Tan": ("ELEMENT_WISE_TAN",),
    "Tanh": ("ELEMENT_WISE_TANH", "ACTIVATION_TANH"),
    "ThresholdedRelu": ("ACTIVATION_THRESHOLDED_RELU",),
    "Where": ("ELEMENT_WISE_IF",),
    "Xor": ("ELEMENT_WISE_LOGICAL_XOR",),
}

# What each name says where ONNX's one operator is two of DirectML's.
ONNX_NOTES: dict[str, str] = {
    "BitShift": "by its direction attribute",
    "Mod": "fmod=0 is modulus_floor, fmod=1 modulus_truncate",
    "Clip": "clip1 takes typed min and max",
    "Sum": "of two inputs",
    "Xor": "logical; BitwiseXor is bit_xor",
    "And": "logical; BitwiseAnd is bit_and",
    "Or": "logical; BitwiseOr is bit_or",
    "Not": "logical; BitwiseNot is bit_not",
}


def onnx_name(key: str) -> str | None:
    """The ONNX operator a normalised key (upper case, separators as _) spells, or None."""
    wanted = key.replace("_", "")
    for name in ONNX_TO_DIRECTML:
        if name.upper() == wanted:
            return name
    return None
