"""Logs kept compressed (a rotated kern.log.2.gz, a job's output.xz, a log piped from `journalctl -o export | xz`)
are read decompressed, as zcat, bzcat and xzcat read them: told by their first bytes, not by their names.

Decompressing stays bounded as reading is. An input that decompresses to more than RATIO times the compressed bytes
read, past its first FREE_BYTES, is read no further, with a note: a log of repeated lines compresses ten to a hundred
times, a file of zeros a thousand times with gzip and millions of times with bzip2. Data that ends early (a file cut
short, or still being written) or turns corrupt is read up to there, with a note; nothing read before is lost.
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from typing import Any, BinaryIO, Callable, Dict, Optional, Tuple, cast

HEAD = 10                       # bytes looked at to tell a format
FREE_BYTES = 1 << 30            # decompressed bytes read whatever the ratio
RATIO = 1000                    # past them, decompressed bytes per compressed byte that are no log

# The first bytes each format writes. gzip: its magic and deflate, the only method gzip writes (RFC 1952); bzip2: "BZh",
# the block size and the first block's magic, or the end-of-stream magic of an empty stream; xz: its stream header
# magic (the .xz file format, 2.1.1.1). Long enough that no log's text begins with them.
_FORMATS: Tuple[Tuple[Tuple[bytes, ...], str], ...] = (
    ((b"\x1f\x8b\x08",), "gzip"),
    (tuple(b"BZh" + str(level).encode() + magic for level in range(1, 10)
           for magic in (b"1AY&SY", b"\x17\x72\x45\x38\x50\x90")), "bzip2"),
    ((b"\xfd7zXZ\x00",), "xz"),
)
# Formats Python's standard library cannot read: (magic, what it is, the command that reads it)
_UNREADABLE = (
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "zstdcat"),
    (b"\x04\x22\x4d\x18", "lz4-compressed", "lz4cat"),
    (b"PK\x03\x04", "a zip archive", "unzip -p"),
)
_OPENERS: Dict[str, Callable[[Any], Any]] = {
    "gzip": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    "bzip2": bz2.BZ2File,
    "xz": lzma.LZMAFile,
}


def kind_of(head: bytes) -> Optional[str]:
    """The compression an input's first HEAD bytes show ('gzip', 'bzip2', 'xz'), None when they show none."""
    for magics, kind in _FORMATS:
        if head.startswith(magics):
            return kind
    return None


def refusal(name: str, head: bytes) -> Optional[str]:
    """Why an input whose first bytes are `head` cannot be read here, with the command that can; None if it can."""
    for magic, what, command in _UNREADABLE:
        if head.startswith(magic):
            shown = "FILE" if name.startswith("<") else name
            return f"is {what}, which rdmadoctor cannot read: `{command} {shown} | rdmadoctor explain -`"
    return None


def head_of(stream: BinaryIO) -> bytes:
    """The first HEAD bytes of a stream, left to be read (b"" when they cannot be looked at without reading)."""
    peek = getattr(stream, "peek", None)
    try:
        if peek is not None:
            return peek(HEAD)[:HEAD]
        if stream.seekable():
            start = stream.tell()
            head = stream.read(HEAD)
            stream.seek(start)
            return head
    except (OSError, ValueError):
        pass
    return b""


class _Counted:
    """A stream that counts the bytes read from it."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self.count = 0
        self.mode = "rb"

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.count += len(data)
        return data


class Decompressed:
    """A compressed input read decompressed. `problem`: why reading stopped before the compressed data's end."""

    def __init__(self, stream: BinaryIO, kind: str):
        self.kind = kind
        self.problem: Optional[str] = None
        self._compressed = _Counted(stream)
        self._file = _OPENERS[kind](self._compressed)
        self._out = 0

    def read(self, size: int = -1) -> bytes:
        if self.problem is not None:
            return b""
        try:
            # read1: one read of the compressed data at a time, so that an error in it loses nothing decompressed
            # before it (read() would gather several and drop them all)
            data = self._file.read1(size)
        except EOFError:
            self.problem = f"the {self.kind} data ends early (a file cut short, or still being written)"
            return b""
        except (OSError, zlib.error, lzma.LZMAError) as exc:
            self.problem = f"the {self.kind} data is corrupt ({exc}): read up to where that showed"
            return b""
        self._out += len(data)
        if self._out > FREE_BYTES and self._out > RATIO * self._compressed.count:
            self.problem = (f"it decompresses to more than {RATIO} times its size, which no log does: read no "
                            f"further than {self._out >> 20} MiB")
        return data


class Unreadable:
    """An input of a compressed format that cannot be read here (standard input: a file is refused before any is
    read): nothing is read from it, and `problem` says how to read it."""
    kind = None

    def __init__(self, problem: str):
        self.problem = problem

    def read(self, size: int = -1) -> bytes:
        return b""


def opened(name: str, stream: BinaryIO) -> BinaryIO:
    """The stream to read an input from: the input itself, a Decompressed, or an Unreadable."""
    head = head_of(stream)
    why = refusal(name, head)
    if why is not None:
        return cast(BinaryIO, Unreadable(why))
    kind = kind_of(head)
    return cast(BinaryIO, Decompressed(stream, kind)) if kind is not None else stream
