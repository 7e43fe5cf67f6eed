"""GATHER*, SCATTER*, ONE_HOT, TOP_K*, NONZERO_COORDINATES: entries and kernels of the indexing operators.

Sources: DirectML's pages for DML_<NAME>_OPERATOR_DESC (MicrosoftDocs/sdk-api, ns-directml-dml_*_operator_desc.md;
transcribed in group_a.md and group_b.md): fields, Sizes rules, support tables, examples. Every kernel is one
function for both backends (`xp` is numpy or cupy) and gives the same bits on both.

Rules dmlcli had to choose where the pages are silent or disagree, each in the entry's notes:
- Negative indices count from the end of their dimension for signed index types (the pages: from 3_0, the
  first level with signed index types, so every signed index a valid call can hold).
- An index outside its dimension (after the negative wrap) is clamped into it by a gather (GATHER,
  GATHER_ELEMENTS, GATHER_ND, GATHER_ND1: below it the first element, past it the last; a GATHER_ND tuple
  coordinate by coordinate), as DirectML's shaders do: Chromium's WebNN back end relies on it
  (services/webnn/dml/graph_impl_dml.cc). A scatter skips it (the output keeps the input's element there); its
  pages are silent and no source says what DirectML writes.
- SCATTER_ELEMENTS and SCATTER_ND with two updates for one output element: the last update in row-major
  order of UpdatesTensor (of the index tuples for SCATTER_ND) wins, on both backends (the pages call such
  calls invalid and promise no winner).
- TOP_K, TOP_K1: NaN counts as larger than every number (DECREASING lists NaN first, INCREASING last); -0
  and +0 are equal (ties, by ascending index). K may equal the axis' size.
- Values are moved as bit patterns (float NaN payloads kept), so every result is exact.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...errors import InputError
from ...records import Frozen
from ...data_types import ALL11, FLOAT16, FLOAT32, FLOATS, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64
from ..table.parameters import EnumParameter, IntegerParameter
from ..table.schema import DIMS_1_TO_8, DIMS_4, EXACT, Operator, rows
from ..table.shaped import RuleViolation, ShapeQuery, check_axis, describe_sizes

FAMILY = "indexing"
INDEX_TYPES_3_0 = (INT64, INT32, UINT64, UINT32)
INDEX_TYPES_2_X = (UINT32,)
_INTS_8 = (FLOAT32, FLOAT16, INT32, INT16, INT8, UINT32, UINT16, UINT8)  # TYPES_8 in the pages' order


# ---------------------------------------------------------------- parameters


class CountParameter(IntegerParameter):
    """A UINT count field whose natural value depends on a tensor's rank (GATHER's IndexDimensions): left
    out, the typed value is None and the shape rule resolves it as `default_text` says."""

    default_text: str

    def __init__(self, field: str, help: str, default_value: int = 0, minimum: int = 0, maximum: int = 2**32 - 1,
                 default_text: str = "") -> None:
        vars(self).update(field=field, help=help, default_value=default_value, minimum=minimum, maximum=maximum,
                          default_text=default_text)

    @property
    def default(self):
        return None

    def describe(self, value) -> str:
        return self.default_text if value is None else str(value)

    def check_declaration(self, tensors) -> None:
        if not self.default_text:
            raise ValueError(f"{self.field}: a count left out needs a default_text saying what it means")


AXIS = IntegerParameter(field="Axis", help="the dimension to index along (0 to DimensionCount - 1)",
                        default_value=0)
INDEX_DIMENSIONS = CountParameter(
    field="IndexDimensions", default_text="IndicesTensor's DimensionCount",
    help="how many trailing dimensions of IndicesTensor hold indices (the leading ones must be 1)")
INPUT_DIMENSION_COUNT = CountParameter(
    field="InputDimensionCount", default_text="InputTensor's DimensionCount",
    help="how many trailing dimensions of InputTensor are meaningful (the leading ones must be 1)")
INDICES_DIMENSION_COUNT = CountParameter(
    field="IndicesDimensionCount", default_text="IndicesTensor's DimensionCount",
    help="how many trailing dimensions of IndicesTensor are meaningful (the leading ones must be 1)")
BATCH_DIMENSION_COUNT = IntegerParameter(
    field="BatchDimensionCount", default_value=0,
    help="how many leading meaningful dimensions are independent batches shared by input, indices and output")
K = IntegerParameter(field="K", help="how many elements to select from each sequence along Axis (1 to its size)",
                     default_value=1, minimum=1)
AXIS_DIRECTION = EnumParameter(
    field="AxisDirection", help="decreasing: the largest K, largest first; increasing: the smallest K, smallest first",
    enum_prefix="DML_AXIS_DIRECTION_", values=(("INCREASING", 0), ("DECREASING", 1)), default_value="DECREASING")


# ---------------------------------------------------------------- shape helpers


def _same_rank(query: ShapeQuery, names: tuple[str, ...]) -> int:
    """The DimensionCount every named input shares (the pages: 'must have the same DimensionCount')."""
    first = query.shape(names[0])
    for name in names[1:]:
        shape = query.shape(name)
        if len(shape) != len(first):
            raise RuleViolation(f"{name} has {len(shape)} dimensions and {names[0]} {len(first)}; "
                                f"{', '.join(names)} and the output must have the same DimensionCount")
    return len(first)


def _meaningful(shape: tuple[int, ...], count: int | None, field_name: str, tensor: str,
                lowest: int = 1) -> tuple[int, ...]:
    """The trailing `count` sizes of a tensor whose leading dimensions are padding ones."""
    rank = len(shape)
    count = rank if count is None else count
    if not lowest <= count <= rank:
        raise RuleViolation(f"{field_name} {count} is out of range for {tensor}'s {rank} dimensions "
                            f"(allowed: {lowest} to {rank})")
    padding = shape[:rank - count]
    if any(size != 1 for size in padding):
        raise RuleViolation(f"{tensor} Sizes {describe_sizes(shape)} have a size other than 1 before their last "
                            f"{field_name} {count} dimensions (those leading dimensions must be 1)")
    return tuple(shape[rank - count:])


def _right_aligned(sizes: tuple[int, ...], rank: int, what: str) -> tuple[int, ...]:
    """Sizes fitted into `rank` dimensions: leading ones prepended, or sizes of 1 dropped, leftmost first (a size
    of 1 leaves the row-major layout unchanged, so the elements are the same; GATHER's page example 3 drops one
    between other sizes). A size other than 1 that does not fit is refused."""
    if len(sizes) <= rank:
        return (1,) * (rank - len(sizes)) + tuple(sizes)
    fitted = list(sizes)
    while len(fitted) > rank and 1 in fitted:
        fitted.remove(1)
    if len(fitted) > rank:
        raise RuleViolation(f"{what} Sizes {describe_sizes(sizes)} need {len(fitted)} dimensions of a size other "
                            f"than 1, more than the tensors' DimensionCount {rank}")
    return tuple(fitted)


def _sizes_except(shape, like, axis: int, name: str, like_name: str) -> None:
    if len(shape) != len(like) or any(a != b for d, (a, b) in enumerate(zip(shape, like)) if d != axis):
        raise RuleViolation(f"{name} Sizes {describe_sizes(shape)} and {like_name} Sizes {describe_sizes(like)} "
                            f"differ outside Axis {axis}; they must match in every other dimension")


# ---------------------------------------------------------------- kernel helpers


_UNSIGNED_OF_WIDTH = {size: np.dtype(f"uint{size * 8}") for size in (1, 2, 4, 8)}  # by bytes: no dtype parsed a call


def _bits(xp, x):
    """A float array as its unsigned bit pattern (copies and selections then keep every bit, NaN payloads too)."""
    if x.dtype.kind == "f":
        return x.view(_UNSIGNED_OF_WIDTH[x.dtype.itemsize])
    return x


def _as_type(xp, bits, dtype):
    """The inverse of _bits: the result in the output's own type."""
    dtype = np.dtype(dtype)
    return bits.view(dtype) if bits.dtype != dtype else bits


