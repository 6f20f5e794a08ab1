"""The probe's verbs work: rdma_cm and one RC QP, run as a script in a child process that is killed at a deadline.

Never imported by check or serve (only by tests): pyverbs' rdma_cm calls block holding the GIL, without a
timeout (rdma_get_cm_event, a CM connect to a silent peer waits out 15 retries of ~4 s), so the parent runs
this file with `python3 -I verbs_child.py client|server` and kills its process group at each phase's
deadline. Standard library plus pyverbs (the distribution's python3-pyverbs, rdma-core 44 to 65): constants
are plain ints (ABI-stable), enums are not imported through their version-dependent module paths.

It speaks JSON lines. Every event goes to stdout at once (flushed), so when the parent kills it the last
`phase` event says what hung:
    {"ev": "ready", "pyverbs": "...", "python": "3.11.2", "t": 0.41}
    {"ev": "phase", "phase": "connect", "t": 0.52}
    {"ev": "connect", "state": "rejected", "event": "REJECTED", "seconds": 0.03, "t": 0.55}
    {"ev": "fatal", "kind": "import", "error": "..."}          pyverbs missing: nothing else will come

client: reads instructions from stdin, one per line; EOF or {"op": "exit"} ends it.
    {"op": "connect", "dst": "192.0.2.1", "src": "192.0.2.2"|null, "port": 18601, "exchange": true,
     "nonce": "<hex>", "burst_seconds": 1.0}
  -> phases addr, route, setup, connect; with exchange: info, write, read, send, verdict, burst.
     Without an agent (exchange false) it only connects: REJECTED then proves the CM request reached the
     peer's RDMA stack and was answered (nobody listens there), UNREACHABLE that it got no answer.
server (the agent's listener): one JSON argument {"bind", "port", "nonce"}; accepts exactly one connection,
    runs its side of the exchange and the burst, reports, exits.

The exchange over one RC QP (known patterns derived from the session nonce, verified byte for byte):
    server --SEND INFO (its buffers' addresses and rkeys)--> client
    client --RDMA WRITE pattern A--> server's target; client <--RDMA READ pattern B-- server's source
    client --SEND "DONE" + pattern C--> server: checks its target holds A and the message is C
    server --SEND VERDICT--> client
    client --RDMA WRITE burst (depth 4 x 256 KiB) for burst_seconds--> ; client --SEND BURST_DONE--> server
Port counters (counters/ and hw_counters/ in sysfs) are read by each side around the burst.
"""
import hashlib
import json
import logging
import os
import struct
import sys
import time
from typing import Any, Dict  # noqa: F401 - named in type comments (this file runs on the system's Python)

T0 = time.monotonic()

# ABI-stable values (rdma-core librdmacm/rdma_cma.h, libibverbs/verbs.h)
RDMA_PS_TCP = 0x0106
RAI_PASSIVE = 1
IBV_QPT_RC = 2
IBV_SEND_SIGNALED = 2
EVENTS = {0: "ADDR_RESOLVED", 1: "ADDR_ERROR", 2: "ROUTE_RESOLVED", 3: "ROUTE_ERROR", 4: "CONNECT_REQUEST",
          5: "CONNECT_RESPONSE", 6: "CONNECT_ERROR", 7: "UNREACHABLE", 8: "REJECTED", 9: "ESTABLISHED",
          10: "DISCONNECTED", 11: "DEVICE_REMOVAL", 12: "MULTICAST_JOIN", 13: "MULTICAST_ERROR",
          14: "ADDR_CHANGE", 15: "TIMEWAIT_EXIT"}
