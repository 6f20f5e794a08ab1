"""The verbs child's client logic against a fake pyverbs (the real one runs in the lab: tests/lab/test_probe.py)."""
from __future__ import annotations

import json
import struct

from rdmadoctor.probe import verbs_child as vc

NONCE = bytes(range(16))


class FakeError(Exception):
    def __init__(self, message, error_code=-1):
        super().__init__(message)
        self.error_code = error_code


class FakeWC:
    def __init__(self, status=0):
        self.status, self.vendor_err = status, 0


class FakeMR:
    counter = 0x1000

    def __init__(self, size):
        FakeMR.counter += 0x100000
        self.buf, self.rkey, self.data = FakeMR.counter, FakeMR.counter >> 8, bytearray(size)

    def write(self, data, length, offset=0):
        self.data[offset:offset + length] = data[:length]

    def read(self, length, offset):
        return bytes(self.data[offset:offset + length])


class Remote:
    """What the agent's listener would do, in memory."""

    def __init__(self, corrupt_read=False):
        self.target = bytearray(vc.EXCHANGE_BYTES)
        self.source = bytearray(vc.pattern(NONCE, b"B-read", vc.EXCHANGE_BYTES))
        if corrupt_read:
            self.source[100] ^= 0xFF
        self.burst = bytearray(vc.BURST_REGION)


class FakeEvent:
    def __init__(self, channel):
        self.event_type = channel.events.pop(0)

    def ack_cm_event(self):
        pass


class FakeChannel:
    def __init__(self, events):
        self.events = list(events)

    def close(self):
        pass


class FakeCMID:
    def __init__(self, world, creator=None, port_space=None):
        self.world, self.recvs, self.send_comps, self.recv_comps = world, [], [], []
        self.dev_name, self.port_num = b"fake0", 1

    def resolve_addr(self, ai, timeout):
        pass

    def resolve_route(self, timeout):
        pass

    def create_qp(self, attr):
        pass

    def _mr(self, size):
        if self.world.get("enomem"):
            raise FakeError("Failed to register a MR. Errno: 12, Cannot allocate memory", 12)
        return FakeMR(size)

    reg_msgs = reg_read = reg_write = _mr

    def connect(self, param):
        remote = self.world.get("remote")
        if remote is not None and self.recvs:         # the listener's INFO arrives in the first receive
            info = vc.INFO.pack(vc.MAGIC_INFO, NONCE, 1, 11, vc.EXCHANGE_BYTES, 2, 22, vc.EXCHANGE_BYTES, 3, 33,
                                vc.BURST_REGION)
            self.recvs.pop(0).write(info, len(info))
            self.recv_comps.append(FakeWC())

    def post_recv(self, mr):
        self.recvs.append(mr)

    def post_write(self, mr, length, addr, rkey, flags=0):
        remote = self.world["remote"]
        if addr == 1:
            remote.target[:length] = mr.read(length, 0)
        self.send_comps.append(FakeWC(self.world.get("write_status", 0)))

    def post_read(self, mr, length, addr, rkey, flags=0):
        mr.write(bytes(self.world["remote"].source[:length]), length)
        self.send_comps.append(FakeWC())

    def post_send(self, mr, flags=2, length=None):
        data = mr.read(length, 0)
        self.send_comps.append(FakeWC())
        if data.startswith(vc.MAGIC_DONE):              # the listener checks and answers
            remote = self.world["remote"]
            ok_write = bytes(remote.target) == vc.pattern(NONCE, b"A-write", vc.EXCHANGE_BYTES)
            ok_send = data[len(vc.MAGIC_DONE):] == vc.pattern(NONCE, b"C-send", vc.SEND_BYTES)
            body = vc.MAGIC_VERDICT + json.dumps({"write": "ok" if ok_write else "differs",
                                                  "send": "ok" if ok_send else "differs"}).encode() + b"\0"
            self.recvs.pop(0).write(body, len(body))
            self.recv_comps.append(FakeWC())

    def get_send_comp(self):
        return self.send_comps.pop(0)

    def get_recv_comp(self):
        return self.recv_comps.pop(0)

    def disconnect(self):
        self.world["disconnected"] = True

    def close(self):
        pass


