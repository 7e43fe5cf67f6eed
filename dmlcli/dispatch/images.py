"""Image resources and image outputs (.jpg / .png), through Pillow, as DxDispatch's ImageReaderWriter.cpp does them.

Reading (`"initialValues": {"sourcePath": "x.jpg"}` with `"resampleSize": [1, C, H, W]`): the image is decoded,
converted to RGB (C = 3) or RGBA (C = 4), scaled to W x H with a bicubic filter where its size differs, and
laid out NCHW (planar), each 8-bit component c becoming float(c) / 255.0f, in FLOAT32 or FLOAT16 (through
float, rounded to nearest even). DxDispatch decodes and scales with Windows' WIC (HighQualityCubic), so a
scaled image's values can differ from Pillow's in the last bits; unscaled PNG pixels are the same.

Writing (a writeFile target ending .png or .jpg): `dimensions` [N, C, H, W] (C defaults to 1, H and W to 1)
read the buffer as NCHW, C 1 (grey), 3 (RGB) or 4 (RGBA); each value v becomes the byte
trunc(max(0, min(1, v)) * 255.0f), NaN giving 255, as std::min / std::max and the cast to a byte give it.

Images are untrusted: the header's size is checked (at most MAX_IMAGE_PIXELS, and the decoded pixels claimed
from the memory budget) before any pixel is decoded.
"""

from __future__ import annotations

import io
import math
import warnings
from pathlib import Path

import numpy as np

from ..data_types import DataType
from ..errors import BackendUnavailableError, InputError, raise_interruption
from .jsonc import shown
from .memory import MemoryBudget

INSTALL_IMAGES = "pip install 'dmlcli[images]'"
IMAGE_SUFFIXES = (".jpg", ".png")  # DxDispatch's two: other extensions (.jpeg too) are raw bytes, as there
# 2^26 pixels (an 8192 x 8192 image) at most, whatever memory says: a small file can declare 10^9 pixels.
# (Below Pillow's own decompression-bomb threshold, which is reported in the same words.)
MAX_IMAGE_PIXELS = 1 << 26
IMAGE_DATA_TYPES = ("FLOAT32", "FLOAT16")
_WRITE_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def import_pillow():
    try:
        from PIL import Image
    except ImportError as error:
        raise_interruption(error)
        raise BackendUnavailableError(f"image files (.jpg, .png) need Pillow, which is not installed: {INSTALL_IMAGES}") \
            from None
    return Image


def check_image_type(data_type: DataType, where: str) -> None:
    if data_type.name not in IMAGE_DATA_TYPES:
        raise InputError(f"{where}: images are read and written as FLOAT32 or FLOAT16, not {data_type.name} "
                         "(as in DxDispatch)")


def parse_resample_size(value, where: str) -> tuple[int, int, int]:
    """resampleSize [1, C, H, W] -> (C, H, W); C must be 3 or 4 (DxDispatch reads RGB or RGBA)."""
    if not isinstance(value, list) or len(value) != 4 or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 0xFFFFFFFF for v in value):
        raise InputError(f"{where}: an image needs \"resampleSize\" [1, C, H, W] (four positive integers, N,C,H,W "
                         f"order), found {shown(value)}")
    n, channels, height, width = value
    if n != 1:
        raise InputError(f"{where}: resampleSize's N must be 1, found {n}")
    if channels not in (3, 4):
        raise InputError(f"{where}: resampleSize's C must be 3 (RGB) or 4 (RGBA), found {channels}")
    if height * width > MAX_IMAGE_PIXELS:
        raise InputError(f"{where}: resampleSize {height} x {width} is more than the {MAX_IMAGE_PIXELS} pixels an "
                         "image may have")
    return channels, height, width