def _all_within(indices, size: int) -> bool:
    """Whether every index lies in [0, size): the common case, checked in one pass, then used as it is."""
    return indices.size == 0 or (int(indices.min()) >= 0 and int(indices.max()) < size)


def _wrapped(xp, indices, size: int):
    """Signed indices as int64 with the negative ones counted from the end of a dimension of `size`."""
    wide = indices.astype(np.int64)
    return xp.where(wide < 0, wide + size, wide)


def _positions(xp, indices, size: int):
    """(positions as intp, valid mask or None where every index is valid) for a scatter's (or ONE_HOT's) indices
    into a dimension of `size`.

    Negative values of signed types count from the end; out-of-range indices are marked invalid (their
    position is 0, so that they can be read safely and then dropped)."""
    if _all_within(indices, size):
        return indices.astype(np.intp, copy=False), None
    if indices.dtype.kind == "u":
        valid = indices < size
        return xp.where(valid, indices, 0).astype(np.intp), valid
    wrapped = _wrapped(xp, indices, size)
    valid = (wrapped >= 0) & (wrapped < size)
    return xp.where(valid, wrapped, 0).astype(np.intp), valid


def _clamped_positions(xp, indices, size: int):
    """Positions as intp for a gather from a dimension of `size`: negative values of signed types count from the
    end, then every index is clamped to [0, size - 1] (DirectML's shaders clamp out-of-range indices)."""
    if _all_within(indices, size):
        return indices.astype(np.intp, copy=False)
    if indices.dtype.kind == "u":  # compared in their own type: a UINT64 past INT64's range stays large
        return xp.minimum(indices, indices.dtype.type(size - 1)).astype(np.intp)
    return xp.clip(_wrapped(xp, indices, size), 0, size - 1).astype(np.intp)


