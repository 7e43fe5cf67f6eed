"""The memory pre-checks' estimates are upper bounds of what runs really use (issue 13, item 7).

For each kind of output, a real `python -m dmlcli` runs on a moderately sized input in a fresh
process that reports its child's peak resident memory (ru_maxrss of RUSAGE_CHILDREN); the same
measure of `dmlcli --version` is the interpreter's baseline. The estimate dmlcli makes before the
run (io/room.py's in_memory_bytes, streaming's memory_bound) must be at least the growth.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from numpy.lib import format as npy_format

from dmlcli.io import room

MEASURE = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "dmlcli", *sys.argv[1:]], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def peak_bytes(args, cwd: Path) -> int:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DMLCLI_DEBUG", None)
    env.pop("DMLCLI_CHUNK_BYTES", None)
    done = subprocess.run([sys.executable, "-c", MEASURE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> int:
    return peak_bytes(["--version"], tmp_path_factory.mktemp("baseline"))


BIG = 1 << 24  # 16 Mi uint8 elements for binary outputs
TEXT = 1 << 23  # 8 Mi elements for JSON text (before issue 21 it took about 100 bytes an element: 800 MiB)


def in_memory_case(target, count: int, extra=()):
    return {"count": count, "args": ["run", "bit_not", "a.npy", *(["-o", target] if target else []), *extra],
            "target": target}


CASES = {
    "table on stdout": in_memory_case(None, BIG),
    "--format hex on stdout": in_memory_case(None, BIG, ["--format", "hex"]),
    # Beside a bare list the run is held in memory; from .npy inputs alone JSON output streams (below).
    "JSON file": {"count": TEXT, "args": ["run", "bit_xor", "a.npy", "[7]", "--broadcast", "-o", "out.json"],
                  "target": "out.json", "extra_inputs": 1},
    "-o - (JSON on stdout)": {"count": TEXT, "args": ["run", "bit_xor", "a.npy", "[7]", "--broadcast", "-o", "-"],
                              "target": "-", "extra_inputs": 1},
    "in-memory .npy": {"count": BIG, "args": ["run", "bit_xor", "a.npy", '{"dtype": "uint8", "data": [7]}', "--broadcast",
                                                "-o", "out.npy"],
                       "target": "out.npy", "extra_inputs": 1},
}


@pytest.mark.parametrize("case", CASES)
def test_in_memory_estimate_is_an_upper_bound(tmp_path, baseline, case):
    spec = CASES[case]
    count = spec["count"]
    np.save(tmp_path / "a.npy", (np.arange(count) % 251).astype(np.uint8))
    growth = peak_bytes(spec["args"], tmp_path) - baseline
    estimate = room.in_memory_bytes(spec["target"], (count,), np.uint8,
                                    input_bytes=count + spec.get("extra_inputs", 0))
    print(f"{case}: {count} elements, peak growth {growth / 2**20:.1f} MiB, estimate {estimate / 2**20:.1f} MiB")
    assert estimate >= growth, (case, growth, estimate)


@pytest.mark.parametrize("fortran", [False, True], ids=["C order", "Fortran order"])
def test_streaming_bound_is_an_upper_bound(tmp_path, baseline, fortran):
    from dmlcli.engine import streaming

    a = (np.arange(1 << 26) % 251).astype(np.uint8).reshape(8192, 8192)  # 64 MiB
    np.save(tmp_path / "a.npy", np.asfortranarray(a) if fortran else a)
    np.save(tmp_path / "b.npy", a[::-1].copy())
    growth = peak_bytes(["run", "bit_xor", "a.npy", "b.npy", "-o", "out.npy"], tmp_path) - baseline
    inputs = [streaming.open_input(str(tmp_path / name), label=name) for name in ("a.npy", "b.npy")]
    bound = streaming.memory_bound(inputs, (8192, 8192), np.uint8, streaming.DEFAULT_CHUNK_BYTES)
    print(f"streamed ({'Fortran' if fortran else 'C'} order): peak growth {growth / 2**20:.1f} MiB, "
          f"bound {bound / 2**20:.1f} MiB, files 192 MiB")
    assert bound >= growth
    assert bound < 96 << 20  # constant memory: well below the files' size


@pytest.mark.parametrize("dtype, count", [("uint8", TEXT), ("float32", 1 << 21)])
@pytest.mark.parametrize("target", ["out.json", "-"])
def test_json_from_npy_streams_in_constant_memory(tmp_path, baseline, dtype, count, target):
    """Issue 21: .npy inputs into JSON text (a file or stdout) are streamed, the text written piece by piece:
    the growth is the streaming bound plus the JSON writer's pieces, whatever the size (it was ~100 bytes an
    element: 800 MiB for these 8 Mi elements)."""
    from dmlcli.engine import streaming

    values = np.arange(count) % 251 if dtype == "uint8" else np.linspace(-1e3, 1e3, count)
    np.save(tmp_path / "a.npy", values.astype(dtype))
    growth = peak_bytes(["run", "bit_not" if dtype == "uint8" else "negate", "a.npy", "-o", target], tmp_path) - baseline
    inputs = [streaming.open_input(str(tmp_path / "a.npy"), label="a.npy")]
    bound = streaming.memory_bound(inputs, (count,), np.dtype(dtype), streaming.DEFAULT_CHUNK_BYTES)
    print(f"JSON streamed ({dtype}, {count} elements, {target}): peak growth {growth / 2**20:.1f} MiB, "
          f"bound {(bound + room.JSON_WRITER_BYTES) / 2**20:.1f} MiB")
    assert growth <= bound + room.JSON_WRITER_BYTES
    assert growth < 64 << 20  # constant: far below the 800 MiB the whole text took


def write_zeros_npz(path: Path, shape, descr: str = "|u1", data_bytes: int | None = None) -> None:
    """A deflated .npz whose member's header says `shape` and whose data are `data_bytes` zeros (default: as
    many as the header promises), written a MiB at a time: megabytes of zeros compress to almost nothing."""
    import io
    import zipfile

    header = io.BytesIO()
    npy_format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    if data_bytes is None:
        data_bytes = int(np.prod(shape, dtype=object)) * np.dtype(descr).itemsize
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("x.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            for start in range(0, data_bytes, 1 << 20):
                member.write(bytes(min(1 << 20, data_bytes - start)))


def test_streaming_a_npz_member_is_constant_memory(tmp_path, baseline):
    """Issue 22, item 1: a .npz member with a .npy output is inflated chunk by chunk, never whole."""
    from dmlcli.engine import streaming

    size = 256 << 20
    write_zeros_npz(tmp_path / "a.npz", (size // 4096, 4096))
    assert (tmp_path / "a.npz").stat().st_size < 2 << 20
    growth = peak_bytes(["run", "bit_not", "a.npz", "-o", "out.npy"], tmp_path) - baseline
    inputs = [streaming.open_input(str(tmp_path / "a.npz"), label="a.npz")]
    bound = streaming.memory_bound(inputs, (size // 4096, 4096), np.uint8, streaming.DEFAULT_CHUNK_BYTES)
    print(f"streamed .npz member: peak growth {growth / 2**20:.1f} MiB, bound {bound / 2**20:.1f} MiB, member 256 MiB")
    assert bound >= growth
    assert bound < 96 << 20  # constant memory: far below the member's size
    out = np.load(tmp_path / "out.npy", mmap_mode="r")
    assert out.shape == (size // 4096, 4096) and out[0, 0] == 255 and out[-1, -1] == 255


def test_npz_member_read_whole_stays_within_the_in_memory_estimate(tmp_path, baseline):
    """The in-memory path inflates a member straight into its array: no second copy of it."""
    write_zeros_npz(tmp_path / "a.npz", (BIG,))
    growth = peak_bytes(["run", "bit_not", "a.npz"], tmp_path) - baseline  # a table on stdout: held in memory
    estimate = room.in_memory_bytes(None, (BIG,), np.uint8, input_bytes=BIG)
    print(f"in-memory .npz member: peak growth {growth / 2**20:.1f} MiB, estimate {estimate / 2**20:.1f} MiB")
    assert estimate >= growth


MEASURE_REFUSED = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "dmlcli", *sys.argv[1:]], stdout=subprocess.DEVNULL)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def test_a_npz_member_claiming_2_to_the_32_elements_is_refused_without_inflating(tmp_path, baseline, monkeypatch):
    """Issue 22, item 1: a small .npz whose member's header declares 2^32 uint8 elements took 4.1 GB and 27 s
    before `run` refused it. Now the header is checked against the zip directory before a byte is inflated."""
    import zipfile

    from dmlcli.engine import streaming
    from dmlcli.errors import InputError
    from dmlcli.io.sources import read_tensor

    # Every byte zipfile inflates passes through ZipExtFile._read1 (read, read1, readinto and peek all call it).
    inflated: list[int] = []
    inflate = zipfile.ZipExtFile._read1

    def counted(handle, size):
        data = inflate(handle, size)
        inflated.append(len(data))
        return data

    monkeypatch.setattr(zipfile.ZipExtFile, "_read1", counted)
    write_zeros_npz(tmp_path / "hostile.npz", (2**32,), data_bytes=64 << 20)
    for read in (lambda: streaming.open_input(str(tmp_path / "hostile.npz"), label="input 1"),
                 lambda: read_tensor(str(tmp_path / "hostile.npz"), label="input 1")):
        inflated.clear()
        with pytest.raises(InputError, match="the header promises 4294967296 elements of uint8"):
            read()
        assert 0 < sum(inflated) <= 64 << 10  # only the header is inflated (zipfile reads ahead a little)
    env = dict(os.environ, NO_COLOR="1")
    env.pop("DMLCLI_DEBUG", None)
    for output in (["-o", "out.npy"], [], ["-o", "out.json"]):
        done = subprocess.run([sys.executable, "-c", MEASURE_REFUSED, "run", "bit_not", "hostile.npz", *output],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        code, peak = map(int, done.stdout.split())
        assert code == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "zip directory lists only 67108864 bytes of data for the member (truncated?)" in done.stderr
        assert peak - baseline < 32 << 20  # nothing inflated: not even the 64 MiB the member really holds
        assert not (tmp_path / "out.npy").exists() and not (tmp_path / "out.json").exists()
