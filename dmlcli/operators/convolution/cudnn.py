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
  run afterwards as their own kernel, as on dmlcli's path). Where cuDNN cannot fuse them (some BACKWARD calls), or
  where the convolution alone and then one pass over its output take less time than the fused graph (timed on a
  signature's first call where plans are tuned: a 1x1 FLOAT16 convolution, whose fused plans took three times its
  plain one's time on the H200), the graph is the convolution alone, rounded to the output type, and the bias and
  RELU follow in that pass (channel_finish.py): a FLOAT16 sum is then rounded twice, well within CONVOLUTION's
  tolerance of 2 ULP per product summed;
- where plans are tuned, the fused graph with its output written channels-last ({N, spatial..., C}) into a buffer of
  its own and then made C-ordered by one transpose (channels_last.py) is timed beside the other routes on a
  signature's first call and kept where it is the fastest: cuDNN's FLOAT16 kernels compute channels-last, and the
  layout kernel a plan appends for a C-ordered output took 1.7 times a copy's time (the same bits: a transpose).

Numbers: every graph computes in FLOAT32 (compute and intermediate types FLOAT; plans with the numerical notes
DOWN_CONVERT_INPUTS or REDUCED_PRECISION_REDUCTION are left out, as PyTorch leaves out the first). FLOAT32 calls
leave out the TENSOR_CORE plans (TF32 on these GPUs) unless the call allows TF32 (--allow-tf32), exactly PyTorch's
rule for torch.backends.cudnn.allow_tf32; so a FLOAT32 result is IEEE FP32 arithmetic in cuDNN's order of summation,
within CONVOLUTION's sum bound as any order is.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..numerics import cudnn_graphs, products
from ..numerics.cudnn_graphs import Unsupported
from ..table.schema import ActivationApplied
from . import channel_finish, channels_last


# The types cuDNN runs here, by name (a dtype's own .name costs 1.5 us, a host call's tenth).
_DTYPE_NAMES = {np.dtype(np.float16): "float16", np.dtype(np.float32): "float32"}


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
    channels_last: bool = False  # the graph writes Y channels-last, made C-ordered after it (channels_last.py)


def convolve(cupy, x, w, bias, out_sizes: tuple[int, ...], params, geo: dict, relu: bool, flip) -> tuple:
    """The convolution's outputs through cuDNN, an ActivationApplied where the fused RELU (`relu`: the call's
    FusedActivation is RELU) was applied here (in cuDNN's graph or the pass after it); Unsupported where cuDNN cannot
    run this call. `flip(w)` flips a filter (CONVOLUTION mode)."""
    cudnn = cudnn_graphs.frontend()
    if x.dtype != w.dtype or (bias is not None and bias.dtype != x.dtype):
        raise Unsupported("cuDNN's graph here takes one data type for every tensor")
    dtype_name = _DTYPE_NAMES.get(x.dtype)
    if dtype_name is None:
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
        geo = {name: ((0 if "Padding" in name else 1),) + tuple(values) for name, values in geo.items()}
    out = cupy.empty(out_sizes, dtype=x.dtype)
    tf32 = dtype_name == "float32" and products.tf32_allowed()
    signature = Signature(tuple(x.shape), tuple(w.shape), tuple(out_sizes), dtype_name, backward,
                          tuple(geo["StartPadding"]), tuple(geo["EndPadding"]), tuple(geo["Strides"]),
                          tuple(geo["Dilations"]), bias is not None, relu, True, tf32)
    pointers = {"X": x.data.ptr, "W": w.data.ptr, "Y": out.data.ptr}
    buffers = Buffers(pointers if bias is None else dict(pointers, B=bias.data.ptr), pointers, out, bias, relu)
    _route(cudnn, cupy, signature, buffers).run(cudnn, cupy, buffers)
    result = out[:, :, 0] if lift else out
    return ActivationApplied((result,)) if relu else (result,)


class Buffers(NamedTuple):
    """One call's device buffers: the addresses a graph reads by its tensors' names, with the bias's (the fused graph)
    and without it (the convolution alone), the output and the bias that channel_finish's pass reads, and whether it
    applies RELU."""

    with_bias: dict[str, int]
    pointers: dict[str, int]
    out: object
    bias: object
    relu: bool


class Route(NamedTuple):
    """How a signature's calls run: its fused graph (`fused`: the bias and RELU in it, or neither asked for), or
    the graph of the convolution alone followed by channel_finish's pass; with `channels_last`, the fused graph
    writing its output channels-last into a buffer of its own, then channels_last's transpose into the output."""

    built: cudnn_graphs.Built
    fused: bool
    channels_last: bool = False

    def run(self, cudnn, cupy, buffers: Buffers) -> None:
        """The call's work on its buffers, queued on the current stream."""
        if self.channels_last:
            out = buffers.out
            written = cupy.empty(channels_last.channels_last_sizes(out.shape), dtype=out.dtype)
            self.built.execute(cudnn, cupy, dict(buffers.with_bias, Y=written.data.ptr))
            channels_last.to_channels_first(cupy, written, out)
        elif self.fused:
            self.built.execute(cudnn, cupy, buffers.with_bias)
        else:  # the convolution alone, then the bias and RELU in one pass over its output
            self.built.execute(cudnn, cupy, buffers.pointers)
            channel_finish.finish(cupy, buffers.out, buffers.bias, buffers.relu)


# (device, signature) -> its Route, or why cuDNN runs none: decided on the signature's first call, so that a call made
# again costs one dictionary read before its execute (cleared with the graphs by cudnn_graphs.forget).
_ROUTES: dict = cudnn_graphs.kept_with_graphs({})


def _route(cudnn, cupy, signature: Signature, buffers: Buffers) -> Route:
    """The signature's Route (Unsupported where cuDNN builds neither graph). With a bias or RELU the convolution
    runs alone where cuDNN builds no fused plan (some BACKWARD calls), or, where plans are timed
    (cudnn_graphs.TUNED_PLANS above 1), where the pair took less time on this call's data than the fused graph's
    chosen plan (the 1x1 FLOAT16 call of bench/cudnn_bench.py on the H200: 0.034 ms alone and 0.043 with the pass,
    against 0.100 fused)."""
    key = (cupy.cuda.Device().id, signature)
    route = _ROUTES.get(key)
    if type(route) is Route:
        return route
    if route is not None:
        raise Unsupported(route)
    try:
        route = _chosen_route(cudnn, cupy, signature, buffers)
    except Unsupported as why:
        cudnn_graphs.keep(_ROUTES, key, str(why), cudnn_graphs.GRAPHS_KEPT)
        raise
    cudnn_graphs.keep(_ROUTES, key, route, cudnn_graphs.GRAPHS_KEPT)
    return route


def _chosen_route(cudnn, cupy, signature: Signature, buffers: Buffers) -> Route:
    """The fused graph where cuDNN builds one (the convolution alone and the pass where it does not); where plans
    are timed (cudnn_graphs.TUNED_PLANS above 1), the fastest on this call's buffers of that, the pair (with a bias
    or RELU) and the fused graph written channels-last (channels_last.py)."""
    alone = signature._replace(fused=False)
    try:
        fused = Route(cudnn_graphs.cached(cupy, signature, _builder(signature), buffers.with_bias), True)
    except Unsupported:
        if not (signature.bias or signature.relu):
            raise
        return Route(cudnn_graphs.cached(cupy, alone, _builder(alone), buffers.pointers), False)
    if cudnn_graphs.TUNED_PLANS <= 1:
        return fused
    routes = [fused]
    if signature.bias or signature.relu:
        routes += _built_routes(cupy, alone, buffers.pointers, fused=False)
    if channels_last.fits(signature.output_sizes):
        routes += _channels_last_routes(cupy, signature, buffers)
    return _fastest(cudnn, cupy, routes, buffers)


def _channels_last_routes(cupy, signature: Signature, buffers: Buffers) -> list[Route]:
    """[the fused graph written channels-last], its plans built and tuned on a buffer of the output's size; [] where
    cuDNN plans none, or where the device has no room for that buffer (a call's route needs one of its own)."""
    try:
        scratch = cupy.empty(channels_last.channels_last_sizes(signature.output_sizes), dtype=buffers.out.dtype)
    except MemoryError:  # CuPy's OutOfMemoryError is one
        return []
    return _built_routes(cupy, signature._replace(channels_last=True), dict(buffers.with_bias, Y=scratch.data.ptr),
                         fused=True, channels_last=True)


def _built_routes(cupy, signature: Signature, pointers: dict[str, int], **route) -> list[Route]:
    """[the Route of `signature`'s graph, built (and its plans tuned) on `pointers`], or [] where cuDNN builds none."""
    try:
        return [Route(cudnn_graphs.cached(cupy, signature, _builder(signature), pointers), **route)]
    except Unsupported:
        return []


def _fastest(cudnn, cupy, routes: list[Route], buffers: Buffers) -> Route:
    """The route that took the least time (the earliest on a tie), calls back to back on this call's own buffers
    (cudnn_graphs.back_to_back_seconds): a route's second launch costs host time, which decides where a call's GPU
    work is small."""
    if len(routes) == 1:
        return routes[0]
    if cudnn_graphs.capturing(cupy):
        raise RuntimeError("a convolution's routes would be timed while a CUDA graph is being captured")
    seconds = [cudnn_graphs.back_to_back_seconds(cupy, lambda: route.run(cudnn, cupy, buffers)) for route in routes]
    return routes[seconds.index(min(seconds))]


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
    """The planned graph of one signature: X (*) W [+ B] [RELU] -> Y, every tensor in C order but Y where it is
    written channels-last."""
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
    out_strides = (channels_last.channels_last_strides(signature.output_sizes) if signature.channels_last
                   else strides(signature.output_sizes))
    y.set_output(True).set_data_type(io).set_dim(list(signature.output_sizes)).set_stride(out_strides)
    tensors["Y"] = y
    cudnn_graphs.plan_graph(cudnn, graph, excluded_notes(cudnn, signature.dtype, signature.tf32))
    return cudnn_graphs.Built(graph, tensors)
