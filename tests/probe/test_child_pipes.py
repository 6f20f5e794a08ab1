"""probe/child.py: a kill returns at once, even when the child's output pipe stays open behind it.

A verbs child can hang in the kernel after its deadline (rdma_destroy_id() of a connection whose packets cannot
leave waits in cm_destroy_id(), uninterruptible: seen in the lab with UDP 4791 dropped on the output path), and
then neither dies nor closes its stdout. A process that escaped the group does the same to the pipe; it stands in
for the stuck child here, since an uninterruptible sleep cannot be made on purpose."""
from __future__ import annotations

import os
import signal
import sys
import time

from rdmadoctor.probe.child import Child

# the child starts a process in a session of its own (out of the child's group) that keeps the child's stdout and
# stderr open for a minute, prints its pid, and waits
ESCAPES = ("import subprocess, sys, time\n"
           "p = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
           "print('{\"ev\": \"ready\", \"pid\": %d}' % p.pid, flush=True)\n"
           "time.sleep(60)\n")


def test_a_kill_does_not_wait_for_a_pipe_another_process_holds_open():
    child = Child([sys.executable, "-c", ESCAPES])
    event = child.next_event(time.monotonic() + 20)
    assert event is not None and event["ev"] == "ready", child.stderr_tail()
    escaped = event["pid"]
    try:
        started = time.monotonic()
        child.kill()
        child.close()
        assert time.monotonic() - started < 5.0
        assert not child.alive() and child.killed
        # the reader is still there (the pipe is open): no end of output is reported before it closes
        assert child.next_event(time.monotonic() + 0.2) is None
    finally:
        os.kill(escaped, signal.SIGKILL)
    # once the last writer is gone the reader ends and says so
    assert child.next_event(time.monotonic() + 10) == {"ev": "eof"}
