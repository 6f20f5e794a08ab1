"""Compressed logs (logparse/compressed.py): read as their decompressed text, what precedes a cut or corrupt end
kept and the cut said, a decompression bomb read no further, a format that cannot be read refused in one line."""
import bz2
import gzip
import io
import lzma
import zlib
from pathlib import Path

import pytest

from rdmadoctor.engine import diagnose
from rdmadoctor.logparse import compressed
from rdmadoctor.logparse.streams import InputError, parse_paths, parse_streams

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
COMPRESS = {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}


def shape(parsed):
    return [(r.first_line, r.last_line, r.producer, r.side, r.tool, [(m.id, m.line, m.text) for m in r.messages],
             [(row.line, row.size) for row in r.results], r.row_summary) for r in parsed.runs]


def parsed(name, data):
    return parse_streams([(name, io.BytesIO(data))])


def test_every_real_log_compressed_parses_as_the_log_itself():
    logs = sorted((FIXTURES / "real").rglob("*.log"))
    assert len(logs) > 100
    for i, path in enumerate(logs):
        kind = list(COMPRESS)[i % len(COMPRESS)]
        data = path.read_bytes()
        plain, packed = parsed(path.name, data), parsed(path.name, COMPRESS[kind](data))
        assert shape(packed) == shape(plain), (path, kind)
        source = packed.sources[0]
        assert (source.compression, source.read_stopped) == (kind, None)
        assert source.total_lines == plain.sources[0].total_lines and source.bytes_read == len(data)
        assert plain.sources[0].compression is None


@pytest.mark.parametrize("kind", ["gzip", "xz"])
def test_a_log_cut_short_is_read_to_the_cut_and_the_cut_is_said(kind):
    log = b"".join(p.read_bytes() for p in sorted((FIXTURES / "real").rglob("*.log")))
    packed = COMPRESS[kind](log)
    for cut in (len(packed) // 3, len(packed) // 2, len(packed) * 9 // 10):
        head = packed[:cut]
        # what the data up to the cut decompresses to, by the codec itself
        decoder = zlib.decompressobj(31) if kind == "gzip" else lzma.LZMADecompressor()
        before = decoder.decompress(head)
        assert 0 < len(before) < len(log)
        got = parsed("job.log." + kind, head)
        assert shape(got) == shape(parsed("job.log." + kind, before)), cut
        source = got.sources[0]
        assert source.bytes_read == len(before) and "ends early" in source.read_stopped
        notes = diagnose.explain(got).notes
        assert notes[0] == (f"job.log.{kind}: the {kind} data ends early (a file cut short, or still being written); "
                            f"its first {source.total_lines} line(s) were read")


def test_corrupt_data_keeps_what_came_before_it():
    log = b"".join(p.read_bytes() for p in sorted((FIXTURES / "handwritten" / "seed-qp-mismatch").glob("*.log")))
    packed = bytearray(gzip.compress(log * 50, compresslevel=1))
    packed[len(packed) // 2:len(packed) // 2 + 64] = bytes(64)       # a hole, as a crash leaves in a file
    got = parsed("job.log.gz", bytes(packed))
    source = got.sources[0]
    assert source.read_stopped.startswith("the gzip data is corrupt (") and got.runs


def test_a_log_that_decompresses_past_what_any_log_does_is_read_no_further(monkeypatch):
    monkeypatch.setattr(compressed, "FREE_BYTES", 1 << 20)
    monkeypatch.setattr(compressed, "RATIO", 100)
    bomb = gzip.compress(b"\n" * (32 << 20))
    assert len(bomb) * 100 < 32 << 20
    got = parsed("bomb.gz", bomb)
    source = got.sources[0]
    assert source.read_stopped.startswith("it decompresses to more than 100 times its size, which no log does")
    assert (1 << 20) < source.bytes_read < 8 << 20
    # a log of ordinary ratio is read whole past FREE_BYTES
    log = b"".join(p.read_bytes() for p in sorted((FIXTURES / "real").rglob("*.log"))) * 10
    assert len(log) > 1 << 20
    whole = parsed("all.gz", gzip.compress(log)).sources[0]
    assert whole.read_stopped is None and whole.bytes_read == len(log)


@pytest.mark.parametrize("head, what", [(b"\x28\xb5\x2f\xfd", "zstd-compressed"),
                                        (b"\x04\x22\x4d\x18", "lz4-compressed"), (b"PK\x03\x04", "a zip archive")])
def test_a_format_that_cannot_be_read_is_refused_with_the_command_that_reads_it(tmp_path, head, what):
    path = tmp_path / "job.log.z"
    path.write_bytes(head + b"\0" * 100)
    with pytest.raises(InputError) as raised:
        parse_paths([str(path)])
    assert str(raised.value).startswith(f"{path}: is {what}, which rdmadoctor cannot read: `")
    # standard input is not refused before it is read: nothing is read from it, and a note says how to read it
    piped = parse_streams([("<stdin>", io.BytesIO(head + b"\0" * 100))])
    assert piped.runs == [] and piped.sources[0].total_lines == 0
    command = piped.sources[0].read_stopped.split("`", 1)[1]
    assert command.endswith(" FILE | rdmadoctor explain -`")
    note = f"<stdin>: is {what}, which rdmadoctor cannot read: `{command}; nothing of it was read"
    assert diagnose.explain(piped).notes == [note]


def test_text_that_only_begins_like_a_compressed_format_is_read_as_text():
    for start in (b"\x1f\x8bnot deflate\n", b"BZh9 is not a bzip2 block\n", b"\xfd7zXZ but no NUL\n"):
        data = start + (FIXTURES / "handwritten" / "seed-qp-mismatch" / "client.log").read_bytes()
        got = parsed("client.log", data)
        assert got.sources[0].compression is None and got.runs
