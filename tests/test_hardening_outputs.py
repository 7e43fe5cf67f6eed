"""Outputs that are not plain new files (issue 13, items 1, 2, 8, 11, 12 and 14).

Symbolic links, devices, FIFOs and sockets as `-o`; owner, group, mode and attributes kept on replace;
names at the file system's limit; a full disk met by the memory-mapped writer; an append-only folder;
bad .npy shapes and DMLCLI_CHUNK_BYTES. Tests that need root (mknod, chown, chattr, a tmpfs mount in a
private mount namespace) skip without it.
"""

import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
A = np.arange(24, dtype=np.uint8).reshape(4, 6)
SOURCES = {
    "streamed": ("a.npy", None),  # .npy to .npy: the streaming path, C order
    "streamed, Fortran order": ("f.npy", None),  # tiled in a regular file; in order into a device or FIFO
    "in memory": (json.dumps(A.tolist()), "uint8"),
}


def environment(**extra) -> dict:
    env = dict(os.environ, NO_COLOR="1", **extra)
    env.pop("DMLCLI_DEBUG", None)
    return env


def dmlcli(*args, cwd, env=None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dmlcli", *args], cwd=cwd, env=env or environment(),
                          capture_output=True, text=True, timeout=120, **kwargs)


def run_args(source: str, target: str) -> list[str]:
    text, dtype = SOURCES[source]
    return ["run", "bit_not", text, "-o", target, "-q"] + (["--dtype", dtype] if dtype else [])


def one_line_error(result, message: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("dmlcli: error: "), result.stderr
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def work(tmp_path) -> Path:
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "f.npy", np.asfortranarray(A))
    return tmp_path


def expected_npy_bytes(tmp_path: Path) -> bytes:
    np.save(tmp_path / "expected.npy", 255 - A)
    data = (tmp_path / "expected.npy").read_bytes()
    (tmp_path / "expected.npy").unlink()
    return data


def null_device(folder: Path) -> Path:
    """A character device that discards writes: a private copy of /dev/null for root, else /dev/null itself.

    (Root's copy keeps a mistaken replacement away from the system's /dev/null.)
    """
    if not IS_ROOT:
        return Path("/dev/null")
    node = folder / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        with open(node, "wb") as handle:  # a nodev mount refuses to open device nodes
            handle.write(b"")
    except OSError as error:
        pytest.skip(f"cannot make or open a device node here ({error.strerror})")
    return node


# ---------------------------------------------------------------- 1: links, devices, FIFOs, sockets


@pytest.mark.parametrize("source", SOURCES)
def test_link_to_a_device_stays_a_device(work, source):
    device = null_device(work)
    (work / "out.npy").symlink_to(device)
    result = dmlcli(*run_args(source, "out.npy"), cwd=work)
    assert (result.returncode, result.stderr) == (0, "")
    assert (work / "out.npy").is_symlink() and os.readlink(work / "out.npy") == str(device)
    assert stat.S_ISCHR(device.stat().st_mode)
    assert not [name for name in os.listdir(work) if name.endswith(".tmp")]


@pytest.mark.skipif(not IS_ROOT, reason="needs root to make a device node")
def test_a_device_node_named_as_the_output_is_written_into(work):
    device = null_device(work)
    device.rename(work / "out.json")
    result = dmlcli(*run_args("in memory", "out.json"), cwd=work)
    assert (result.returncode, result.stderr) == (0, "")
    assert stat.S_ISCHR((work / "out.json").lstat().st_mode)


