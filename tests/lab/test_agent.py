"""The guest agent's job runner, exercised on the host (it is plain Python; no VM needed)."""
from __future__ import annotations

import os

from tests.lab import guest_agent


def run(**request):
    return guest_agent.Job(request).wait(request.pop("timeout", 10))


def test_pty_merges_streams_in_terminal_order():
    # On a pipe, stdout would be block-buffered and come after stderr; on a terminal it is in order.
    answer = run(argv=["python3", "-c", "import sys; print('one'); print('two', file=sys.stderr); print('three')"],
                 pty=True)
    assert answer["rc"] == 0 and not answer["timed_out"]
    assert answer["stdout"] == "one\ntwo\nthree\n"
    assert answer["stderr"] == ""


def test_pipes_keep_streams_apart():
    answer = run(sh="echo out; echo err >&2; exit 3")
    assert (answer["rc"], answer["stdout"], answer["stderr"]) == (3, "out\n", "err\n")


def test_timeout_interrupts():
    answer = run(sh="echo started; sleep 30", timeout=1, pty=True)
    assert answer["timed_out"] and answer["rc"] in (-2, -9, 130)
    assert "started" in answer["stdout"]


def test_rlimits_apply():
    answer = run(sh="ulimit -l", rlimits={"memlock": 64 * 1024})
    assert answer["stdout"].strip() == "64"


def test_spawn_peek_wait():
    agent = guest_agent.Agent(port=os.open(os.devnull, os.O_WRONLY))
    job = guest_agent.Job({"sh": "echo banner; sleep 0.5; echo done", "pty": True})
    snap = job.snapshot()
    assert set(snap) >= {"running", "stdout", "seconds"}
    answer = job.wait(10)
    assert answer["stdout"] == "banner\ndone\n"
    assert agent.jobs == {}