def decoding_peak(source_pixels: int, size: tuple[int, int, int], data_type: DataType) -> int:
    """The bytes read_image holds at once for an image of `source_pixels` made `size` (C, H, W): the decoded image
    and its conversion to RGB or RGBA (4 bytes a pixel each at most), the scaled one and its bytes, the tensor
    made, and one plane in FLOAT32 on the way to FLOAT16."""
    channels, height, width = size
    pixels = height * width
    return 8 * source_pixels + 2 * channels * pixels + channels * pixels * (data_type.bits // 8) + 4 * pixels


def read_image(data: bytes, data_type: DataType, size: tuple[int, int, int], *, budget: MemoryBudget,
               where: str) -> memoryview:
    """The image's pixels as an NCHW tensor's bytes (ReadTensorFromImage + ConvertPixelsToTensor).

    Only the header is read before what decoding takes is claimed (decoding_peak); then the image is decoded,
    scaled, and converted into the tensor a plane at a time, so that no float copy of the whole image is made
    beside the tensor."""
    Image = import_pillow()
    channels, height, width = size
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))  # reads the header only
            source_width, source_height = image.size
            if source_width * source_height > MAX_IMAGE_PIXELS:
                raise InputError(f"{where}: the image is {source_width} x {source_height} pixels, more than the "
                                 f"{MAX_IMAGE_PIXELS} pixels an image may have; nothing was decoded")
            budget.claim(0, f"decoding a {source_width} x {source_height} image", where,
                         peak=decoding_peak(source_width * source_height, size, data_type))
            mode = "RGB" if channels == 3 else "RGBA"
            if image.mode != mode:
                image = image.convert(mode)
            if image.size != (width, height):
                image = image.resize((width, height), Image.Resampling.BICUBIC)
            pixels = np.frombuffer(image.tobytes(), dtype=np.uint8).reshape(height, width, channels)
            del image
    except InputError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise InputError(f"{where}: the image declares more than the {MAX_IMAGE_PIXELS} pixels an image may have; "
                         "nothing was decoded") from None
    except Exception as error:  # Pillow's UnidentifiedImageError, OSError on truncated data, bomb warnings
        raise InputError(f"{where}: is not an image Pillow can read ({type(error).__name__})") from None
    # static_cast<float>(component) / 255.0f, in float; planar (CHW), one plane at a time.
    planar = np.empty((channels, height, width), dtype=np.dtype(data_type.numpy_dtype).newbyteorder("<"))
    plane = np.empty((height, width), dtype=np.float32) if data_type.name == "FLOAT16" else None
    for channel in range(channels):
        target = planar[channel] if plane is None else plane
        np.divide(pixels[:, :, channel], np.float32(255.0), out=target, dtype=np.float32)
        if plane is not None:
            planar[channel] = plane  # float to half, rounded to nearest even
    return memoryview(planar.reshape(-1).view(np.uint8)).toreadonly()


def image_layout(dimensions: tuple[int, ...] | None) -> tuple[int, int, int]:
    """(C, H, W) of an image writeFile, as Executor.cpp reads its dimensions (missing ones are 1)."""
    dims = tuple(dimensions or ())
    channels = dims[1] if len(dims) > 1 else 1
    height = dims[2] if len(dims) > 2 else 1
    width = dims[3] if len(dims) > 3 else 1
    return channels, height, width


def check_image_write(dimensions, data_type: DataType, buffer_bytes: int | None, where: str) -> None:
    """Refuse, before anything runs, an image write DxDispatch could not make (or would read out of bounds for)."""
    check_image_type(data_type, where)
    channels, height, width = image_layout(dimensions)
    if channels not in _WRITE_MODES:
        raise InputError(f"{where}: an image has 1, 3 or 4 channels (dimensions[1]), not {channels}")
    if height * width > MAX_IMAGE_PIXELS:
        raise InputError(f"{where}: {height} x {width} is more than the {MAX_IMAGE_PIXELS} pixels an image may have")
    needed = channels * height * width * (data_type.bits // 8)
    if buffer_bytes is not None and needed > buffer_bytes:
        raise InputError(f"{where}: a {channels} x {height} x {width} image needs {needed} bytes, but the buffer holds "
                         f"{buffer_bytes}")


def encode_image(contents: bytes, data_type: DataType, dimensions, suffix: str) -> bytes:
    """The .png or .jpg file's bytes for a buffer (ConvertTensorToPixels, then the encoder)."""
    Image = import_pillow()
    channels, height, width = image_layout(dimensions)
    dtype = np.dtype(data_type.numpy_dtype).newbyteorder("<")
    count = channels * height * width
    values = np.frombuffer(contents, dtype=dtype, count=count).astype(np.float32)
    # std::max(0.0f, std::min(1.0f, v)): min(1, NaN) is 1 (NaN < 1 is false), so NaN becomes 255.
    clamped = np.where(np.isnan(values), np.float32(1.0), np.clip(values, np.float32(0.0), np.float32(1.0)))
    pixels = np.trunc(clamped * np.float32(255.0)).astype(np.uint8).reshape(channels, height, width)
    interleaved = np.ascontiguousarray(pixels.transpose(1, 2, 0))
    image = Image.fromarray(interleaved[:, :, 0] if channels == 1 else interleaved)  # L, RGB or RGBA
    out = io.BytesIO()
    image.save(out, format="PNG" if suffix == ".png" else "JPEG")
    return out.getvalue()


def image_suffix(path) -> str | None:
    """.jpg or .png (any case) where `path` names an image DxDispatch reads or writes, else None."""
    suffix = Path(str(path).replace("\0", "")).suffix.lower()
    return suffix if suffix in IMAGE_SUFFIXES else None


def pixel_count(dimensions) -> int:
    return math.prod(image_layout(dimensions))
