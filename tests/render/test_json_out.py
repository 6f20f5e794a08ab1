"""render/json_out.py: the document stays bounded however many inputs, runs and findings, and what it leaves out is
counted."""
import io
import json
from pathlib import Path

from rdmadoctor.engine import diagnose
from rdmadoctor.logparse.streams import parse_streams
from rdmadoctor.render import json_out

ROOT = Path(__file__).resolve().parent.parent.parent
SEED = ROOT / "fixtures/handwritten/seed-qp-mismatch"


def test_hundreds_of_inputs_stay_within_the_budget():
    logs = [(SEED / name).read_bytes() for name in ("server.log", "client.log")]
    parsed = parse_streams((f"host{i:04d}/{'server' if i % 2 == 0 else 'client'}.log", io.BytesIO(logs[i % 2]))
                           for i in range(800))
    doc = json_out.to_dict(diagnose.explain(parsed))
    assert len(json.dumps(doc, default=str)) <= json_out.MAX_BYTES
    assert len(json_out.dumps(doc).encode()) < 1_000_000
    assert doc["omitted"]["inputs"] + len(doc["inputs"]) == 800
    assert doc["omitted"]["runs"] + len(doc["runs"]) == len(parsed.runs)
    assert doc["runs"][0]["source"] == "host0000/server.log"
