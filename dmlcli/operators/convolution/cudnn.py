"""CONVOLUTION through cuDNN's graphs (the frontend's conv_fprop and conv_dgrad, the bias and RELU fused), the GPU
kernel's first choice where cuDNN builds a plan for the call; dmlcli's im2col and cuBLAS kernel otherwise
(entries.py). See operators/numerics/cudnn_graphs.py for the loading, the handles and the cache.

What maps (anything else raises Unsupported and runs dmlcli's kernel):
- FLOAT16 and FLOAT32, 1 to 3 spatial dimensions (a 1-D convolution as a 2-D one of height 1), any strides,
  dilations, asymmetric paddings and GroupCount (cuDNN reads the groups from the filter's channel count);
- CROSS_CORRELATION as it is, CONVOLUTION with the filter flipped first (a copy of the filter);
- FORWARD as conv_fprop; BACKWARD (the transposed convolution) as conv_dgrad, the adjoint of the forward
  convolution of an input of the output's Sizes with the same paddings, which is DirectML's BACKWARD exactly, with
  OutputPadding smaller than the stride (then the forward sizes still agree); FORWARD needs OutputPadding 0;
- BiasTensor added and RELU applied inside cuDNN's kernel on the FLOAT32 sum, then one rounding to the output type
  (RELU commutes with that rounding, so this is DirectML's activation of the rounded result; the other activations
  run afterwards as their own kernel, as on dmlcli's path). Where cuDNN cannot fuse them (some BACKWARD calls), the
  graph is the convolution alone, rounded to the output type, and the bias and RELU follow in one pass over it.

Numbers: every graph computes in FLOAT32 (compute and intermediate types FLOAT; plans with the numerical notes
DOWN_CONVERT_INPUTS or REDUCED_PRECISION_REDUCTION are left out, as PyTorch leaves out the first). FLOAT32 calls
leave out the TENSOR_CORE plans (TF32 on these GPUs) unless the call allows TF32 (--allow-tf32), exactly PyTorch's
rule for torch.backends.cudnn.allow_tf32; so a FLOAT32 result is IEEE FP32 arithmetic in cuDNN's order of summation,
within CONVOLUTION's sum bound as any order is.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..elementwise.activation import RELU_DEVICE
from ..numerics import cudnn_graphs, products
from ..numerics.cuda_prelude import elementwise_kernel
from ..numerics.cudnn_graphs import Unsupported
from ..table.schema import ActivationApplied


class Signature(NamedTuple):
    """What a built graph depends on (the key of the cache): the 4-D or 5-D Sizes cuDNN sees and the parameters."""

    input_sizes: tuple[int, ...]
    filter_sizes: tuple[int, ...]
    output_sizes: tuple[int, ...]
    dtype: str
    backward: bool
    pre: tuple[int, ...]
    post: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    bias: bool
    relu: bool
    fused: bool  # bias and RELU in cuDNN's graph (False: the convolution alone)
    tf32: bool


def convolve(cupy, x, w, bias, out_sizes: tuple[int, ...], params, geo: dict, relu: bool, flip) -> tuple:
    """The convolution's outputs through cuDNN, an ActivationApplied where the fused RELU (`relu`: the call's
    FusedActivation is RELU) ran in cuDNN; Unsupported where cuDNN cannot run this call. `flip(w)` flips a filter
    (CONVOLUTION mode)."""
    cudnn = cudnn_graphs.frontend()
    if x.dtype != w.dtype or (bias is not None and bias.dtype != x.dtype):
        raise Unsupported("cuDNN's graph here takes one data type for every tensor")
    if x.dtype not in (np.float16, np.float32):
        raise Unsupported(f"cuDNN's convolution here takes FLOAT16 and FLOAT32, not {x.dtype}")
    if x.size == 0 or w.size == 0 or 0 in out_sizes:
        raise Unsupported("an empty tensor")
    backward = params.get("Direction") == "BACKWARD"
    extra = tuple(geo["OutputPadding"])
    if not backward and any(extra):
        raise Unsupported("FORWARD with OutputPadding (zeros past cuDNN's output)")
    if backward and any(not 0 <= e < s for e, s in zip(extra, geo["Strides"])):
        raise Unsupported("BACKWARD with an OutputPadding not below the stride")
    if params.get("Mode") == "CONVOLUTION":
        w = cupy.ascontiguousarray(flip(w))
    lift = x.ndim == 3  # 1-D: a 2-D convolution of height 1
    if lift:
        x, w = x[:, :, None, :], w[:, :, None, :]
        out_sizes = out_sizes[:2] + (1,) + out_sizes[2:]
    geo = {name: (((0 if "Padding" in name else 1),) if lift else ()) + tuple(values) for name, values in geo.items()}
    out = cupy.empty(out_sizes, dtype=x.dtype)
    pointers = {"X": x.data.ptr, "W": w.data.ptr, "Y": out.data.ptr}
    if bias is not None:
        pointers["B"] = bias.data.ptr
    tf32 = x.dtype == np.float32 and products.tf32_allowed()
    base = dict(input_sizes=tuple(x.shape), filter_sizes=tuple(w.shape), output_sizes=tuple(out_sizes),
                dtype=x.dtype.name, backward=backward, pre=geo["StartPadding"], post=geo["EndPadding"],
                strides=geo["Strides"], dilations=geo["Dilations"], bias=bias is not None, relu=relu, tf32=tf32)
    fused = Signature(fused=True, **base)
    try:
        built = cudnn_graphs.cached(cupy, fused, _builder(fused), pointers)
    except Unsupported:
        if not (fused.bias or fused.relu):
            raise
        # cuDNN fuses a bias and RELU after most convolutions, not all (some BACKWARD ones): the convolution alone.
        alone = fused._replace(fused=False)
        pointers = {"X": x.data.ptr, "W": w.data.ptr, "Y": out.data.ptr}
        cudnn_graphs.cached(cupy, alone, _builder(alone), pointers).execute(cudnn, cupy, pointers)
        _finish(cupy, out, bias, relu)
    else:
        built.execute(cudnn, cupy, pointers)
    result = out[:, :, 0] if lift else out
    return ActivationApplied((result,)) if relu else (result,)


# y: the convolution's output, rounded to its type; b: the bias broadcast to it; has_bias 0 where none is given.
_FINISH = ("dml_convolution_finish", "T y, T b, int32 has_bias, int32 relu", "T z",
           "float r = (float)y; if (has_bias) r = r + (float)b; if (relu) r = dml_relu_apply(r); z = (T)r")


def _finish(cupy, out, bias, relu: bool) -> None:
    """The bias added in FLOAT32 and rounded once, as dmlcli's kernel does, and RELU (which commutes with that rounding)
    where `relu`: one pass over the output, in place (four CuPy passes through a FLOAT32 copy took 0.04 ms of a {32,
    128, 56, 56} FLOAT16 BACKWARD call on the H200, and RELU as its own kernel a second pass and launch)."""
    kernel = elementwise_kernel(cupy, *_FINISH, preamble=RELU_DEVICE)
    # no bias: the output stands in for it, unread (has_bias 0), where a zeros tensor would cost its own launch
    given = out if bias is None else bias.reshape((1, -1) + (1,) * (out.ndim - 2))
    kernel(out, given, np.int32(bias is not None), np.int32(relu), out)


def _builder(signature: Signature):
    def build(cudnn, handle) -> cudnn_graphs.Built:
        return build_graph(cudnn, handle, signature)
    return build


def excluded_notes(cudnn, dtype: str, tf32: bool) -> list:
    """The numerical notes whose plans a call must not run (see the module's text)."""
    notes = cudnn.numerical_note
    excluded = [notes.DOWN_CONVERT_INPUTS, notes.REDUCED_PRECISION_REDUCTION]
    if dtype == "float32" and not tf32:
        excluded.append(notes.TENSOR_CORE)
    return excluded


def build_graph(cudnn, handle, signature: Signature) -> cudnn_graphs.Built:
    """The planned graph of one signature: X (*) W [+ B] [RELU] -> Y, every tensor in C order."""
    io = cudnn_graphs.data_type(cudnn, np.dtype(signature.dtype))
    graph = cudnn.pygraph(io_data_type=io, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    strides = cudnn_graphs.contiguous_strides
    x = graph.tensor(name="X", dim=list(signature.input_sizes), stride=strides(signature.input_sizes), data_type=io)
    w = graph.tensor(name="W", dim=list(signature.filter_sizes), stride=strides(signature.filter_sizes),
                     data_type=io)
    geometry = dict(pre_padding=list(signature.pre), post_padding=list(signature.post),
                    stride=list(signature.strides), dilation=list(signature.dilations))
    if signature.backward:
        y = graph.conv_dgrad(loss=x, filter=w, out_dims=list(signature.output_sizes), **geometry)
    else:
        y = graph.conv_fprop(image=x, weight=w, **geometry)
    tensors = {"X": x, "W": w}
    if signature.fused and signature.bias:
        channels = signature.output_sizes[1]
        bias_sizes = (1, channels) + (1,) * (len(signature.output_sizes) - 2)
        b = graph.tensor(name="B", dim=list(bias_sizes), stride=strides(bias_sizes), data_type=io)
        y = graph.bias(input=y, bias=b)
        tensors["B"] = b
    if signature.fused and signature.relu:
        y = graph.relu(input=y)
    y.set_output(True).set_data_type(io).set_dim(list(signature.output_sizes)).set_stride(
        strides(signature.output_sizes))
    tensors["Y"] = y
    cudnn_graphs.plan_graph(cudnn, graph, excluded_notes(cudnn, signature.dtype, signature.tf32))
    return cudnn_graphs.Built(graph, tensors)
