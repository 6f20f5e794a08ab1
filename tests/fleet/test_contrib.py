"""contrib/: the NHC check function and the Slurm HealthCheckProgram wrapper, run by bash against stand-ins for
rdmadoctor, NHC's helpers and scontrol (on PATH): the stable reasons, resuming only what the wrapper drained and
only once clean, a timeout named as such and well inside Slurm's 60 s."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "contrib" / "slurm" / "rdmadoctor-healthcheck"
NHC = ROOT / "contrib" / "nhc" / "rdmadoctor.nhc"

FAKE_RDMADOCTOR = """#!/bin/bash
echo "$*" >> "$FAKE_DIR/rdmadoctor.args"
[ -n "${FAKE_SLEEP:-}" ] && sleep "$FAKE_SLEEP"
[ -n "${FAKE_LINE:-}" ] && echo "$FAKE_LINE"
exit "${FAKE_RC:-0}"
"""

# scontrol: `show node N` from $FAKE_DIR/node (State and Reason lines), `update` logged and applied
FAKE_SCONTROL = """#!/bin/bash
d="$FAKE_DIR"
if [ "$1" = show ]; then
    echo "NodeName=$3 Arch=x86_64 CoresPerSocket=8"
    echo "   State=$(cat $d/state) ThreadsPerCore=1"
    r=$(cat $d/reason 2>/dev/null)
    [ -n "$r" ] && echo "   Reason=$r [root@2026-11-30T10:00:00]"
    exit 0
fi
echo "$*" >> "$d/scontrol.log"
for a in "$@"; do
    case "$a" in
        State=DRAIN) echo "IDLE+DRAIN" > $d/state ;;
        State=RESUME) echo "IDLE" > $d/state; rm -f $d/reason ;;
        Reason=*) echo "${a#Reason=}" > $d/reason ;;
    esac