def read_all_in_background(path: Path) -> tuple[threading.Thread, list]:
    got = []

    def read():
        with open(path, "rb") as handle:  # blocks until dmlcli opens the FIFO for writing
            got.append(handle.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


@pytest.mark.parametrize("source", SOURCES)
def test_a_fifo_reader_gets_the_whole_npy(work, source):
    os.mkfifo(work / "out.npy")
    thread, got = read_all_in_background(work / "out.npy")
    result = dmlcli(*run_args(source, "out.npy"), cwd=work)
    thread.join(10)  # dmlcli has finished writing: the reader is done or never will be
    assert (result.returncode, result.stderr) == (0, "")
    assert got == [expected_npy_bytes(work)]
    assert stat.S_ISFIFO((work / "out.npy").lstat().st_mode)


def test_a_fifo_through_a_link_gets_json(work):
    os.mkfifo(work / "pipe")
    (work / "out.json").symlink_to("pipe")
    thread, got = read_all_in_background(work / "pipe")
    result = dmlcli(*run_args("streamed", "out.json"), cwd=work)
    thread.join(10)  # dmlcli has finished writing: the reader is done or never will be
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(got[0]) == {"dtype": "uint8", "shape": [4, 6], "data": (255 - A).tolist()}
    assert (work / "out.json").is_symlink()


def test_a_socket_listener_gets_the_npy(work):
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    address = work / "out.npy"
    try:
        listener.bind(str(address))
    except OSError as error:
        pytest.skip(f"cannot bind a Unix socket here ({error.strerror})")
    listener.listen(1)
    got = []

    def accept():
        connection, _ = listener.accept()
        with connection:
            got.append(b"".join(iter(lambda: connection.recv(65536), b"")))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    result = dmlcli(*run_args("streamed", "out.npy"), cwd=work)
    thread.join(10)  # dmlcli has finished writing: the reader is done or never will be
    listener.close()
    assert (result.returncode, result.stderr) == (0, "")
    assert got == [expected_npy_bytes(work)]
    assert stat.S_ISSOCK(address.lstat().st_mode)


@pytest.mark.parametrize("source", SOURCES)
def test_a_dangling_link_is_an_error(work, source):
    (work / "out.npy").symlink_to("missing/nothing.npy")
    result = dmlcli(*run_args(source, "out.npy"), cwd=work)
    one_line_error(result, "output 'out.npy': is a symbolic link to 'missing/nothing.npy', which does not exist")
    assert (work / "out.npy").is_symlink() and sorted(os.listdir(work)) == ["a.npy", "f.npy", "out.npy"]


@pytest.mark.parametrize("source", SOURCES)
def test_a_looping_link_is_an_error(work, source):
    (work / "out.npy").symlink_to("out.npy")
    result = dmlcli(*run_args(source, "out.npy"), cwd=work)
    one_line_error(result, "output 'out.npy': is a symbolic link that loops")
    assert os.readlink(work / "out.npy") == "out.npy"


def test_a_link_to_a_directory_is_an_error(work):
    (work / "folder").mkdir()
    (work / "out.npy").symlink_to("folder")
    result = dmlcli(*run_args("streamed", "out.npy"), cwd=work)
    one_line_error(result, "output 'out.npy': is a directory")
    assert os.listdir(work / "folder") == []


def test_a_link_to_a_file_in_another_folder_replaces_that_file(work):
    (work / "elsewhere").mkdir()
    (work / "elsewhere" / "real.npy").write_bytes(b"old")
    (work / "out.npy").symlink_to("elsewhere/real.npy")
    result = dmlcli(*run_args("streamed, Fortran order", "out.npy"), cwd=work)
    assert (result.returncode, result.stderr) == (0, "")
    assert (work / "out.npy").is_symlink()
    assert np.array_equal(np.load(work / "elsewhere" / "real.npy"), 255 - A)
    assert os.listdir(work / "elsewhere") == ["real.npy"]


# ---------------------------------------------------------------- 2: owner, group, mode, attributes


@pytest.mark.skipif(not IS_ROOT, reason="only root can give a file to another user")
@pytest.mark.parametrize("source", SOURCES)
def test_replacing_keeps_owner_group_and_mode(work, source):
    target = work / "out.npy"
    target.write_bytes(b"someone else's")
    os.chown(target, 4321, 4322)
    target.chmod(0o640)
    result = dmlcli(*run_args(source, "out.npy"), cwd=work)
    assert (result.returncode, result.stderr) == (0, "")
    facts = target.stat()
    assert (facts.st_uid, facts.st_gid, stat.S_IMODE(facts.st_mode)) == (4321, 4322, 0o640)
    assert np.array_equal(np.load(target), 255 - A)


def test_replacing_keeps_extended_attributes_and_breaks_hard_links(work):
    target = work / "out.npy"
    target.write_bytes(b"old")
    try:
        os.setxattr(target, "user.origin", b"lab 4")
    except OSError as error:
        pytest.skip(f"no user extended attributes here ({error.strerror})")
    os.link(target, work / "other-name.npy")
    result = dmlcli(*run_args("streamed", "out.npy"), cwd=work)
    assert (result.returncode, result.stderr) == (0, "")
    assert os.getxattr(target, "user.origin") == b"lab 4"
    # As the README says: the name gets a new file; another hard link keeps the old one.
    assert (work / "other-name.npy").read_bytes() == b"old"
    assert target.stat().st_nlink == 1


# ---------------------------------------------------------------- 14 and 12: names at the limit


@pytest.mark.parametrize("source", SOURCES)
def test_a_name_at_the_file_systems_limit_is_written(work, source):
    name = "n" * (os.pathconf(work, "PC_NAME_MAX") - len(".npy")) + ".npy"
    (work / name).write_bytes(b"old")  # replaced, so the stale-file sweep runs too
    result = dmlcli(*run_args(source, name), cwd=work)
    assert (result.returncode, result.stderr) == (0, "")
    assert np.array_equal(np.load(work / name), 255 - A)
    assert sorted(os.listdir(work)) == sorted(["a.npy", "f.npy", name])


def test_a_temporary_file_with_a_short_name_is_swept_when_its_writer_is_gone(work):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (work / f".dmlcli.{dead}.k1ll3d00.tmp").write_bytes(b"partial")
    (work / f".dmlcli.{os.getpid()}.l1v1ng00.tmp").write_bytes(b"a live writer's")
    result = dmlcli(*run_args("streamed", "out.npy"), cwd=work)
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(work)) == sorted(["a.npy", "f.npy", "out.npy", f".dmlcli.{os.getpid()}.l1v1ng00.tmp"])


