"""What a file's first bytes say it is, for the message when it is not a tensor: a gzip file, HDF5, a PNG
image, UTF-16 text, ... so that the user is not told "malformed JSON" about an image. The .npy reader and
the stdin and JSON readers both ask it; it asks nothing of them."""

from __future__ import annotations

from ..errors import InputError

_UTF16 = "not UTF-8 text: it starts like UTF-16 text (save it as UTF-8, e.g. PowerShell's Out-File -Encoding utf8)"

# Leading bytes of formats people hand to dmlcli by mistake, and what to call them.
_MAGICS: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a zip archive (a .npz file or a PyTorch .pt file?)"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"\x7fELF", "an ELF executable"),
    (b"MZ", "a Windows executable (PE)"),
    (b"%PDF", "a PDF document"),
    (b"PAR1", "a Parquet file"),
    (b"BZh", "a bzip2-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"(\xb5/\xfd", "a zstd-compressed file"),
    (b"\xff\xfe", _UTF16),
    (b"\xfe\xff", _UTF16),
    (b"\x80\x02", "a Python pickle"),
    (b"\x80\x03", "a Python pickle"),
    (b"\x80\x04", "a Python pickle"),
    (b"\x80\x05", "a Python pickle"),
)

# How many leading bytes `sniff` needs at most.
SNIFF_BYTES = 8


def sniff(head: bytes) -> str | None:
    """What a file starting with `head` looks like, or None for nothing dmlcli recognises."""
    for magic, name in _MAGICS:
        if head.startswith(magic):
            return name
    return None


def not_a_tensor(where: str, head: bytes) -> InputError | None:
    """The error for a file whose first bytes name another format, or None."""
    looks_like = sniff(head)
    if looks_like is None:
        return None
    return InputError(f"{where}: is {looks_like}, not a .npy or JSON tensor")
