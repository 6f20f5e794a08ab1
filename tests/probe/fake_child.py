"""A stand-in for rdmadoctor/probe/verbs_child.py that speaks its JSON-line protocol without RDMA.

What it does comes from $RDMADOCTOR_FAKE_CHILD (the parent passes its environment):
    import            report that pyverbs cannot be imported
    slow-start        sleep 30 s before "ready"
    rejected          every connect ends in REJECTED (nobody listens)
    established       ESTABLISHED, then (with exchange) a passing exchange and burst
    hang-connect      hang in the connect phase (a silent peer)
    hang-write        ESTABLISHED, then hang in the RDMA WRITE
    addr-error        ADDR_ERROR
    retry             ESTABLISHED, then the WRITE completes with status 12
"""
import json
import os
import sys
import time

T0 = time.monotonic()
MODE = os.environ.get("RDMADOCTOR_FAKE_CHILD", "rejected")


def emit(ev, **fields):
    fields["t"] = round(time.monotonic() - T0, 3)
    sys.stdout.write(json.dumps(dict(ev=ev, **fields)) + "\n")
    sys.stdout.flush()


def connect(instr):
    emit("phase", phase="addr")
    if MODE == "addr-error":
        emit("addr", state="error", event="ADDR_ERROR", seconds=0.01)
        return
    emit("addr", state="resolved", event="ADDR_RESOLVED", seconds=0.001)
    emit("phase", phase="route")
    emit("route", state="resolved", event="ROUTE_RESOLVED", device="fake0", port=1, seconds=0.001)
    emit("phase", phase="setup")
    emit("setup", state="ok", seconds=0.001)
    emit("phase", phase="connect")
    if MODE == "hang-connect":
        time.sleep(300)
    if MODE == "rejected" or (MODE in ("established", "hang-write", "retry") and not instr.get("exchange")):
        emit("connect", state="rejected", event="REJECTED", seconds=0.002)
        return
    emit("connect", state="established", event="ESTABLISHED", seconds=0.002)
    for op in ("info", "write", "read", "send", "verdict"):
        emit("phase", phase=op)
        if MODE == "hang-write" and op == "write":
            time.sleep(300)
        if MODE == "retry" and op == "write":
            failure = {"op": "rdma write", "status": 12, "status_name": "transport retry counter exceeded"}
            emit("op", op=op, ok=False, seconds=0.5, failure=failure)
            emit("exchange", ops={}, state="failed", failed_op=op, failure=failure)
            return
        emit("op", op=op, ok=True, seconds=0.001, failure=None)
    emit("exchange", ops={}, state="passed")
    emit("phase", phase="burst")
    emit("burst", state="passed", bytes=262144 * 8, wrs=8, seconds=0.2, gbps=0.0839, device="fake0", port=1,
         deltas={"counters": {}, "hw_counters": {"sent_pkts": 2100}}, failure=None)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if MODE == "import":
        emit("fatal", kind="import", error="No module named 'pyverbs'")
        return
    if MODE == "slow-start":
        time.sleep(30)
    emit("ready", pyverbs="fake", python=sys.version.split()[0], executable=sys.executable)
    if mode == "server":
        emit("listen", state="listening", address="127.0.0.1", port=0, device="fake0", ib_port=1)
        emit("request")
        emit("established", state="ok")
        emit("exchange", state="passed", checks={"write": "ok", "send": "ok"})
        emit("burst", state="passed", deltas={"counters": {}, "hw_counters": {"rcvd_pkts": 2100}})
        emit("exit")
        return
    for line in sys.stdin:
        instr = json.loads(line)
        if instr.get("op") == "exit":
            break
        connect(instr)
        emit("idle")
    emit("exit")


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)
