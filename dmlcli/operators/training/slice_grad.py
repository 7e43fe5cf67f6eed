"""SLICE_GRAD: the gradient of SLICE1 with respect to its input.

Source: DirectML's page (MicrosoftDocs/sdk-api, ns-directml-dml_slice_grad_operator_desc.md at 3d7d3074) for the
fields, the example and the support table; DirectML.h for the field types (InputWindowStrides is INT) and the
DML_OPERATOR_TYPE value (135). The window is SLICE1's (movement/entries.py): the same fields, rules and elements.
"""

from __future__ import annotations

from ...data_types import TYPES_8
from ..movement.entries import WINDOW_OFFSETS, WINDOW_SIZES, WINDOW_STRIDES, WindowCall, slice1_shape, slice1_window
from ..table.schema import DIMS_1_TO_8, EXACT, Operator, rows
from ..table.shaped import ShapeQuery
from .adjoint import FAMILY, forward_rule, stated_gradient_sizes

GRADIENTS = ("InputGradientTensor", "OutputGradientTensor")
_ROWS = rows(("3_0", DIMS_1_TO_8, {"InputGradientTensor": TYPES_8, "OutputGradientTensor": TYPES_8}))


def slice_grad_shape(query: ShapeQuery) -> dict:
    sizes = stated_gradient_sizes(query, "SLICE_GRAD", "SLICE1")
    forward_rule(slice1_shape, query, sizes, query.shape("InputGradientTensor"))
    return {"OutputGradientTensor": sizes}


def slice_grad_kernel(xp, inputs, outputs, params):
    (incoming,) = inputs
    (out,) = outputs
    result = xp.zeros(out.shape, dtype=out.data_type.numpy_dtype)
    # SLICE1's window of the forward's input (this output), read by an output of the incoming gradient's Sizes.
    window = slice1_window(WindowCall(params, _IncomingSizes(incoming.shape)), out.shape)
    result[window] = incoming
    return (result,)


class _IncomingSizes:
    """What slice1_window reads of the forward's output: its Sizes (the incoming gradient's)."""

    def __init__(self, shape) -> None:
        self.shape = tuple(shape)


SLICE_GRAD = Operator(
    name="SLICE_GRAD", enum_value=135, family=FAMILY, prefix="",
    summary="the gradient of SLICE1 with respect to its input: the incoming gradient written back where the slice "
            "read, 0 elsewhere",
    formula="OutputGradientTensor = 0; OutputGradientTensor[CopyStart + InputWindowStrides * c] = "
            "InputGradientTensor[c] for every coordinate c of InputGradientTensor",
    introduced=_ROWS[-1].level, inputs=("InputGradientTensor",), output="OutputGradientTensor", support=_ROWS,
    same_data_type=GRADIENTS, same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(WINDOW_OFFSETS, WINDOW_SIZES, WINDOW_STRIDES), native_encoding=True,
    shape_rule=slice_grad_shape, array_kernel=slice_grad_kernel, exactness=EXACT,
    notes=("The page: the sliced elements are propagated to the output and all other elements are set to 0. Strides "
           "are never 0, so each output element receives at most one incoming element: copied bit for bit (NaN "
           "payloads, -0.0 and integers alike); the others are 0 (+0.0 for floats).",
           "InputWindowOffsets, InputWindowSizes and InputWindowStrides are SLICE1's, checked by SLICE1's rules "
           "for an input of OutputGradientTensor's Sizes (the window inside it, no stride 0; a negative stride "
           "walks the window backwards) and an output of InputGradientTensor's Sizes (1 to MaxCopiedElements in "
           "each dimension): the page's 'typically' made a rule, as the adjoint needs it. The API and the command "
           "line may leave out InputWindowOffsets (0), InputWindowSizes (to the end of OutputGradientTensor) and "
           "InputWindowStrides (1).",
           "DirectML takes OutputGradientTensor's Sizes from its tensor desc (the forward's input Sizes, which the "
           "slice does not determine): a DxDispatch model gives them; the API and the command line state them "
           "with --output-shape (output_shape=), required. The same DataType and DimensionCount as "
           "InputGradientTensor (the page).",
           "The page's support table (3_0: 1 to 8 dimensions; FLOAT32, FLOAT16, INT32, INT16, INT8, UINT32, UINT16, "
           "UINT8) has no later rows: the 64-bit types SLICE1 takes from 4_1 are not listed for SLICE_GRAD."),
)

OPERATORS = (SLICE_GRAD,)