CONNECT_STATE = {9: "established", 8: "rejected", 7: "unreachable", 6: "connect-error", 11: "device-removal"}
WC_STATUS = {0: "success", 1: "local length error", 2: "local QP operation error", 3: "local EEC operation error",
             4: "local protection error", 5: "work request flushed", 6: "memory window bind error",
             7: "bad response", 8: "local access error", 9: "remote invalid request", 10: "remote access error",
             11: "remote operation error", 12: "transport retry counter exceeded",
             13: "RNR retry counter exceeded", 14: "local RDD violation", 15: "remote invalid RD request",
             16: "remote aborted", 17: "invalid EE context number", 18: "invalid EE context state",
             19: "fatal error", 20: "response timeout", 21: "general error"}

EXCHANGE_BYTES = 16384          # larger than any RoCE/IB MTU: WRITE and READ span several packets
SEND_BYTES = 2048
MSG_BYTES = 4096
BURST_REGION = 1 << 20
BURST_WR = 256 * 1024
BURST_DEPTH = 4
ADDR_TIMEOUT_MS = 2000
ROUTE_TIMEOUT_MS = 2000
INFO = struct.Struct("!8s16sQIIQIIQII")
MAGIC_INFO, MAGIC_DONE, MAGIC_VERDICT, MAGIC_BURST = b"RDDRINFO", b"RDDRDONE", b"RDDRVERD", b"RDDRBRST"
SYSFS_IB = "/sys/class/infiniband"


def emit(ev, **fields):
    fields["t"] = round(time.monotonic() - T0, 3)
    sys.stdout.write(json.dumps(dict(ev=ev, **fields), default=str) + "\n")
    sys.stdout.flush()


def pattern(nonce, label, size):
    """The bytes both sides expect: a SHA-256 stream over (nonce, label, block number)."""
    out = bytearray()
    block = 0
    while len(out) < size:
        out += hashlib.sha256(nonce + label + block.to_bytes(4, "big")).digest()
        block += 1
    return bytes(out[:size])


def first_difference(got, want):
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return i
    return None if len(got) == len(want) else min(len(got), len(want))


def error_fields(exc):
    return {"error": "%s: %s" % (type(exc).__name__, exc), "errno": getattr(exc, "error_code", None)}


# -- pyverbs, loaded once, behind a small namespace (tests put a fake one in its place) ---------------------

class Verbs(object):
    def __init__(self):
        if not logging.getLogger().handlers:        # pyverbs/base.pyx calls logging.basicConfig at import
            logging.getLogger().addHandler(logging.NullHandler())
        from pyverbs.cmid import AddrInfo, CMEvent, CMEventChannel, CMID, ConnParam
        from pyverbs.pyverbs_error import PyverbsError
        from pyverbs.qp import QPCap, QPInitAttr
        self.AddrInfo, self.CMEvent, self.CMEventChannel, self.CMID = AddrInfo, CMEvent, CMEventChannel, CMID
        self.ConnParam, self.QPCap, self.QPInitAttr, self.Error = ConnParam, QPCap, QPInitAttr, PyverbsError
        self.version = None
        try:
            from importlib import metadata
            self.version = metadata.version("pyverbs")
        except Exception:   # noqa: BLE001 - Debian's python3-pyverbs has no dist-info
            pass


def load_verbs():
    try:
        return Verbs(), None
    except ImportError as exc:
        return None, str(exc)


def wait_event(verbs, channel):
    """(event type, name) of the next CM event, acked (blocks: the parent's deadline bounds it)."""
    ev = verbs.CMEvent(channel)
    kind = int(ev.event_type)
    ev.ack_cm_event()
    return kind, EVENTS.get(kind, str(kind))


