"""No input crashes explain: random bytes, and real logs mutated the ways pastes mangle them."""
import io
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from rdmadoctor.engine.diagnose import explain
from rdmadoctor.logparse.streams import parse_streams
from rdmadoctor.render import json_out

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SAMPLES = sorted(p for p in FIXTURES.rglob("*.log") if p.stat().st_size < 200_000)[:60]
SAMPLE_LINES = [line for p in SAMPLES for line in p.read_bytes().splitlines()] or [b"Couldn't connect to a:1"]

DECORATIONS = [b"\x1b[31m", b"\x1b[0m", b"\r", b"\t", b"\x00", b"\xff\xfe", b"> ", b"$ ", b"```", b"===== SERVER =====",
               b"\xe2\x80\x99", b"   ", b"-" * 87, b"*"]


def _check(data: bytes) -> None:
    parsed = parse_streams([("fuzz.log", io.BytesIO(data))])
    diagnosis = explain(parsed, link_rate_gbps=100.0)
    document = json.loads(json_out.render(diagnosis))          # always serialisable
    assert document["verdict"]["status"] in ("ok", "warning", "failure", "unknown")
    total = parsed.sources[0].total_lines
    for finding in document["findings"]:
        for e in finding["evidence"]:
            if e["line"] is not None and e["source"] == "fuzz.log":
                assert 1 <= e["line"] <= total


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4000))
def test_random_bytes(data):
    _check(data)


@st.composite
def mutated_logs(draw):
    lines = draw(st.lists(st.sampled_from(SAMPLE_LINES), min_size=1, max_size=60))
    out = []
    for line in lines:
        action = draw(st.integers(0, 9))
        if action == 0 and out:                       # flatten into the previous line (a chat paste)
            out[-1] = out[-1] + b" " + line
        elif action == 1:                             # cut the line short (a truncated paste)
            out.append(line[:draw(st.integers(0, max(0, len(line))))])
        elif action == 2:                             # decorate (colour, CR, quotes, prompts)
            out.append(draw(st.sampled_from(DECORATIONS)) + line + draw(st.sampled_from(DECORATIONS)))
        elif action == 3:                             # swap bytes for garbage
            out.append(draw(st.binary(max_size=40)))
        else:
            out.append(line)
    separator = draw(st.sampled_from([b"\n", b"\r\n", b" ", b"\r"]))
    return separator.join(out)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_logs())
def test_mutated_real_logs(data):
    _check(data)