def _last_wins(xp, targets):
    """The positions in `targets` that hold the last occurrence of each target (a stable sort, the same on
    NumPy and CuPy, so that duplicate scatter targets give the same winner on both backends)."""
    order = xp.argsort(targets, kind="stable")
    ordered = targets[order]
    last = xp.ones(ordered.shape, dtype=bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    return order[last]


def _scatter_rows(xp, rows, targets, values) -> None:
    """rows[targets] = values (elements or whole rows) with the last of duplicate targets winning, in the order
    of `targets` (row-major order of the updates)."""
    if xp is np:
        # NumPy's assignment through one integer index array copies in index order (its mapiter loop), so a
        # later duplicate overwrites an earlier one; tests/test_ops_indexing.py pins this against a loop.
        rows[targets] = values
        return
    # CuPy's assignment picks an arbitrary duplicate: keep only the last occurrence of each target first.
    keep = _last_wins(xp, targets)
    if keep.size != targets.size:
        targets, values = targets[keep], values[keep]
    rows[targets] = values


# ---------------------------------------------------------------- GATHER


def gather_shape(query: ShapeQuery) -> dict:
    rank = _same_rank(query, ("InputTensor", "IndicesTensor"))
    data, indices = query.shape("InputTensor"), query.shape("IndicesTensor")
    axis = check_axis(query.parameters["Axis"], rank, "Axis")
    index_sizes = _meaningful(indices, query.parameters["IndexDimensions"], "IndexDimensions", "IndicesTensor",
                              lowest=0)
    full = data[:axis] + index_sizes + data[axis + 1:]
    return {"OutputTensor": _right_aligned(full, rank, "OutputTensor")}


def gather_kernel(xp, inputs, outputs, params):
    data, indices = inputs
    (out,) = outputs
    axis = params["Axis"]
    count = params["IndexDimensions"]
    count = indices.ndim if count is None else count
    indices = indices.reshape(indices.shape[indices.ndim - count:])
    if xp is np:
        taken = _numpy_take_clamped(data, indices, axis)
    else:
        taken = xp.take(_bits(xp, data), _clamped_positions(xp, indices, data.shape[axis]), axis=axis)
    taken = _as_type(xp, taken, out.data_type.numpy_dtype)
    # The take has the output's Sizes already: a reshape would only make a view, which the backend then checks
    # for aliasing against every input (np.may_share_memory).
    return (taken if taken.shape == tuple(out.shape) else taken.reshape(out.shape),)


def gather_planned(inputs, outputs, params, constant_inputs: frozenset[int] = frozenset()):
    """gather_kernel's CPU call worked out once (Operator.planned_kernel: a model's planned node) where the indices
    are a constant (a Transformer's Gather of q, k or v by a scalar): their clamped positions are made here once,
    so a call is NumPy's take alone (half of such a call's 9 us went to the indices' reshape, range check and
    conversion). The same positions, the same whole items copied, so gather_kernel's bits. None where the indices
    change from call to call or the output's type is not the data's (its bits are viewed then)."""
    data, indices = inputs
    (out,) = outputs
    if 1 not in constant_inputs or data.dtype != np.dtype(out.data_type.numpy_dtype):
        return None
    axis = params["Axis"]
    count = params["IndexDimensions"]
    count = indices.ndim if count is None else count
    positions = _clamped_positions(np, indices.reshape(indices.shape[indices.ndim - count:]), data.shape[axis])
    positions = np.array(positions, np.intp)  # its own: a view of the constant indices could be written
    shape = tuple(out.shape)

    def run(arrays):
        taken = arrays[0].take(positions, axis=axis)
        return (taken if taken.shape == shape else taken.reshape(shape),)

    return run


def _numpy_take_clamped(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """gather_kernel's take on NumPy, an array of its own: data.take(_clamped_positions(indices), axis), but first
    data.take(indices) itself, whose mode 'raise' counts a negative index from the end as DirectML does and refuses
    any index beyond either end, so that indices all in [-size, size) need neither the clamp's check (their min and
    max) nor its conversion. UINT64 indices keep the clamp: take reads them as intp, where those past INT64's range
    would count from the end. NumPy's take copies whole items (no float arithmetic), so floats need no unsigned view
    for their bits (signalling NaN payloads included: tests/test_small_kernel_bits.py)."""
    if not (indices.dtype.kind == "u" and indices.dtype.itemsize == 8):
        try:
            return data.take(indices, axis=axis)
        except IndexError:  # an index out of range: clamped below
            pass
    return data.take(_clamped_positions(np, indices, data.shape[axis]), axis=axis)


def _clamped_position_source(index_dtype: np.dtype) -> str:
    """CUDA that reads `indices[j]` into `position` as _clamped_positions does: a negative signed index counts from
    the end, then the result is clamped into [0, size - 1]; an unsigned one is compared as unsigned (a UINT64 past
    INT64's range stays large)."""
    if index_dtype.kind == "u":
        return ("        const unsigned long long raw = (unsigned long long)indices[j];\n"
                "        const long long position = raw >= (unsigned long long)size ? (long long)size - 1 "
                ": (long long)raw;\n")
    return ("        long long position = (long long)indices[j];\n"
            "        if (position < 0) position += size;\n"
            "        position = position < 0 ? 0 : (position >= size ? (long long)size - 1 : position);\n")


# GATHER moves whole words of GATHER_WORD_BYTES where the slices it copies allow (the product of the sizes after Axis,
# in bytes, a multiple of the word, and the input's start on the word's boundary): each thread then copies one 16-byte
# word (a vector load and store) and finds its slice once per word, by magic-number divisions
# (cuda_prelude.fast_division) where every index fits 32 bits. One element a thread, with two 32-bit divisions and
# two modulos each, moved GATHER's bytes at about 0.44 of the H200's copy bandwidth (issue 33).
GATHER_WORD_BYTES = 16


@functools.lru_cache(maxsize=64)  # the text is built once per word, index type and index size
def _gather_source(word_bytes: int, index_dtype: np.dtype, wide: bool) -> str:
    """GATHER in one pass: each output word reads its index, wraps a negative one, clamps it into the dimension and
    copies the input's bits (the rule gather_kernel applies in three passes). `word_bytes`: the bytes each thread
    moves at once (a whole element or a whole number of them)."""
    from ..numerics.cuda_prelude import C_INTEGER_TYPES, C_WORD_TYPES, DEVICE_PRELUDE, FAST_DIVISION

    word = "uint4" if word_bytes == 16 else C_WORD_TYPES[8 * word_bytes]  # CUDA's 16-byte vector: one load, one store
    index = C_INTEGER_TYPES[index_dtype.name]
    if wide:
        split = ("        const idx_t t = i / inner;\n"
                 "        const idx_t within = i - t * inner;\n"
                 "        const idx_t outer = t / count;\n"
                 "        const idx_t j = t - outer * count;\n")
    else:
        split = ("        const idx_t t = (idx_t)dml_fast_divide((unsigned int)i, (unsigned int)inner, m_inner, "
                 "r_inner);\n"
                 "        const idx_t within = i - t * inner;\n"
                 "        const idx_t outer = (idx_t)dml_fast_divide((unsigned int)t, (unsigned int)count, m_count, "
                 "r_count);\n"
                 "        const idx_t j = t - outer * count;\n")
    return (DEVICE_PRELUDE + FAST_DIVISION + f"\ntypedef {'long long' if wide else 'int'} idx_t;\n"
            f"typedef {word} W;\n"
            f'extern "C" __global__ void dml_kernel(const W* __restrict__ data, const {index}* __restrict__ indices,\n'
            "    W* __restrict__ ys, const long long lsize, const long long lcount, const long long linner,\n"
            "    const unsigned int m_inner, const unsigned int r_inner, const unsigned int m_count,\n"
            "    const unsigned int r_count, const long long n) {\n"
            "    const idx_t size = (idx_t)lsize, count = (idx_t)lcount, inner = (idx_t)linner;\n"
            "    const idx_t stride = (idx_t)gridDim.x * blockDim.x;\n"
            "    for (idx_t i = blockIdx.x * (idx_t)blockDim.x + threadIdx.x; i < (idx_t)n; i += stride) {\n"
            + split + _clamped_position_source(index_dtype) +
            "        ys[i] = data[((long long)outer * size + position) * inner + within];\n"
            "    }\n}\n")


def gather_word_bytes(item_bytes: int, inner: int, data_address: int) -> int:
    """The widest word (at most GATHER_WORD_BYTES) that a slice of `inner` elements of `item_bytes` is a whole number
    of and that the input's start (`data_address`) is aligned to (a view may start anywhere); at least the element."""
    word = GATHER_WORD_BYTES
    while word > item_bytes and ((inner * item_bytes) % word or data_address % word):
        word //= 2
    return word


def gather_gpu_kernel(cp, inputs, outputs, params):
    """GATHER on the GPU in one kernel (no host round trip to check the indices); the same bits as gather_kernel."""
    from ..numerics.cuda_prelude import C_INTEGER_TYPES, fast_division, launch

    data, indices = inputs
    (out,) = outputs
    if np.dtype(indices.dtype).name not in C_INTEGER_TYPES:
        return gather_kernel(cp, inputs, outputs, params)
    axis = params["Axis"]
    data_bits = _bits(cp, cp.ascontiguousarray(data))
    result = cp.empty(tuple(out.shape), dtype=data_bits.dtype)
    if result.size:
        size = data.shape[axis]
        item_bytes = data_bits.dtype.itemsize
        inner = math.prod(data.shape[axis + 1:])
        word = gather_word_bytes(item_bytes, inner, data_bits.data.ptr)  # a fresh result starts on 256 bytes
        inner_words = inner * item_bytes // word
        wide = max(data.size, result.size) >= 2**31 - 2**24
        source = _gather_source(word, np.dtype(indices.dtype), wide)
        magic = [np.uint32(v) for divisor in (inner_words, indices.size) for v in fast_division(divisor)]
        launch(cp, source, data_bits, cp.ascontiguousarray(indices).reshape(-1), result, np.int64(size),
               np.int64(indices.size), np.int64(inner_words), *magic, count=result.nbytes // word)
    return (_as_type(cp, result, out.data_type.numpy_dtype),)


_GATHER_ROWS = rows(
    ("4_1", DIMS_1_TO_8, {"InputTensor": ALL11, "IndicesTensor": INDEX_TYPES_3_0, "OutputTensor": ALL11}),
    ("3_0", DIMS_1_TO_8, {"InputTensor": _INTS_8, "IndicesTensor": INDEX_TYPES_3_0, "OutputTensor": _INTS_8}),
    ("2_1", DIMS_4, {"InputTensor": _INTS_8, "IndicesTensor": INDEX_TYPES_2_X, "OutputTensor": _INTS_8}),
    ("1_0", DIMS_4, {"InputTensor": FLOATS, "IndicesTensor": INDEX_TYPES_2_X, "OutputTensor": FLOATS}),
)

_NEGATIVE_NOTE = ("Negative indices of signed index types (INT32, INT64, from 3_0) count from the end of their "
                  "dimension, as the page says: -1 is the last element.")
_CLAMP_SOURCE = ("Chromium's WebNN DirectML back end (chromium/chromium services/webnn/dml/graph_impl_dml.cc, "
                 "CreateOperatorNodeForGather and ...GatherElements) passes out-of-range indices to DirectML "
                 "unchanged, relying on it: 'DirectML implementation for gather operator has already handled the "
                 "indices tensor by clamping it in the shader to prevent out-of-bounds access'")
_GATHER_OUT_OF_RANGE = (
    "An index outside its dimension is clamped into it, as DirectML's shader does: past the end it reads the last "
    "element, a negative one still outside after counting from the end (below -size) the first, so clamping before "
    "or after the negative wrap gives the same element; an unsigned index is never negative (UINT64 values past "
    "INT64's range read the last element). Source: " + _CLAMP_SOURCE + ". GATHER's page says only that invalid "
    "indices 'will yield incorrect outputs, but no failure will occur, and all reads will be clamped safely within "
    "the input tensor's memory'; dmlcli clamps the index, as Chromium describes, not the flat address.")

GATHER = Operator(
    name="GATHER", enum_value=67, family=FAMILY, prefix="",
    summary="gathers slices of the input along Axis at the positions IndicesTensor holds (numpy.take)",
    formula="OutputTensor[a..., j..., b...] = InputTensor[a..., IndicesTensor[j...], b...] (a: dims before Axis)",
    introduced=_GATHER_ROWS[-1].level, inputs=("InputTensor", "IndicesTensor"), support=_GATHER_ROWS,
    same_data_type=("InputTensor", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(AXIS, INDEX_DIMENSIONS), native_encoding=True, shape_rule=gather_shape,
    array_kernel=gather_kernel, gpu_array_kernel=gather_gpu_kernel, planned_kernel=gather_planned, exactness=EXACT,
    moves_input="InputTensor",
    notes=(
        "OutputTensor Sizes = InputTensor Sizes before Axis, the last IndexDimensions sizes of IndicesTensor, "
        "InputTensor Sizes after Axis, fitted into the common DimensionCount: leading ones added, or sizes of 1 "
        "dropped, leftmost first, as the page's examples do (its third example drops one between other sizes: "
        "{3} + {1, 2} gives {3, 2}); a size other than 1 that does not fit is refused.",
        "IndexDimensions may be 0 to IndicesTensor's DimensionCount (the page writes [0, DimensionCount), but its "
        "own first example uses 1 with 1-D tensors); left out, it is the whole DimensionCount, which gives the "
        "same Sizes whenever the leading sizes are ones.",
        _NEGATIVE_NOTE, _GATHER_OUT_OF_RANGE,
    ),
)


# ---------------------------------------------------------------- GATHER_ELEMENTS


def gather_elements_shape(query: ShapeQuery) -> dict:
    rank = _same_rank(query, ("InputTensor", "IndicesTensor"))
    axis = check_axis(query.parameters["Axis"], rank, "Axis")
    indices = query.shape("IndicesTensor")
    _sizes_except(indices, query.shape("InputTensor"), axis, "IndicesTensor", "InputTensor")
    return {"OutputTensor": indices}


def gather_elements_kernel(xp, inputs, outputs, params):
    data, indices = inputs
    (out,) = outputs
    axis = params["Axis"]
    positions = _clamped_positions(xp, indices, data.shape[axis])
    taken = xp.take_along_axis(_bits(xp, data), positions, axis=axis)
    return (_as_type(xp, taken, out.data_type.numpy_dtype),)


_ELEMENTS_ROWS = rows(
    ("4_1", DIMS_1_TO_8, {"InputTensor": ALL11, "IndicesTensor": INDEX_TYPES_3_0, "OutputTensor": ALL11}),
    ("3_0", DIMS_1_TO_8, {"InputTensor": _INTS_8, "IndicesTensor": INDEX_TYPES_3_0, "OutputTensor": _INTS_8}),
    ("2_1", DIMS_4, {"InputTensor": _INTS_8, "IndicesTensor": INDEX_TYPES_2_X, "OutputTensor": _INTS_8}),
)

GATHER_ELEMENTS = Operator(
    name="GATHER_ELEMENTS", enum_value=107, family=FAMILY, prefix="",
    summary="gathers single elements along Axis at the positions IndicesTensor holds (numpy.take_along_axis)",
    formula="OutputTensor[i, j, k] = InputTensor[i, IndicesTensor[i, j, k], k] (Axis 1; likewise for any Axis)",
    introduced=_ELEMENTS_ROWS[-1].level, inputs=("InputTensor", "IndicesTensor"), support=_ELEMENTS_ROWS,
    same_data_type=("InputTensor", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(AXIS,), native_encoding=True, shape_rule=gather_elements_shape,
    array_kernel=gather_elements_kernel, exactness=EXACT,
    notes=("OutputTensor has IndicesTensor's Sizes; IndicesTensor's Sizes equal InputTensor's outside Axis.",
           _NEGATIVE_NOTE, _GATHER_OUT_OF_RANGE),
)


# ---------------------------------------------------------------- GATHER_ND, GATHER_ND1


class _NdLayout(Frozen):
    """How GATHER_ND(1) and SCATTER_ND see their tensors: the meaningful Sizes, the batch and the tuple size.
    An immutable record (records.py), equal to another of the same fields."""

    data: tuple[int, ...]  # InputTensor's meaningful Sizes
    indices: tuple[int, ...]  # IndicesTensor's meaningful Sizes (the last is the tuple size)
    batch: int
    tuple_size: int

    def __init__(self, data: tuple[int, ...], indices: tuple[int, ...], batch: int, tuple_size: int) -> None:
        vars(self).update(data=data, indices=indices, batch=batch, tuple_size=tuple_size)

    def _fields(self) -> tuple:
        return (self.data, self.indices, self.batch, self.tuple_size)

    def __eq__(self, other) -> bool:
        return self._fields() == other._fields() if other.__class__ is self.__class__ else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    @property
    def gathered(self) -> tuple[int, ...]:
        """The meaningful Sizes of a gather's output (= a scatter's updates)."""
        return self.data[:self.batch] + self.indices[self.batch:-1] + self.data[self.batch + self.tuple_size:]


def _nd_layout(data_shape, indices_shape, params, *, batch: int = 0) -> _NdLayout:
    data = _meaningful(data_shape, params["InputDimensionCount"], "InputDimensionCount", "InputTensor")
    indices = _meaningful(indices_shape, params["IndicesDimensionCount"], "IndicesDimensionCount", "IndicesTensor")
    if batch >= len(indices) or batch >= len(data):
        raise RuleViolation(f"BatchDimensionCount {batch} leaves no dimension outside the batch (allowed: 0 to "
                            f"{min(len(indices), len(data)) - 1} for these InputDimensionCount and "
                            "IndicesDimensionCount)")
    if data[:batch] != indices[:batch]:
        raise RuleViolation(f"the batch Sizes differ: InputTensor {describe_sizes(data[:batch])}, IndicesTensor "
                            f"{describe_sizes(indices[:batch])} (the first BatchDimensionCount meaningful sizes "
                            "must be equal)")
    tuple_size = indices[-1]
    if tuple_size > len(data) - batch:
        raise RuleViolation(f"IndicesTensor's last size (the index tuple size) is {tuple_size}, more than the "
                            f"{len(data) - batch} meaningful InputTensor dimensions it can address")
    return _NdLayout(data, indices, batch, tuple_size)


def _nd_params(params) -> dict:
    return {"InputDimensionCount": params["InputDimensionCount"],
            "IndicesDimensionCount": params["IndicesDimensionCount"]}


def gather_nd_shape(query: ShapeQuery) -> dict:
    rank = _same_rank(query, ("InputTensor", "IndicesTensor"))
    layout = _nd_layout(query.shape("InputTensor"), query.shape("IndicesTensor"), _nd_params(query.parameters),
                        batch=query.parameters.get("BatchDimensionCount", 0))
    return {"OutputTensor": _right_aligned(layout.gathered, rank, "OutputTensor")}


def _nd_targets(xp, layout: _NdLayout, indices, *, clamped: bool):
    """Each index tuple's row in the input seen as (batch * addressed blocks, block elements): (rows, valid).
    `clamped` (a gather): each coordinate is clamped into its dimension and valid is None; otherwise (a scatter)
    valid marks the tuples whose coordinates all lie in their dimensions (None where all do)."""
    addressed = layout.data[layout.batch:layout.batch + layout.tuple_size]
    tuples = indices.reshape(-1, layout.tuple_size)
    batches = math.prod(layout.data[:layout.batch])
    per_batch = tuples.shape[0] // batches
    linear = xp.zeros(tuples.shape[0], dtype=np.intp)
    valid = None
    for k, size in enumerate(addressed):
        column = xp.ascontiguousarray(tuples[:, k])
        positions, ok = (_clamped_positions(xp, column, size), None) if clamped else _positions(xp, column, size)
        linear = linear * size + positions
        if ok is not None:
            valid = ok if valid is None else valid & ok
    blocks = math.prod(addressed)
    batch_of = xp.arange(tuples.shape[0], dtype=np.intp) // per_batch
    return batch_of * blocks + linear, valid


def gather_nd_kernel(xp, inputs, outputs, params):
    data, indices = inputs
    (out,) = outputs
    layout = _nd_layout(data.shape, indices.shape, _nd_params(params), batch=params.get("BatchDimensionCount", 0))
    block = math.prod(layout.data[layout.batch + layout.tuple_size:])
    rows_of_data = _bits(xp, data).reshape(-1, block)
    targets, _ = _nd_targets(xp, layout, indices.reshape(layout.indices), clamped=True)
    taken = xp.take(rows_of_data, targets, axis=0)
    return (_as_type(xp, taken, out.data_type.numpy_dtype).reshape(out.shape),)


_ND_ROWS = rows(
    ("4_1", DIMS_1_TO_8, {"InputTensor": ALL11, "IndicesTensor": INDEX_TYPES_3_0, "OutputTensor": ALL11}),
    ("3_0", DIMS_1_TO_8, {"InputTensor": _INTS_8, "IndicesTensor": INDEX_TYPES_3_0, "OutputTensor": _INTS_8}),
    ("2_1", DIMS_4, {"InputTensor": _INTS_8, "IndicesTensor": INDEX_TYPES_2_X, "OutputTensor": _INTS_8}),
)
_ND1_ROWS = _ND_ROWS[:2]

_ND_SIZES_NOTE = ("OutputTensor Sizes = IndicesTensor's meaningful Sizes without the last (the tuple size q), then "
                  "InputTensor's meaningful Sizes after the first q, right-aligned into the common DimensionCount. "
                  "The page's pseudo-code takes InputTensor.Sizes[DimensionCount - q ..], which contradicts its own "
                  "examples ({3,4,5,6,7} with q 3 gives {.., 6, 7}); dmlcli follows the examples (= ONNX GatherND).")
_ND_OUT_OF_RANGE = (
    "Each coordinate of an index tuple outside its dimension is clamped into it (past the end: the last position; "
    "below -size: the first), as GATHER's and GATHER_ELEMENTS's indices are. The page is silent; Chromium's WebNN "
    "back end (services/webnn/dml/graph_impl_dml.cc, CreateOperatorNodeForGatherND) passes such tuples to "
    "DirectML unchanged: 'DirectML handles out-of-bounds indices internally and ensures no invalid reads outside "
    "of input tensor', and says of DirectML's gathers that they clamp the indices in the shader; dmlcli applies "
    "that clamp coordinate by coordinate.")
_ND_COUNTS_NOTE = ("InputDimensionCount and IndicesDimensionCount count the meaningful trailing dimensions (the "
                   "leading ones must be 1): 1 to the DimensionCount, which they are when left out.")

GATHER_ND = Operator(
    name="GATHER_ND", enum_value=108, family=FAMILY, prefix="",
    summary="gathers blocks of the input addressed by the index tuples in IndicesTensor's last dimension",
    formula="OutputTensor[j..., t...] = InputTensor[IndicesTensor[j..., 0], ..., IndicesTensor[j..., q-1], t...]",
    introduced=_ND_ROWS[-1].level, inputs=("InputTensor", "IndicesTensor"), support=_ND_ROWS,
    same_data_type=("InputTensor", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(INPUT_DIMENSION_COUNT, INDICES_DIMENSION_COUNT), native_encoding=True, shape_rule=gather_nd_shape,
    array_kernel=gather_nd_kernel, exactness=EXACT,
    notes=(_ND_SIZES_NOTE, _ND_COUNTS_NOTE, _NEGATIVE_NOTE, _ND_OUT_OF_RANGE),
)

GATHER_ND1 = Operator(
    name="GATHER_ND1", enum_value=140, family=FAMILY, prefix="",
    summary="GATHER_ND with BatchDimensionCount leading batch dimensions shared by input, indices and output",
    formula="OutputTensor[b..., j..., t...] = InputTensor[b..., IndicesTensor[b..., j..., 0..q-1], t...]",
    introduced=_ND1_ROWS[-1].level, inputs=("InputTensor", "IndicesTensor"), support=_ND1_ROWS,
    same_data_type=("InputTensor", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(INPUT_DIMENSION_COUNT, INDICES_DIMENSION_COUNT, BATCH_DIMENSION_COUNT), native_encoding=True,
    shape_rule=gather_nd_shape, array_kernel=gather_nd_kernel, exactness=EXACT,
    notes=(_ND_SIZES_NOTE + " With batch dimensions: the batch Sizes first (the page's pseudo-code has no batch "
           "term; its second example, {1,3,2,2} and {1,3,2,2} with 1 batch dimension giving {1,1,3,2}, is followed).",
           "The first BatchDimensionCount meaningful sizes of InputTensor and IndicesTensor must be equal; "
           "BatchDimensionCount 0 is GATHER_ND.", _ND_COUNTS_NOTE, _NEGATIVE_NOTE, _ND_OUT_OF_RANGE),
)


# ---------------------------------------------------------------- SCATTER_ELEMENTS, SCATTER_ND


def scatter_elements_shape(query: ShapeQuery) -> dict:
    rank = _same_rank(query, ("InputTensor", "IndicesTensor", "UpdatesTensor"))
    data, indices, updates = (query.shape(n) for n in ("InputTensor", "IndicesTensor", "UpdatesTensor"))
    axis = check_axis(query.parameters["Axis"], rank, "Axis")
    _sizes_except(indices, data, axis, "IndicesTensor", "InputTensor")
    if updates != indices:
        raise RuleViolation(f"UpdatesTensor Sizes {describe_sizes(updates)} and IndicesTensor Sizes "
                            f"{describe_sizes(indices)} differ; they must be equal")
    return {"OutputTensor": data}


def scatter_elements_kernel(xp, inputs, outputs, params):
    data, indices, updates = inputs
    (out,) = outputs
    axis = params["Axis"]
    result = _bits(xp, data).copy()
    positions, valid = _positions(xp, indices, data.shape[axis])
    # Each update's flat position in the output: its own coordinates with the index in place of Axis.
    strides = [math.prod(data.shape[d + 1:]) for d in range(data.ndim)]
    targets = positions * strides[axis] if strides[axis] != 1 else positions
    for d in range(data.ndim):
        if d != axis and indices.shape[d] > 1:
            coordinate = xp.arange(indices.shape[d], dtype=np.intp) * strides[d]
            targets = targets + coordinate.reshape((1,) * d + (-1,) + (1,) * (data.ndim - d - 1))
    values = _bits(xp, updates)
    targets, values = targets.reshape(-1), values.reshape(-1)
    if valid is not None:
        keep = valid.reshape(-1)
        targets, values = targets[keep], values[keep]
    _scatter_rows(xp, result.reshape(-1), targets, values)
    return (_as_type(xp, result, out.data_type.numpy_dtype),)


def scatter_nd_shape(query: ShapeQuery) -> dict:
    rank = _same_rank(query, ("InputTensor", "IndicesTensor", "UpdatesTensor"))
    layout = _nd_layout(query.shape("InputTensor"), query.shape("IndicesTensor"), _nd_params(query.parameters))
    expected = _right_aligned(layout.gathered, rank, "UpdatesTensor")
    updates = query.shape("UpdatesTensor")
    if updates != expected:
        raise RuleViolation(f"UpdatesTensor Sizes {describe_sizes(updates)} are not {describe_sizes(expected)}, "
                            "IndicesTensor's meaningful Sizes without the tuple size, then InputTensor's meaningful "
                            "Sizes after the tuple's dimensions")
    return {"OutputTensor": query.shape("InputTensor")}


def scatter_nd_kernel(xp, inputs, outputs, params):
    data, indices, updates = inputs
    (out,) = outputs
    layout = _nd_layout(data.shape, indices.shape, _nd_params(params))
    block = math.prod(layout.data[layout.tuple_size:])
    result = _bits(xp, data).copy()
    targets, valid = _nd_targets(xp, layout, indices.reshape(layout.indices), clamped=False)
    values = _bits(xp, updates).reshape(-1, block)
    if valid is not None:
        targets, values = targets[valid], values[valid]
    _scatter_rows(xp, result.reshape(-1, block), targets, values)  # whole blocks: the last tuple naming one wins
    return (_as_type(xp, result, out.data_type.numpy_dtype),)


_SCATTER_ROWS = rows(
    ("4_1", DIMS_1_TO_8, {"InputTensor": ALL11, "IndicesTensor": INDEX_TYPES_3_0, "UpdatesTensor": ALL11,
                          "OutputTensor": ALL11}),
    ("3_0", DIMS_1_TO_8, {"InputTensor": _INTS_8, "IndicesTensor": INDEX_TYPES_3_0, "UpdatesTensor": _INTS_8,
                          "OutputTensor": _INTS_8}),
    ("2_1", DIMS_4, {"InputTensor": _INTS_8, "IndicesTensor": INDEX_TYPES_2_X, "UpdatesTensor": _INTS_8,
                     "OutputTensor": _INTS_8}),
    # The page heads this row 1_0; DirectML.h declares SCATTER_ELEMENTS from DML_TARGET_VERSION 0x2000 and the
    # page's minimum Windows build is FL 2_0's, so dmlcli dates it 2_0.
    ("2_0", DIMS_4, {"InputTensor": FLOATS, "IndicesTensor": INDEX_TYPES_2_X, "UpdatesTensor": FLOATS,
                     "OutputTensor": FLOATS}),
)
_SCATTER_ND_ROWS = _SCATTER_ROWS[:3]

_SCATTER_OUT_OF_RANGE = ("An update whose index is outside its dimension (after the negative wrap) is skipped: the "
                         "output keeps the input's element there. The page is silent; DirectML does not fault.")
_SCATTER_TYPES = ("InputTensor", "UpdatesTensor", "OutputTensor")

SCATTER_ELEMENTS = Operator(
    name="SCATTER_ELEMENTS", enum_value=94, family=FAMILY, prefix="",
    summary="copies the input, then writes each update at the position along Axis its index gives (alias SCATTER)",
    formula="OutputTensor = InputTensor; OutputTensor[i, IndicesTensor[i, j, k], k] = UpdatesTensor[i, j, k] "
            "(Axis 1; likewise for any Axis)",
    introduced=_SCATTER_ROWS[-1].level, inputs=("InputTensor", "IndicesTensor", "UpdatesTensor"),
    support=_SCATTER_ROWS, same_data_type=_SCATTER_TYPES, same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(AXIS,), native_encoding=True, shape_rule=scatter_elements_shape,
    array_kernel=scatter_elements_kernel, exactness=EXACT,
    notes=(
        "DirectML.h also names it DML_OPERATOR_SCATTER (the same value, 94): 'scatter' finds it.",
        "Introduced at 2_0, not at the 1_0 the page's table heads: DirectML.h declares it from target version "
        "0x2000 and the page's minimum Windows build is that of FL 2_0.",
        "IndicesTensor's Sizes equal InputTensor's outside Axis (the page), and UpdatesTensor's equal IndicesTensor's.",
        "Two updates for one output element (the page: invalid, no promised winner): the last in row-major order "
        "of UpdatesTensor wins, on both backends (as the page's own first example shows).",
        _NEGATIVE_NOTE, _SCATTER_OUT_OF_RANGE,
    ),
)

SCATTER_ND = Operator(
    name="SCATTER_ND", enum_value=109, family=FAMILY, prefix="",
    summary="copies the input, then writes each block of updates where its index tuple points",
    formula="OutputTensor = InputTensor; OutputTensor[IndicesTensor[j..., 0..q-1], t...] = UpdatesTensor[j..., t...]",
    introduced=_SCATTER_ND_ROWS[-1].level, inputs=("InputTensor", "IndicesTensor", "UpdatesTensor"),
    support=_SCATTER_ND_ROWS, same_data_type=_SCATTER_TYPES, same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(INPUT_DIMENSION_COUNT, INDICES_DIMENSION_COUNT), native_encoding=True,
    shape_rule=scatter_nd_shape, array_kernel=scatter_nd_kernel, exactness=EXACT,
    notes=(
        "UpdatesTensor Sizes = IndicesTensor's meaningful Sizes without the last (the tuple size q), then "
        "InputTensor's meaningful Sizes after the first q, right-aligned (as GATHER_ND's output; the page's "
        "pseudo-code contradicts its example the same way). OutputTensor has InputTensor's Sizes.",
        _ND_COUNTS_NOTE + " (This page writes the ranges half-open, [1, DimensionCount); its example uses "
        "InputDimensionCount 5 for 5-D tensors, so dmlcli allows the DimensionCount, as GATHER_ND's page does.)",
        "Two index tuples naming one block (the page: invalid, no promised winner): the last tuple in row-major "
        "order wins, on both backends.",
        _NEGATIVE_NOTE, _SCATTER_OUT_OF_RANGE,
    ),
)


# ---------------------------------------------------------------- ONE_HOT


def one_hot_shape(query: ShapeQuery) -> dict:
    rank = _same_rank(query, ("IndicesTensor", "ValuesTensor"))
    indices = query.shape("IndicesTensor")
    axis = check_axis(query.parameters["Axis"], rank, "Axis", "IndicesTensor")
    if indices[axis] != 1:
        raise RuleViolation(f"IndicesTensor Sizes {describe_sizes(indices)} have {indices[axis]} at Axis {axis}; "
                            "the size along Axis must be 1")
    if math.prod(query.shape("ValuesTensor")) < 2:
        raise RuleViolation(f"ValuesTensor Sizes {describe_sizes(query.shape('ValuesTensor'))} hold fewer than 2 "
                            "elements; it needs OffValue and OnValue")
    given = query.given_outputs.get("OutputTensor")
    if given is None:
        raise InputError("ONE_HOT takes the depth of its sequences from OutputTensor's Sizes along Axis: give them "
                         "with --output-shape (output_shape= in the API), e.g. IndicesTensor's Sizes with the depth "
                         "at Axis")
    given = tuple(given)
    if len(given) != rank:
        raise RuleViolation(f"OutputTensor has {len(given)} dimensions and IndicesTensor {rank}; they must have the "
                            "same DimensionCount")
    _sizes_except(given, indices, axis, "OutputTensor", "IndicesTensor")
    return {"OutputTensor": given}


def one_hot_kernel(xp, inputs, outputs, params):
    indices, values = inputs
    (out,) = outputs
    axis = params["Axis"]
    depth = out.shape[axis]
    table = _bits(xp, values).reshape(-1)
    off, on = table[0], table[1]  # OnValue: index 1 along the last dimension of size > 1 = flat element 1
    positions, valid = _positions(xp, indices, depth)
    along = xp.arange(depth, dtype=np.intp).reshape((1,) * axis + (-1,) + (1,) * (len(out.shape) - axis - 1))
    hot = along == positions
    if valid is not None:
        hot &= valid
    result = xp.where(hot, on, off)
    return (_as_type(xp, result, out.data_type.numpy_dtype),)


_ONE_HOT_ROWS = rows(
    ("4_1", DIMS_1_TO_8, {"IndicesTensor": INDEX_TYPES_3_0, "ValuesTensor": ALL11, "OutputTensor": ALL11}),
    ("3_0", DIMS_1_TO_8, {"IndicesTensor": INDEX_TYPES_3_0, "ValuesTensor": _INTS_8, "OutputTensor": _INTS_8}),
    ("2_1", DIMS_4, {"IndicesTensor": INDEX_TYPES_2_X, "ValuesTensor": _INTS_8, "OutputTensor": _INTS_8}),
    ("2_0", DIMS_4, {"IndicesTensor": INDEX_TYPES_2_X, "ValuesTensor": FLOATS, "OutputTensor": FLOATS}),
)

ONE_HOT = Operator(
    name="ONE_HOT", enum_value=95, family=FAMILY, prefix="",
    summary="writes OnValue at each sequence's index along Axis and OffValue everywhere else",
    formula="OutputTensor[c] = c[Axis] == IndicesTensor[c with c[Axis] = 0] ? ValuesTensor[1] : ValuesTensor[0]",
    introduced=_ONE_HOT_ROWS[-1].level, inputs=("IndicesTensor", "ValuesTensor"), support=_ONE_HOT_ROWS,
    same_data_type=("ValuesTensor", "OutputTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    parameters=(AXIS,), native_encoding=True, shape_rule=one_hot_shape, array_kernel=one_hot_kernel,
    exactness=EXACT,
    notes=(
        "OutputTensor's Sizes come from its desc (--output-shape; output_shape= in the API): IndicesTensor's "
        "Sizes with the depth at Axis, where IndicesTensor has size 1.",
        "OffValue is ValuesTensor's first element, OnValue its second in memory order (the page: the 1st element "
        "along the fastest-changing dimension of size > 1); ValuesTensor holds at least 2 elements.",
        "Negative indices of signed types (from 3_0) count from the end of the sequence. An index at or past the "
        "depth (the page: ignored), or below -depth (the page is silent; ONNX agrees), sets the whole sequence "
        "to OffValue.",
    ),
)


# ---------------------------------------------------------------- TOP_K, TOP_K1


def top_k_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    axis = check_axis(query.parameters["Axis"], len(shape), "Axis")
    k = query.parameters["K"]
    if not 1 <= k <= shape[axis]:
        raise RuleViolation(f"K {k} is out of range for InputTensor's size {shape[axis]} along Axis {axis} "
                            f"(allowed: 1 to {shape[axis]})")
    sizes = shape[:axis] + (k,) + shape[axis + 1:]
    return {"OutputValueTensor": sizes, "OutputIndexTensor": sizes}


def _order_key(xp, x, decreasing: bool):
    """An unsigned key whose ascending order is the wanted order of the values (ascending, or descending where
    `decreasing`): -0 equal to +0, every NaN equal and above +inf. Made of whole-array integer operations (no
    float compare per element but the NaN check), as it runs over every element."""
    width = x.dtype.itemsize * 8
    unsigned = np.dtype(f"uint{width}")
    sign = unsigned.type(1 << (width - 1))
    if x.dtype.kind == "u":
        key = x.copy()
    elif x.dtype.kind == "i":
        key = x.view(unsigned) ^ sign
    else:
        bits = x.view(unsigned)
        # Sign-magnitude to an ordered integer: negative values have every bit flipped, the others the sign bit.
        key = bits ^ ((bits >> unsigned.type(width - 1)) * unsigned.type((1 << (width - 1)) - 1) | sign)
        key += key == unsigned.type((1 << (width - 1)) - 1)  # -0 (0x7F..F after the flip) joins +0 (0x80..0)
        nan = xp.isnan(x)
        if bool(nan.any()):
            key[nan] = np.iinfo(unsigned).max
    if decreasing:
        xp.invert(key, out=key)  # largest first; the index still breaks ties in ascending order
    return key


def top_k_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    values_info, index_info = outputs
    axis, k = params["Axis"], params["K"]
    decreasing = params.get("AxisDirection", "DECREASING") == "DECREASING"
    moved = xp.moveaxis(x, axis, -1)
    key = _order_key(xp, moved, decreasing)
    length = moved.shape[-1]
    if key.dtype.itemsize <= 4:
        # One 64-bit key per element, (order key, index): all distinct, so an unstable partition and sort
        # give the stable order, ties by ascending index, in O(n) for the selection.
        combined = key.astype(np.uint64)
        combined <<= np.uint64(32)
        combined |= xp.arange(length, dtype=np.uint64)
        if k < length:
            combined = xp.partition(combined, k - 1, axis=-1)[..., :k]
        chosen = xp.sort(combined, axis=-1)[..., :k]
        index = (chosen & np.uint64(0xFFFFFFFF)).astype(np.intp)
    else:
        index = xp.argsort(key, axis=-1, kind="stable")[..., :k]
    values = xp.take_along_axis(_bits(xp, moved), index, axis=-1)
    values = _as_type(xp, values, values_info.data_type.numpy_dtype)
    return (xp.moveaxis(values, -1, axis),
            xp.moveaxis(index.astype(index_info.data_type.numpy_dtype), -1, axis))


_TOP_K_8 = _INTS_8
_TOP_K_10 = (FLOAT32, FLOAT16, INT64, INT32, INT16, INT8, UINT64, UINT32, UINT16, UINT8)


def _top_k_row(level, dims, types, index_types):
    return (level, dims, {"InputTensor": types, "OutputValueTensor": types, "OutputIndexTensor": index_types})


_TOP_K_ROWS = rows(
    _top_k_row("5_0", DIMS_1_TO_8, _TOP_K_10, (UINT64, UINT32)),
    _top_k_row("3_1", DIMS_1_TO_8, _TOP_K_8, (UINT32,)),
    _top_k_row("2_1", DIMS_4, _TOP_K_8, (UINT32,)),
    _top_k_row("2_0", DIMS_4, FLOATS, (UINT32,)),
)
_TOP_K1_ROWS = _TOP_K_ROWS[:3]

_TOP_K_NOTES = (
    "Ties (equal values, -0 and +0 among them) keep ascending index order, whatever the direction (the page).",
    "NaN counts as larger than every number, any NaN equal to any other: DECREASING lists NaNs first, INCREASING "
    "last (the page is silent; this is a total order, the same on both backends). Values are copied bit for bit.",
    "K may be 1 to the size along Axis: the page writes 'less than' the size, but a K equal to it (every element, "
    "sorted) is what ONNX TopK allows and DirectML implements it; dmlcli accepts it.",
    "OutputIndexTensor's type is chosen with --output-dtype (UINT32 by default; UINT64 from 5_0).",
)

TOP_K = Operator(
    name="TOP_K", enum_value=71, family=FAMILY, prefix="",
    summary="the K largest elements of each sequence along Axis, largest first, and their indices",
    formula="OutputValueTensor, OutputIndexTensor = the first K of each sequence sorted by decreasing value "
            "(ties by increasing index)",
    introduced=_TOP_K_ROWS[-1].level, inputs=("InputTensor",), support=_TOP_K_ROWS,
    same_data_type=("InputTensor", "OutputValueTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    output="OutputValueTensor", extra_outputs=("OutputIndexTensor",), parameters=(AXIS, K),
    default_output_type=UINT32, native_encoding=True, shape_rule=top_k_shape, array_kernel=top_k_kernel,
    exactness=EXACT, notes=_TOP_K_NOTES,
)

TOP_K1 = Operator(
    name="TOP_K1", enum_value=112, family=FAMILY, prefix="",
    summary="the K largest (DECREASING) or smallest (INCREASING) elements of each sequence along Axis, and their "
            "indices",
    formula="the first K of each sequence sorted by AxisDirection (ties by increasing index)",
    introduced=_TOP_K1_ROWS[-1].level, inputs=("InputTensor",), support=_TOP_K1_ROWS,
    same_data_type=("InputTensor", "OutputValueTensor"), same_sizes=(), cpu_kernel=None, cuda_body="",
    output="OutputValueTensor", extra_outputs=("OutputIndexTensor",), parameters=(AXIS, K, AXIS_DIRECTION),
    default_output_type=UINT32, native_encoding=True, shape_rule=top_k_shape, array_kernel=top_k_kernel,
    exactness=EXACT, notes=_TOP_K_NOTES,
)


# ---------------------------------------------------------------- NONZERO_COORDINATES


def nonzero_shape(query: ShapeQuery) -> dict:
    shape = query.shape("InputTensor")
    rank = len(shape)
    elements = math.prod(shape)
    effective = next((rank - d for d, size in enumerate(shape) if size != 1), 0)
    count = tuple(query.given_outputs.get("OutputCountTensor", (1,) * rank))
    if any(size != 1 for size in count):
        raise RuleViolation(f"OutputCountTensor Sizes {describe_sizes(count)} must all be 1 (a scalar)")
    coordinates = query.given_outputs.get("OutputCoordinatesTensor")
    if coordinates is None:
        coordinates = (1,) * (rank - 2) + (elements, rank)
    coordinates = tuple(coordinates)
    if len(coordinates) < 2 or any(size != 1 for size in coordinates[:-2]) or coordinates[-2] != elements:
        raise RuleViolation(f"OutputCoordinatesTensor Sizes {describe_sizes(coordinates)} are not {{1, ..., M, N}} "
                            f"with M = {elements}, InputTensor's element count (room for every element)")
    if not max(effective, 1) <= coordinates[-1] <= rank:
        raise RuleViolation(f"OutputCoordinatesTensor's last size N = {coordinates[-1]} is out of range (allowed: "
                            f"InputTensor's effective rank {effective} to its DimensionCount {rank}, and at least 1)")
    return {"OutputCountTensor": count, "OutputCoordinatesTensor": coordinates}


def nonzero_kernel(xp, inputs, outputs, params):
    (x,) = inputs
    count_info, coordinates_info = outputs
    columns = coordinates_info.shape[-1]
    found = xp.argwhere(x != 0)  # -0.0 == 0; NaN != 0 counts as non-zero
    coordinates = xp.zeros((x.size, columns), dtype=coordinates_info.data_type.numpy_dtype)
    coordinates[:found.shape[0]] = found[:, x.ndim - columns:]
    count = xp.full(count_info.shape, found.shape[0], dtype=count_info.data_type.numpy_dtype)
    return count, coordinates.reshape(coordinates_info.shape)


_NONZERO_TYPES = _INTS_8
_NONZERO_ROWS = rows(
    ("4_0", {"InputTensor": (DIMS_1_TO_8, _NONZERO_TYPES), "OutputCountTensor": (DIMS_1_TO_8, (UINT32,)),
             "OutputCoordinatesTensor": (tuple(range(2, 9)), (UINT32,))}),
    ("3_0", {"InputTensor": ((4, 5), _NONZERO_TYPES), "OutputCountTensor": ((4, 5), (UINT32,)),
             "OutputCoordinatesTensor": ((4, 5), (UINT32,))}),
)

NONZERO_COORDINATES = Operator(
    name="NONZERO_COORDINATES", enum_value=133, family=FAMILY, prefix="",
    summary="the count and the coordinates (one row each, in element order) of the input's non-zero elements",
    formula="OutputCountTensor = number of x != 0; OutputCoordinatesTensor[m] = the last N coordinates of the m-th "
            "non-zero element (row-major order)",
    introduced=_NONZERO_ROWS[-1].level, inputs=("InputTensor",), support=_NONZERO_ROWS, same_data_type=(),
    same_sizes=(), cpu_kernel=None, cuda_body="", output="OutputCountTensor",
    extra_outputs=("OutputCoordinatesTensor",), shape_rule=nonzero_shape, array_kernel=nonzero_kernel,
    exactness=EXACT,
    notes=(
        "OutputCoordinatesTensor is sized for the worst case, {1, ..., M, N} with M the input's element count: "
        "its first OutputCount rows hold coordinates; dmlcli writes 0 in the rest (the page: undefined).",
        "N, the coordinates per row, is the input's DimensionCount unless the output Sizes are given "
        "(output_shapes= in the API, a DxDispatch desc): the page allows the effective rank (leading ones "
        "dropped) up to the DimensionCount; a smaller N keeps the last N coordinates.",
        "OutputCountTensor has the input's DimensionCount, all sizes 1, unless given. Both outputs are UINT32.",
        "-0.0 and +0.0 are zero (the page); NaN is non-zero (NaN != 0).",
    ),
)


OPERATORS = (GATHER, GATHER_ELEMENTS, GATHER_ND, GATHER_ND1, SCATTER_ELEMENTS, SCATTER_ND, ONE_HOT, TOP_K, TOP_K1,
             NONZERO_COORDINATES)
