"""bench's plan (allowlist, sweeps) and results (metrics from real output, CSV, JSON, regressions)."""
import json
from pathlib import Path

import pytest

from rdmadoctor.bench import plan, results
from rdmadoctor.views import bench as bench_view
from rdmadoctor.logparse.streams import parse_text

ROOT = Path(__file__).resolve().parents[2]
HEALTHY = (ROOT / "tests" / "data" / "healthy-write-bw.log").read_text()


def test_sweep_builds_every_combination_and_both_sides_share_the_options():
    sweep = plan.Sweep("ib_write_bw", plan.parse_counts("1,2,4"), plan.parse_sizes("4K,64K,1M"),
                       {"ib-dev": "rxe0", "duration": 2})
    specs = sweep.specs()
    assert len(specs) == 9
    assert specs[0].argv() == ["ib_write_bw", "--duration=2", "--ib-dev=rxe0", "--qp=1", "--size=4096"]
    client = specs[-1].argv(server="192.0.2.1", port=18520)
    assert client[-2:] == ["--port=18520", "192.0.2.1"] and "--size=1048576" in client and "--qp=4" in client
    assert plan.estimate_seconds(specs) > 9 * 2


@pytest.mark.parametrize("tool,options,message", [
    ("ib_write_bw; rm -rf /", {}, "not allowed"),
    ("raw_ethernet_bw", {}, "not allowed"),
    ("ib_write_bw", {"output_file": "/etc/passwd"}, "option 'output_file' is not allowed"),
    ("ib_write_bw", {"ib-dev": "mlx5_0 --use_cuda=0"}, "not a valid value"),
    ("ib_write_bw", {"size": "64K$(reboot)"}, "not a whole number"),
    ("ib_write_bw", {"bidirectional": "yes please"}, "is a flag"),
    ("ib_write_lat", {"qp": 4}, "latency tests run one QP"),
    ("ib_write_bw", {"qp": 0}, "is not from 1 to 16384"),
    ("ib_write_bw", {"duration": 5, "iters": 100}, "exclude each other"),
])
def test_the_allowlist_refuses(tool, options, message):
    with pytest.raises(plan.PlanError, match=message):
        plan.validate(tool, options)


@pytest.mark.parametrize("text,error", [("4K,xx", "not a message size"), ("1,two", "not a list of QP counts"),
                                        ("0,1", "at least 1")])
def test_bad_lists(text, error):
    with pytest.raises(plan.PlanError, match=error):
        (plan.parse_counts if "," in text and "K" not in text else plan.parse_sizes)(text)


def _result(bw):
    run = parse_text(HEALTHY.replace("14.45", str(bw))).runs[0]
    m = bench_view.metrics(run)
    return bench_view.ComboResult("ib_write_bw", 1, 65536, "ok", 1.0, ["ib_write_bw"], **m)


def test_metrics_come_from_the_parsed_row_in_gbps():
    r = _result(14.45)
    assert r.bw_avg_gbps == pytest.approx(14.45 * 8 * 1.048576 / 1000, rel=1e-3)
    assert r.msg_rate_mpps == pytest.approx(0.000231)


def test_csv_json_and_regression(tmp_path):
    now = bench_view.BenchResult("192.0.2.2", "2026-11-29T00:00:00Z", 10.0, [_result(10.0)])
    before = bench_view.BenchResult("192.0.2.2", "2026-11-28T00:00:00Z", 10.0, [_result(14.45)])
    path = tmp_path / "before.json"
    results.save_json(before, path)
    earlier = results.load_json(path)
    found = bench_view.regressions(now, earlier, 0.10)
    assert [f["metric"] for f in found] == ["bw_avg_gbps"] and found[0]["change"] == "-31%"
    assert bench_view.regressions(now, json.loads(path.read_text()), 0.5) == []
    lines = results.to_csv(now).splitlines()
    assert lines[0].startswith("tool,qp,size,status,bw_avg_gbps") and lines[1].startswith("ib_write_bw,1,65536,ok,")
    (tmp_path / "bad.json").write_text('{"schema": "other"}')
    with pytest.raises(results.BenchFileError, match="not a bench result"):
        results.load_json(tmp_path / "bad.json")