@pytest.mark.parametrize("source", SOURCES)
def test_a_name_too_long_is_one_line(work, source):
    limit = os.pathconf(work, "PC_NAME_MAX")
    name = "n" * 300 + ".npy"
    result = dmlcli(*run_args(source, name), cwd=work)
    one_line_error(result, f"the file name is 304 bytes long; the file system allows at most {limit}")
    assert sorted(os.listdir(work)) == ["a.npy", "f.npy"]


# ---------------------------------------------------------------- 12: bad .npy shapes, DMLCLI_CHUNK_BYTES


def npy_with_shape_text(path: Path, shape_text: bytes) -> None:
    np.save(path, np.zeros(4, np.uint8))
    data = path.read_bytes().replace(b"(4,)", shape_text)
    path.write_bytes(data)


@pytest.mark.parametrize("shape_text,shown", [(b"(True,)", "True"), (b"(2, False)", "False")])
@pytest.mark.parametrize("command", [["run", "bit_not", "bad.npy"], ["run", "bit_not", "bad.npy", "-o", "o.npy"],
                                     ["run", "bit_not", "bad.npy", "-o", "o.json"], ["validate", "bit_not", "bad.npy"]])
def test_a_boolean_in_an_npy_shape_is_refused(work, shape_text, shown, command):
    npy_with_shape_text(work / "bad.npy", shape_text)
    result = dmlcli(*command, cwd=work)
    one_line_error(result, f"input 1 'bad.npy': malformed .npy header (the 'shape' field holds {shown}; "
                           "expected whole numbers from 0 to")
    assert not (work / "o.npy").exists() and not (work / "o.json").exists()


@pytest.mark.parametrize("value", ["99999999999G", "2G", "0", "-4M", "1.5M", "4MB", "abc", "\u00b2", "9" * 400])
def test_bad_chunk_bytes_is_one_line(work, value):
    result = dmlcli("run", "bit_not", "a.npy", "-o", "out.npy", cwd=work,
                    env=environment(DMLCLI_CHUNK_BYTES=value))
    one_line_error(result, "DMLCLI_CHUNK_BYTES='")
    assert "expected a whole number of bytes from 1 to 1G, optionally followed by K, M or G" in result.stderr
    assert len(result.stderr) < 200
    assert not (work / "out.npy").exists()


@pytest.mark.parametrize("value", ["1", "4k", "1G", " 64K "])
def test_good_chunk_bytes_run(work, value):
    result = dmlcli("run", "bit_not", "f.npy", "-o", "out.npy", cwd=work, env=environment(DMLCLI_CHUNK_BYTES=value))
    assert result.returncode == 0, result.stderr
    assert np.array_equal(np.load(work / "out.npy"), 255 - A)


