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


def test_tcp_stream_through_the_agent():
    """connect/send/close: the bytes of a forwarded TCP stream (what LabVM.forward relays) keep their order."""
    import base64
    import json
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def echo():
        conn, _ = server.accept()
        while True:
            data = conn.recv(4096)
            if not data:
                break
            conn.sendall(data.upper())
        conn.close()

    threading.Thread(target=echo, daemon=True).start()
    read_end, write_end = os.pipe()
    agent = guest_agent.Agent(port=write_end)
    agent.handle({"op": "connect", "port": server.getsockname()[1], "id": 1})
    for chunk in (b"one ", b"two"):
        agent.stream_op({"op": "send", "stream": 1, "data": base64.b64encode(chunk).decode()})
    agent.stream_op({"op": "close", "stream": 1})
    received, buffer = b"", b""
    while True:
        buffer += os.read(read_end, 65536)
        lines = buffer.split(b"\n")
        buffer = lines.pop()
        messages = [json.loads(line) for line in lines]
        done = False
        for message in messages:
            if message.get("id") == 1:
                assert message["stream"] == 1
            elif "data" in message:
                received += base64.b64decode(message["data"])
            else:
                done = True
        if done:
            break
    assert received == b"ONE TWO"
    assert agent.streams == {}