def init_attr(verbs):
    cap = verbs.QPCap(max_send_wr=BURST_DEPTH + 4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    return verbs.QPInitAttr(qp_type=IBV_QPT_RC, cap=cap, sq_sig_all=1)


def conn_param(verbs):
    return verbs.ConnParam(resources=1, depth=1, retry=7, rnr_retry=6)


def text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return None if value is None else str(value)


def device_of(cmid):
    dev = port = None
    try:
        dev = text(cmid.dev_name)
        port = int(cmid.port_num)
    except Exception:   # noqa: BLE001 - older pyverbs: no dev_name
        pass
    return dev, port


def read_counters(dev, port):
    out = {}  # type: Dict[str, Dict[str, int]]
    if not dev or not port:
        return out
    for kind in ("counters", "hw_counters"):
        base = os.path.join(SYSFS_IB, dev, "ports", str(port), kind)
        try:
            names = os.listdir(base)
        except OSError:
            continue
        values = {}
        for name in names:
            try:
                with open(os.path.join(base, name)) as f:
                    values[name] = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        out[kind] = values
    return out


def deltas(before, after):
    out = {}
    for kind in ("counters", "hw_counters"):
        a, b = before.get(kind) or {}, after.get(kind) or {}
        out[kind] = {k: b[k] - a[k] for k in b if k in a and b[k] != a[k]}
    return out


def completion(wc, what):
    """None when the completion is a success, else the fields that say why."""
    if wc is None:
        return {"op": what, "status": None, "status_name": "no completion"}
    status = int(wc.status)
    if status == 0:
        return None
    return {"op": what, "status": status, "status_name": WC_STATUS.get(status, str(status)),
            "vendor_err": int(getattr(wc, "vendor_err", 0) or 0)}


# -- client ---------------------------------------------------------------------------------------------------

def close_all(*objs):
    for obj in objs:
        try:
            if obj is not None:
                obj.close()
        except Exception:   # noqa: BLE001 - teardown must not hide the result
            pass


class Client(object):
    def __init__(self, verbs):
        self.v = verbs

    def connect(self, instr):
        v = self.v
        dst, src, port = instr["dst"], instr.get("src"), int(instr["port"])
        exchange = bool(instr.get("exchange"))
        nonce = bytes.fromhex(instr.get("nonce") or "00" * 16)
        channel = cid = None
        try:
            channel = v.CMEventChannel()
            cid = v.CMID(creator=channel, port_space=RDMA_PS_TCP)
            route = self.resolve(channel, cid, dst, src, port)
            if route is None:
                return
            ok, mrs = self.setup(cid, exchange)
            if ok:
                self.session(channel, cid, mrs, nonce, instr.get("burst_seconds"), route)
        finally:
            close_all(cid, channel)

    def resolve(self, channel, cid, dst, src, port):
        """Phases addr and route: (device, port) of the route, or None when either failed."""
        v = self.v
        got = self.cm_event(channel, "addr", lambda: cid.resolve_addr(
            v.AddrInfo(src=src, dst=dst, dst_service=str(port), port_space=RDMA_PS_TCP), ADDR_TIMEOUT_MS))
        if got is None:
            return None
        kind, name, seconds = got
        emit("addr", state="resolved" if kind == 0 else "error", event=name, seconds=seconds)
        if kind != 0:
            return None
        got = self.cm_event(channel, "route", lambda: cid.resolve_route(ROUTE_TIMEOUT_MS))
        if got is None:
            return None
        kind, name, seconds = got
        if kind != 2:
            emit("route", state="error", event=name, seconds=seconds)
            return None
        dev, ib_port = device_of(cid)
        emit("route", state="resolved", event=name, device=dev, port=ib_port, seconds=seconds)
        return dev, ib_port

    def setup(self, cid, exchange):
        """Phase setup: the QP and, for an exchange, the registered buffers. (ok, buffers or None)."""
        emit("phase", phase="setup")
        t = time.monotonic()
        try:
            cid.create_qp(init_attr(self.v))
            mrs = self.register(cid) if exchange else None
            if mrs is not None:
                cid.post_recv(mrs["info"])
                cid.post_recv(mrs["verdict"])
        except self.v.Error as exc:
            emit("setup", state="error", seconds=round(time.monotonic() - t, 3), **error_fields(exc))
            return False, None
        emit("setup", state="ok", seconds=round(time.monotonic() - t, 3))
        return True, mrs

    def session(self, channel, cid, mrs, nonce, burst_seconds, route):
        """Phase connect, then with buffers the exchange and the burst."""
        got = self.cm_event(channel, "connect", lambda: cid.connect(conn_param(self.v)))
        if got is None:
            return
        kind, name, seconds = got
        emit("connect", state=CONNECT_STATE.get(kind, "error"), event=name, seconds=seconds)
        if kind != 9:
            return
        if mrs is not None and self.exchange(cid, mrs, nonce):
            self.burst(cid, mrs, float(burst_seconds or 1.0), *route)
        try:
            cid.disconnect()
        except self.v.Error:
            pass

    def cm_event(self, channel, phase, call):
        """Starts one rdma_cm step and waits for its event: (event kind, event name, seconds), or None when
        the call itself failed (reported as the phase's error)."""
        emit("phase", phase=phase)
        t = time.monotonic()
        try:
            call()
            kind, name = wait_event(self.v, channel)
        except self.v.Error as exc:
            emit(phase, state="error", event=None, seconds=round(time.monotonic() - t, 3), **error_fields(exc))
            return None
        return kind, name, round(time.monotonic() - t, 3)

    @staticmethod
    def register(cid):
        return {"info": cid.reg_msgs(MSG_BYTES), "verdict": cid.reg_msgs(MSG_BYTES),
                "write": cid.reg_msgs(EXCHANGE_BYTES), "read": cid.reg_msgs(EXCHANGE_BYTES),
                "send": cid.reg_msgs(MSG_BYTES), "burst": cid.reg_msgs(BURST_WR)}

    def step(self, name, fn):
        """Runs one timed operation; (result, failure dict or None)."""
        emit("phase", phase=name)
        t = time.monotonic()
        try:
            result, failure = fn()
        except self.v.Error as exc:
            result, failure = None, dict(op=name, **error_fields(exc))
        seconds = round(time.monotonic() - t, 3)
        emit("op", op=name, ok=failure is None, seconds=seconds, failure=failure)
        return result, failure

    def exchange(self, cid, mrs, nonce):
        report = {"ops": {}, "state": "passed"}  # type: Dict[str, Any]
        ex = Exchange(cid, mrs, nonce)
        fields, fail = self.step("info", ex.info)
        if fail:
            return self.done(report, "info", fail)
        ex.remote = fields
        self.burst_target = fields[8:11]
        for name, fn in (("write", ex.write), ("read", ex.read), ("send", ex.send), ("verdict", ex.verdict)):
            _, fail = self.step(name, fn)
            report["ops"][name] = "ok" if fail is None else "failed"
            if fail:
                return self.done(report, name, fail)
        emit("exchange", **report)
        return True

    @staticmethod
    def done(report, name, fail):
        report["state"] = "mismatch" if fail.get("mismatch") else "failed"
        report["failed_op"] = name
        report["failure"] = fail
        emit("exchange", **report)
        return False

    def burst(self, cid, mrs, seconds, dev, ib_port):
        b_addr, b_rkey, b_len = self.burst_target
        slots = max(1, min(b_len, BURST_REGION) // BURST_WR)
        emit("phase", phase="burst")
        before = read_counters(dev, ib_port)
        posted = completed = 0
        failure = None
        t = time.monotonic()
        try:
            while True:
                while posted - completed < BURST_DEPTH and time.monotonic() - t < seconds:
                    cid.post_write(mrs["burst"], BURST_WR, b_addr + (posted % slots) * BURST_WR, b_rkey,
                                   IBV_SEND_SIGNALED)
                    posted += 1
                if completed >= posted:
                    break
                failure = completion(cid.get_send_comp(), "burst write")
                if failure:
                    break
                completed += 1
        except self.v.Error as exc:
            failure = dict(op="burst write", **error_fields(exc))
        elapsed = max(time.monotonic() - t, 1e-6)
        after = read_counters(dev, ib_port)
        nbytes = completed * BURST_WR
        report = {"state": "failed" if failure else "passed", "bytes": nbytes, "wrs": completed,
                  "seconds": round(elapsed, 3), "gbps": round(nbytes * 8 / elapsed / 1e9, 4),
                  "wr_bytes": BURST_WR, "depth": BURST_DEPTH, "device": dev, "port": ib_port,
                  "deltas": deltas(before, after), "failure": failure}
        if failure is None:
            body = json.dumps({"bytes": nbytes, "seconds": report["seconds"]}).encode()
            try:
                mrs["send"].write(MAGIC_BURST + body, len(MAGIC_BURST) + len(body))
                cid.post_send(mrs["send"], IBV_SEND_SIGNALED, len(MAGIC_BURST) + len(body))
                fail = completion(cid.get_send_comp(), "send burst-done")
                if fail:
                    report["failure"] = fail
            except self.v.Error as exc:
                report["failure"] = dict(op="send burst-done", **error_fields(exc))
        emit("burst", **report)


class Exchange(object):
    """The client's side of the exchange, one step a method: each returns (result, failure or None)."""

    def __init__(self, cid, mrs, nonce):
        self.cid, self.mrs, self.nonce = cid, mrs, nonce
        self.remote = None  # type: Any  # the listener's INFO: its buffers' addresses, rkeys and lengths

    def info(self):
        fail = completion(self.cid.get_recv_comp(), "recv info")
        if fail:
            return None, fail
        fields = INFO.unpack(self.mrs["info"].read(INFO.size, 0))
        if fields[0] != MAGIC_INFO or fields[1] != self.nonce:
            return None, {"op": "info", "mismatch": "the listener's INFO message is not for this session"}
        return fields, None

    def write(self):
        w_addr, w_rkey = self.remote[2], self.remote[3]
        self.mrs["write"].write(pattern(self.nonce, b"A-write", EXCHANGE_BYTES), EXCHANGE_BYTES)
        self.cid.post_write(self.mrs["write"], EXCHANGE_BYTES, w_addr, w_rkey, IBV_SEND_SIGNALED)
        return None, completion(self.cid.get_send_comp(), "rdma write")

    def read(self):
        r_addr, r_rkey = self.remote[5], self.remote[6]
        self.cid.post_read(self.mrs["read"], EXCHANGE_BYTES, r_addr, r_rkey, IBV_SEND_SIGNALED)
        fail = completion(self.cid.get_send_comp(), "rdma read")
        if fail:
            return None, fail
        at = first_difference(self.mrs["read"].read(EXCHANGE_BYTES, 0), pattern(self.nonce, b"B-read",
                                                                                EXCHANGE_BYTES))
        if at is not None:
            return None, {"op": "rdma read", "mismatch": "byte %d of %d differs" % (at, EXCHANGE_BYTES)}
        return None, None

    def send(self):
        c = pattern(self.nonce, b"C-send", SEND_BYTES)
        self.mrs["send"].write(MAGIC_DONE + c, len(MAGIC_DONE) + SEND_BYTES)
        self.cid.post_send(self.mrs["send"], IBV_SEND_SIGNALED, len(MAGIC_DONE) + SEND_BYTES)
        return None, completion(self.cid.get_send_comp(), "send")

    def verdict(self):
        fail = completion(self.cid.get_recv_comp(), "recv verdict")
        if fail:
            return None, fail
        raw = self.mrs["verdict"].read(MSG_BYTES, 0)
        if not raw.startswith(MAGIC_VERDICT):
            return None, {"op": "verdict", "mismatch": "the listener's verdict message is garbled"}
        body = json.loads(raw[len(MAGIC_VERDICT):].split(b"\0", 1)[0].decode())
        bad = [k for k in ("write", "send") if body.get(k) != "ok"]
        if bad:
            return body, {"op": "rdma " + bad[0] if bad[0] == "write" else bad[0],
                          "mismatch": "the listener found %s" % "; ".join(
                              "%s: %s" % (k, body.get(k)) for k in bad)}
        return body, None


def client_main(verbs):
    client = Client(verbs)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            instr = json.loads(line)
        except ValueError:
            emit("error", error="instruction is not JSON")
            continue
        if instr.get("op") == "exit":
            break
        if instr.get("op") == "connect":
            try:
                client.connect(instr)
            except Exception as exc:   # noqa: BLE001 - report, never a traceback instead of JSON
                emit("error", **error_fields(exc))
            emit("idle")


# -- server (the agent's listener) -----------------------------------------------------------------------------

class Listener(object):
    """The agent's listener: one rdma_cm listening ID, the one connection it accepts, their event channel."""

    def __init__(self, verbs, nonce):
        self.v, self.nonce = verbs, nonce
        self.channel = verbs.CMEventChannel()
        self.lid = verbs.CMID(creator=self.channel, port_space=RDMA_PS_TCP)
        self.child = None  # type: Any

    def close(self):
        close_all(self.child, self.lid, self.channel)

    def listen(self, bind, port):
        v = self.v
        try:
            self.lid.bind_addr(v.AddrInfo(src=bind, src_service=str(port), port_space=RDMA_PS_TCP,
                                          flags=RAI_PASSIVE))
            self.lid.listen(1)
        except v.Error as exc:
            emit("listen", state="error", **error_fields(exc))
            return False
        dev, ib_port = device_of(self.lid)
        emit("listen", state="listening", address=bind, port=port, device=dev, ib_port=ib_port)
        return True

    def accept(self):
        """Waits for a CONNECT_REQUEST, sets up the QP and buffers, accepts; the buffers, or None when the
        connection was not established."""
        v = self.v
        while self.child is None:
            ev = v.CMEvent(self.channel)
            if int(ev.event_type) == 4:
                self.child = v.CMID(creator=ev, listen_id=self.lid)
            ev.ack_cm_event()
        emit("request")
        child = self.child
        child.create_qp(init_attr(v))
        bufs = {"target": child.reg_write(EXCHANGE_BYTES), "source": child.reg_read(EXCHANGE_BYTES),
                "burst": child.reg_write(BURST_REGION)}
        bufs["recv1"], bufs["recv2"] = child.reg_msgs(MSG_BYTES), child.reg_msgs(MSG_BYTES)
        bufs["info"], bufs["verdict"] = child.reg_msgs(MSG_BYTES), child.reg_msgs(MSG_BYTES)
        bufs["source"].write(pattern(self.nonce, b"B-read", EXCHANGE_BYTES), EXCHANGE_BYTES)
        child.post_recv(bufs["recv1"])
        child.post_recv(bufs["recv2"])
        child.accept(conn_param(v))
        kind = -1
        while kind != 9:
            ev = v.CMEvent(self.channel)
            kind = int(ev.event_type)
            ev.ack_cm_event()
            if kind in (6, 7, 8, 10, 11):
                emit("established", state="error", event=EVENTS.get(kind, str(kind)))
                return None
        return bufs

    def send_info(self, bufs):
        child, target, source, burst = self.child, bufs["target"], bufs["source"], bufs["burst"]
        message = INFO.pack(MAGIC_INFO, self.nonce, target.buf, target.rkey, EXCHANGE_BYTES, source.buf,
                            source.rkey, EXCHANGE_BYTES, burst.buf, burst.rkey, BURST_REGION)
        bufs["info"].write(message, len(message))
        child.post_send(bufs["info"], IBV_SEND_SIGNALED, len(message))
        return completion(child.get_send_comp(), "send info")

    def checks(self, bufs):
        """What the client wrote and sent, checked byte for byte."""
        raw = bufs["recv1"].read(len(MAGIC_DONE) + SEND_BYTES, 0)
        checks = {"write": "ok", "send": "ok"}
        at = first_difference(bufs["target"].read(EXCHANGE_BYTES, 0), pattern(self.nonce, b"A-write",
                                                                              EXCHANGE_BYTES))
        if at is not None:
            checks["write"] = "byte %d of %d differs" % (at, EXCHANGE_BYTES)
        if not raw.startswith(MAGIC_DONE):
            checks["send"] = "not the DONE message"
        else:
            at = first_difference(raw[len(MAGIC_DONE):], pattern(self.nonce, b"C-send", SEND_BYTES))
            if at is not None:
                checks["send"] = "byte %d of %d differs" % (at, SEND_BYTES)
        return checks

    def exchange(self, bufs):
        """The listener's side of the exchange; True when the verdict was sent."""
        child = self.child
        fail = self.send_info(bufs) or completion(child.get_recv_comp(), "recv done")
        if fail:
            emit("exchange", state="failed", failure=fail)
            return False
        checks = self.checks(bufs)
        body = MAGIC_VERDICT + json.dumps(checks).encode() + b"\0"
        bufs["verdict"].write(body, len(body))
        child.post_send(bufs["verdict"], IBV_SEND_SIGNALED, len(body))
        fail = completion(child.get_send_comp(), "send verdict")
        emit("exchange", state="passed" if checks == {"write": "ok", "send": "ok"} else "mismatch", checks=checks,
             failure=fail)
        return fail is None

    def burst(self, bufs, dev, ib_port, before):
        """Waits for the client's BURST_DONE; the counters moved meanwhile, and what the client says it sent."""
        fail = completion(self.child.get_recv_comp(), "recv burst-done")
        after = read_counters(dev, ib_port)
        told = {}
        raw = bufs["recv2"].read(MSG_BYTES, 0)
        if fail is None and raw.startswith(MAGIC_BURST):
            try:
                told = json.loads(raw[len(MAGIC_BURST):].split(b"\0", 1)[0].decode())
            except ValueError:
                told = {}
        emit("burst", state="failed" if fail else "passed", failure=fail, device=dev, port=ib_port,
             deltas=deltas(before, after), told=told)


def server_main(verbs, args):
    bind, port = args["bind"], int(args["port"])
    listener = Listener(verbs, bytes.fromhex(args["nonce"]))
    try:
        if not listener.listen(bind, port):
            return
        bufs = listener.accept()
        if bufs is None:
            return
        dev, ib_port = device_of(listener.child)
        emit("established", state="ok", device=dev, ib_port=ib_port)
        before = read_counters(dev, ib_port)
        if listener.exchange(bufs):
            listener.burst(bufs, dev, ib_port, before)
    except verbs.Error as exc:
        emit("error", **error_fields(exc))
    finally:
        listener.close()


def main(argv):
    mode = argv[1] if len(argv) > 1 else ""
    if mode not in ("client", "server"):
        emit("fatal", kind="usage", error="usage: verbs_child.py client | server JSON")
        return 2
    verbs, why = load_verbs()
    if verbs is None:
        emit("fatal", kind="import", error=why, python=sys.executable)
        return 0
    emit("ready", pyverbs=verbs.version, python=sys.version.split()[0], executable=sys.executable)
    if mode == "client":
        client_main(verbs)
    else:
        try:
            args = json.loads(argv[2])
        except (IndexError, ValueError):
            emit("fatal", kind="usage", error="server needs one JSON argument")
            return 2
        server_main(verbs, args)
    emit("exit")
    return 0


if __name__ == "__main__":
    try:
        code = main(sys.argv)
    except Exception as exc:    # noqa: BLE001 - a crash is an event, not a traceback on stdout
        emit("fatal", kind="crash", **error_fields(exc))
        code = 1
    sys.stdout.flush()
    os._exit(code)
