"""`rdmadoctor bench` live in the Soft-RoCE lab: a 3 x 3 sweep between the two VMs, and a sweep where one
combination fails for real (the peer's agent runs as a user with a 1 MiB memlock limit, so the 1 MiB size
cannot register its buffer) while the others complete; plus the agent refusing perftest without the opt-in.

The results land in artifacts/lab/bench/ (JSON, CSV, HTML); the HTML report is opened in the browser test.

    pytest tests/lab/test_bench.py -s
"""
from __future__ import annotations

import json
import os
import time

import pytest

from tests.lab.agents import start_agent as _start_agent
from tests.lab.vm import REPO, LabVM

PAIR = os.environ.get("RDMADOCTOR_LAB_BENCH_PAIR", "bookworm")
OUT = REPO / "artifacts" / "lab" / "bench"
TOKEN = "lab-bench-token-0123456789"
TOKEN_FILE = "/tmp/rdmadoctor-bench.token"
BENCH_TIMEOUT = 900


@pytest.fixture(scope="module")
def lab(lab_manager):
    lab = lab_manager.get(PAIR)
    lab.reset()
    for vm in lab.hosts.values():
        vm.sh(f"umask 077 && printf '%s\\n' '{TOKEN}' > {TOKEN_FILE} && chown lab {TOKEN_FILE}")
    return lab


def bench(client: LabVM, peer: LabVM, name: str, *args) -> dict:
    out = f"/tmp/bench-{name}"
    started = time.monotonic()
    result = client.run(["sh", "-c", f"python3 -m rdmadoctor bench --peer {peer.address} --token-file {TOKEN_FILE} "
                         f"{' '.join(args)} --save {out}.json --csv {out}.csv --html {out}.html --json "
                         f"> {out}.diagnosis.json 2> {out}.err; echo rc=$?"], timeout=BENCH_TIMEOUT,
                        env=client.python_env())
    seconds = time.monotonic() - started
    OUT.mkdir(parents=True, exist_ok=True)
    files = {}
    for suffix in (".json", ".csv", ".html", ".diagnosis.json", ".err"):
        text = client.run(["cat", out + suffix], timeout=60).stdout
        (OUT / f"{name}{suffix}").write_text(text)
        files[suffix] = text
    rc = int(result.stdout.strip().rsplit("rc=", 1)[-1])
    return {"rc": rc, "seconds": seconds, "saved": json.loads(files[".json"]),
            "diagnosis": json.loads(files[".diagnosis.json"]), "csv": files[".csv"], "err": files[".err"]}


def start_agent(vm: LabVM, *extra, **kw) -> int:
    return _start_agent(vm, TOKEN_FILE, *extra, **kw)


@pytest.mark.lab
def test_a_3x3_sweep_completes(lab):
    agent = start_agent(lab.h1, "--allow-perftest")

    def sweep() -> dict:
        return bench(lab.h2, lab.h1, "sweep-3x3", "--qp 1,2,4", "--size 4K,16K,64K", "--iters 100")

    try:
        got = sweep()
        if any(r["status"] != "ok" and (r.get("verdict") or {}).get("cause") == "cpu-frequency-scaling"
               for r in got["saved"]["results"]):
            # perftest times the CPU's clock against gettimeofday before it reports and gives up when the fit is
            # poor (r^2 < 0.9), which an emulated guest's clock on a busy host can make it; the sweep runs once
            # more and must then complete whole
            got = sweep()
    finally:
        lab.h1.kill(agent)
    results = got["saved"]["results"]
    assert [(r["qp"], r["size"]) for r in results] == [(q, s) for q in (1, 2, 4) for s in (4096, 16384, 65536)]
    assert all(r["status"] == "ok" and r["bw_avg_gbps"] > 0 for r in results), got["err"]
    assert got["saved"]["best"] and got["rc"] in (0, 1)
    assert got["csv"].count("\n") == 10
    # both sides of every combination ran the same options, on the port the agent chose: the server's command
    # line is the client's without the server's address
    for r in results:
        client_cmd = r["client_log"].splitlines()[0].split("$ ", 1)[1]
        server_cmd = r["server_log"].splitlines()[0].split("$ ", 1)[1]
        assert client_cmd == f"{server_cmd} {lab.h1.address}" and " --port=" in server_cmd, (client_cmd, server_cmd)
    (OUT / "timing.txt").write_text(f"sweep-3x3: {got['seconds']:.0f} s\n")


@pytest.mark.lab
def test_a_failing_combination_is_explained_and_the_others_complete(lab):
    # the agent, hence the perftest server, runs as user lab with a 1 MiB memlock limit: 4K and 64K fit
    # (2 x size), 1M does not ("Couldn't allocate MR")
    agent = start_agent(lab.h1, "--allow-perftest", user="lab", memlock_kib=1024)
    try:
        got = bench(lab.h2, lab.h1, "sweep-memlock", "--qp 1", "--size 4K,64K,1M", "--iters 100")
    finally:
        lab.h1.kill(agent)
    status = {r["size"]: r["status"] for r in got["saved"]["results"]}
    assert status == {4096: "ok", 65536: "ok", 1048576: "failed"}, got["err"]
    failed = next(r for r in got["saved"]["results"] if r["status"] == "failed")
    assert failed["verdict"]["cause"] == "memlock-limit", failed["verdict"]
    verdict = got["diagnosis"]["verdict"]
    assert verdict["status"] == "failure" and verdict["cause"] == "memlock-limit" and got["rc"] == 2
    # the peer's facts (the agent's own limit) confirm what the server's log suggested
    assert verdict["rule"] == "BENCH-MEMLOCK" and verdict["confidence"] == "high", verdict
    assert "1 MiB" in verdict["summary"] and "2 MiB" in verdict["summary"], verdict


@pytest.mark.lab
def test_the_agent_refuses_perftest_without_the_opt_in(lab):
    agent = start_agent(lab.h1)                      # no --allow-perftest
    try:
        result = lab.h2.run(["python3", "-m", "rdmadoctor", "bench", "--peer", lab.h1.address, "--token-file",
                             TOKEN_FILE, "--qp", "1"], timeout=120, env=lab.h2.python_env())
    finally:
        lab.h1.kill(agent)
    assert result.rc == 3 and "--allow-perftest" in result.output, result.output