done
"""


@pytest.fixture
def fake(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("rdmadoctor", FAKE_RDMADOCTOR), ("scontrol", FAKE_SCONTROL), ("logger", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "state").write_text("IDLE\n")
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", FAKE_DIR=str(tmp_path), NODE="node07",
               STATE_DIR=str(tmp_path / "var"))
    return tmp_path, env


def health(env, **extra):
    started = time.monotonic()
    proc = subprocess.run(["bash", str(WRAPPER)], env={**env, **extra}, capture_output=True, text=True, timeout=90)
    return proc, time.monotonic() - started


def log_of(d):
    p = d / "scontrol.log"
    return p.read_text().splitlines() if p.exists() else []


CRIT = "RDMA CRITICAL memlock-limit: The locked-memory limit is 64 KiB: too small to register perftest's buffers"


def test_failure_drains_with_the_cause_and_clean_runs_resume(fake):
    d, env = fake
    proc, _ = health(env, FAKE_RC="2", FAKE_LINE=CRIT)
    assert proc.returncode == 0
    assert log_of(d) == ["update NodeName=node07 State=DRAIN Reason=rdmadoctor:memlock-limit The locked-memory "
                         "limit is 64 KiB: too small to register perftest's buffers"]
    assert "--format line --sample 0" in (d / "rdmadoctor.args").read_text()
    health(env, FAKE_RC="2", FAKE_LINE=CRIT)                 # same reason: no second update
    assert len(log_of(d)) == 1
    health(env, FAKE_RC="0", FAKE_LINE="RDMA OK: No problem found")
    assert len(log_of(d)) == 1                                # one clean run is not enough (flapping)
    health(env, FAKE_RC="1", FAKE_LINE="RDMA WARNING mtu-small: small MTU")
    assert log_of(d)[-1] == "update NodeName=node07 State=RESUME"
    assert (d / "state").read_text().strip() == "IDLE"


def test_a_failure_between_clean_runs_starts_the_count_again(fake):
    d, env = fake
    health(env, FAKE_RC="2", FAKE_LINE=CRIT)
    health(env, FAKE_RC="0", FAKE_LINE="RDMA OK: fine")
    health(env, FAKE_RC="2", FAKE_LINE=CRIT)
    health(env, FAKE_RC="0", FAKE_LINE="RDMA OK: fine")
    assert not any("RESUME" in line for line in log_of(d))


def test_a_node_someone_else_drained_is_never_touched(fake):
    d, env = fake
    (d / "state").write_text("IDLE+DRAIN\n")
    (d / "reason").write_text("bad DIMM, ticket 4711\n")
    for rc, line in (("2", CRIT), ("0", "RDMA OK: fine"), ("0", "RDMA OK: fine"), ("0", "RDMA OK: fine")):
        proc, _ = health(env, FAKE_RC=rc, FAKE_LINE=line)
        assert proc.returncode == 0
    assert log_of(d) == []
    assert (d / "reason").read_text().strip() == "bad DIMM, ticket 4711"


def test_a_timeout_is_named_and_the_wrapper_ends_well_inside_60_s(fake):
    d, env = fake
    proc, seconds = health(env, FAKE_SLEEP="30", FAKE_LINE=CRIT, CHECK_TIMEOUT="2")
    assert seconds < 15
    assert log_of(d) == ["update NodeName=node07 State=DRAIN Reason=rdmadoctor:timeout rdmadoctor check did not "
                         "finish within 2s"]
    assert "did not finish within 2s" in proc.stderr


def test_default_bounds_fit_slurms_limit():
    text = WRAPPER.read_text()
    assert 'CHECK_TIMEOUT="${CHECK_TIMEOUT:-40}"' in text and "timeout -k 5" in text
    assert "timeout -k 2 5 scontrol" in text
    # 40 s + 5 s to kill + two scontrol calls of at most 7 s: under 60 s


def test_unknown_and_missing_do_not_drain_by_default(fake):
    d, env = fake
    health(env, FAKE_RC="3", FAKE_LINE="RDMA UNKNOWN: Not inspected, so not known to be healthy")
    env2 = dict(env, PATH=env["PATH"].split(":", 1)[1], RDMADOCTOR=str(d / "nowhere"))
    proc, _ = health(env2)
    assert log_of(d) == [] and "is rdmadoctor installed" in proc.stderr
    proc, _ = health(env, FAKE_RC="3", FAKE_LINE="RDMA UNKNOWN: x", DRAIN_UNKNOWN="1")
    assert log_of(d) == ["update NodeName=node07 State=DRAIN Reason=rdmadoctor:unknown x"]


# -- NHC ----------------------------------------------------------------------------------------------

NHC_STUBS = """
TIMEOUT=30
die() { echo "DIE $1 $2"; }
log() { echo "LOG $*"; }
dbg() { :; }
nhc_cmd_with_timeout() { local t=$1; shift; timeout "$t" "$@"; local rc=$?; [ $rc = 124 ] && return 143; return $rc; }
. "$NHC_FILE"
check_rdmadoctor "$@"
echo "RET $?"
"""


def nhc(env, *args, **extra):
    return subprocess.run(["bash", "-c", NHC_STUBS, "nhc", *args], env={**env, **extra, "NHC_FILE": str(NHC)},
                          capture_output=True, text=True, timeout=60).stdout


def test_nhc_check_function(fake):
    d, env = fake
    assert nhc(env, FAKE_RC="2", FAKE_LINE=CRIT).splitlines() == [
        "DIE 1 check_rdmadoctor:  rdmadoctor:memlock-limit The locked-memory limit is 64 KiB: too small to register "
        "perftest's buffers", "RET 1"]
    assert nhc(env, FAKE_RC="0", FAKE_LINE="RDMA OK: fine").splitlines() == ["RET 0"]
    assert nhc(env, FAKE_RC="1", FAKE_LINE="RDMA WARNING mtu-small: small").splitlines()[-1] == "RET 0"
    assert nhc(env, "-w", FAKE_RC="1", FAKE_LINE="RDMA WARNING mtu-small: small").startswith(
        "DIE 1 check_rdmadoctor:  rdmadoctor:mtu-small small")
    out = nhc(env, "-t", "1", FAKE_SLEEP="10")
    assert out.startswith("DIE 1 check_rdmadoctor:  rdmadoctor:timeout rdmadoctor check did not finish within 1s")
    assert "--port 18516" in (nhc(env, "--", "--port", "18516") and (d / "rdmadoctor.args").read_text())
    assert nhc(env, "-t", "40").startswith("DIE 1 check_rdmadoctor:  rdmadoctor timeout 40s must be below")