# ---------------------------------------------------------------- 11: an append-only folder


def append_only_folder(parent: Path) -> Path:
    if not IS_ROOT or shutil.which("chattr") is None:
        pytest.skip("chattr +a needs root and the chattr tool")
    folder = parent / "append-only"
    folder.mkdir()
    (folder / "out.npy").write_bytes(b"old")
    made = subprocess.run(["chattr", "+a", str(folder)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"this file system has no append-only flag ({made.stderr.decode().strip()})")
    return folder


@pytest.mark.parametrize("source", SOURCES)
def test_an_append_only_folder_says_what_happened(work, source):
    folder = append_only_folder(work)
    try:
        result = dmlcli(*run_args(source, "append-only/out.npy"), cwd=work)
        one_line_error(result, "output 'append-only/out.npy': write failed (Operation not permitted); the target "
                               "was left as it was but the partial file '")
        assert "could not be removed (Operation not permitted)" in result.stderr
        assert "partial file removed" not in result.stderr
        left = [name for name in os.listdir(folder) if name.endswith(".tmp")]
        assert len(left) == 1 and left[0] in result.stderr
        assert (folder / "out.npy").read_bytes() == b"old"
    finally:
        subprocess.run(["chattr", "-a", str(folder)], check=True)


# ---------------------------------------------------------------- 8: a disk that fills under the mapped writer


NO_ROOM_CHECK = """
import sys
import dmlcli.io.room as room
room.check_room_for_output = lambda *args, **kwargs: None  # as if the disk filled after the check
from dmlcli.cli import main
main(sys.argv[1:])
"""


def test_a_disk_that_fills_under_the_mapped_writer_is_exit_2(work):
    """Fortran-order streaming maps its output; a full disk must be found before the map is written."""
    if not IS_ROOT or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private tmpfs mount")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m is not allowed here ({probe.stderr.decode().strip()})")
    big = np.asfortranarray(np.arange(8 << 20, dtype=np.uint8).reshape(2048, 4096))
    np.save(work / "big.npy", big)
    (work / "small").mkdir()
    (work / "no_room_check.py").write_text(NO_ROOM_CHECK)
    script = (f"mount -t tmpfs -o size=4m tmpfs small || exit 99; "
              f"{sys.executable} no_room_check.py run bit_not big.npy -o small/out.npy; echo \"rc=$?\"; ls -a small")
    shell = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=work, env=environment(), capture_output=True,
                           text=True, timeout=120)
    if shell.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs here ({shell.stderr.strip()})")
    lines = shell.stdout.split()
    assert lines[0] == "rc=2", (shell.stdout, shell.stderr)
    assert shell.stderr == ("dmlcli: error: output 'small/out.npy': write failed (No space left on device); "
                            "the target was left as it was and the partial file removed\n")
    assert lines[1:] == [".", ".."], "no temporary file may be left"


def test_reserve_falls_back_to_writing_zeros(tmp_path, monkeypatch):
    from dmlcli.engine import streaming

    def unsupported(*args):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    with open(tmp_path / "file", "w+b") as handle:
        handle.truncate(10 + (3 << 20))
        streaming.reserve(handle.fileno(), 10, 3 << 20)
        assert os.fstat(handle.fileno()).st_blocks * 512 >= 3 << 20  # the blocks are taken, not sparse


@pytest.mark.parametrize("form", ["stdin", "npz"])
def test_a_boolean_in_a_streamed_or_zipped_npy_shape_is_refused_too(work, form):
    """stdin and .npz members go through the same header checks as .npy files."""
    npy_with_shape_text(work / "bad.npy", b"(True,)")
    if form == "stdin":
        raw = subprocess.run([sys.executable, "-m", "dmlcli", "run", "bit_not", "-"], cwd=work, env=environment(),
                             input=(work / "bad.npy").read_bytes(), capture_output=True, timeout=120)
        result = subprocess.CompletedProcess(raw.args, raw.returncode, raw.stdout.decode(), raw.stderr.decode())
    else:
        import zipfile
        with zipfile.ZipFile(work / "bad.npz", "w") as archive:
            archive.write(work / "bad.npy", "x.npy")
        result = dmlcli("run", "bit_not", "bad.npz", cwd=work)
    one_line_error(result, "malformed .npy header (the 'shape' field holds True; expected whole numbers")