def fake_verbs(world, events):
    class V:
        Error = FakeError
        version = "fake"

        @staticmethod
        def CMEventChannel():
            return FakeChannel(events)

        @staticmethod
        def CMID(creator=None, port_space=None):
            return FakeCMID(world, creator, port_space)

        CMEvent = FakeEvent

        @staticmethod
        def AddrInfo(**kw):
            world["addrinfo"] = kw
            return kw

        @staticmethod
        def ConnParam(**kw):
            return kw

        @staticmethod
        def QPCap(**kw):
            return kw

        @staticmethod
        def QPInitAttr(**kw):
            world["qp_init"] = kw
            return kw
    return V


def run(capsys, world, events, exchange):
    client = vc.Client(fake_verbs(world, events))
    client.connect({"op": "connect", "dst": "192.0.2.1", "port": 18601, "exchange": exchange,
                    "nonce": NONCE.hex(), "burst_seconds": 0.05})
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    return {e["ev"]: e for e in out if e["ev"] != "phase"}, [e["phase"] for e in out if e["ev"] == "phase"]


def test_bare_connect_rejected(capsys):
    world = {}
    ev, phases = run(capsys, world, [0, 2, 8], exchange=False)
    assert phases == ["addr", "route", "setup", "connect"]
    assert ev["connect"]["state"] == "rejected" and ev["connect"]["event"] == "REJECTED"
    assert ev["route"]["device"] == "fake0"
    assert world["addrinfo"]["port_space"] == vc.RDMA_PS_TCP and world["addrinfo"]["dst_service"] == "18601"
    assert world["qp_init"]["qp_type"] == vc.IBV_QPT_RC


def test_address_error_stops_there(capsys):
    ev, phases = run(capsys, {}, [1], exchange=False)
    assert phases == ["addr"] and ev["addr"]["state"] == "error" and ev["addr"]["event"] == "ADDR_ERROR"


def test_exchange_and_burst_pass_byte_for_byte(capsys):
    world = {"remote": Remote()}
    ev, phases = run(capsys, world, [0, 2, 9], exchange=True)
    assert phases == ["addr", "route", "setup", "connect", "info", "write", "read", "send", "verdict", "burst"]
    assert ev["exchange"]["state"] == "passed"
    assert ev["burst"]["state"] == "passed" and ev["burst"]["wrs"] >= 1 and ev["burst"]["bytes"] > 0
    assert bytes(world["remote"].target) == vc.pattern(NONCE, b"A-write", vc.EXCHANGE_BYTES)
    assert world["disconnected"]


def test_a_corrupted_read_is_a_mismatch(capsys):
    ev, _ = run(capsys, {"remote": Remote(corrupt_read=True)}, [0, 2, 9], exchange=True)
    assert ev["exchange"]["state"] == "mismatch" and ev["exchange"]["failed_op"] == "read"
    assert "byte 100 of 16384" in ev["exchange"]["failure"]["mismatch"]
    assert "burst" not in ev


def test_a_retry_exceeded_write_is_named(capsys):
    ev, _ = run(capsys, {"remote": Remote(), "write_status": 12}, [0, 2, 9], exchange=True)
    assert ev["exchange"]["state"] == "failed" and ev["exchange"]["failed_op"] == "write"
    assert ev["exchange"]["failure"]["status_name"] == "transport retry counter exceeded"


def test_out_of_locked_memory_at_setup(capsys):
    ev, phases = run(capsys, {"remote": Remote(), "enomem": True}, [0, 2, 9], exchange=True)
    assert phases[-1] == "setup" and ev["setup"]["state"] == "error" and ev["setup"]["errno"] == 12


def test_patterns_and_differences():
    a = vc.pattern(NONCE, b"A-write", 100)
    assert len(a) == 100 and a != vc.pattern(NONCE, b"B-read", 100) and a == vc.pattern(NONCE, b"A-write", 100)
    assert vc.first_difference(b"abc", b"abc") is None
    assert vc.first_difference(b"abd", b"abc") == 2 and vc.first_difference(b"ab", b"abc") == 2
    assert vc.deltas({"hw_counters": {"x": 1, "y": 2}}, {"hw_counters": {"x": 1, "y": 5, "z": 1}}) == \
        {"counters": {}, "hw_counters": {"y": 3}}
    assert struct.calcsize("!8s16sQIIQIIQII") == vc.INFO.size


def test_main_without_pyverbs_says_so(capsys, monkeypatch):
    monkeypatch.setattr(vc, "load_verbs", lambda: (None, "No module named 'pyverbs'"))
    assert vc.main(["verbs_child.py", "client"]) == 0
    event = json.loads(capsys.readouterr().out.splitlines()[0])
    assert event["ev"] == "fatal" and event["kind"] == "import"
    assert vc.main(["verbs_child.py"]) == 2
