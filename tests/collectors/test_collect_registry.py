"""collect_facts: parallel, bounded, never raises; the facts file contract (save/load/validate)."""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from collect_helpers import REPO, SYSFS, section, tree
from rdmadoctor.collectors import (ORDER, SCHEMA, FactsError, collect_facts, load_facts, registry, save_facts,
                                   validate_facts)
from rdmadoctor.collectors.base import CollectContext, Unavailable
from rdmadoctor.runtime import proc


def check_shape(facts):
    assert facts["schema"] == SCHEMA
    for key in ("hostname", "kernel", "machine", "os", "user", "uid", "is_root", "collected_at", "rdmadoctor"):
        assert key in facts["host"]
    for name, sec in facts["sections"].items():
        assert sec["status"] in ("ok", "partial", "unavailable"), name
        assert isinstance(sec["unreadable"], list) and isinstance(sec["seconds"], float)
        assert "source" in sec
        if sec["status"] == "unavailable":
            assert "data" not in sec and sec["reason"]
        else:
            assert isinstance(sec["data"], dict)
        if sec["status"] == "partial":
            assert sec["unreadable"] and sec["reason"]
        for u in sec["unreadable"]:
            assert set(u) == {"what", "why"} and u["why"]
    json.dumps(facts)                                    # JSON-serialisable as is


def test_registry_order():
    assert list(registry()) == list(ORDER) == ["versions", "devices", "kernel", "netlink", "limits", "firewall",
                                                "ports", "pci", "qos"]


def test_this_host_never_raises_and_is_quick():
    t0 = time.monotonic()
    facts = collect_facts(CollectContext(peer="127.0.0.1"))
    assert time.monotonic() - t0 < 10.0
    check_shape(facts)
    assert list(facts["sections"]) == list(ORDER)
    dev = section(facts, "devices")
    if not os.path.isdir("/sys/class/infiniband"):      # this project's dev/CI machines: no RDMA at all
        assert dev["status"] in ("ok", "partial")
        assert dev["data"]["devices"] == [] and dev["data"]["rdma_subsystem"] is False
        assert "no RDMA" in dev["reason"]
        assert dev["data"]["pyverbs"]["available"] is False and dev["data"]["pyverbs"]["error"]


def test_only_and_unknown_names():
    facts = collect_facts(CollectContext(), only=["limits", "pci"])
    assert list(facts["sections"]) == ["limits", "pci"]
    with pytest.raises(ValueError, match="unknown collector"):
        collect_facts(CollectContext(), only=["nope"])


def test_a_hung_sysfs_read_becomes_timed_out(tmp_path):
    root = tmp_path / "tree"
    shutil.copytree(SYSFS / "handmade-ib-init-no-sm", root, symlinks=True)
    state = root / "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/mlx5_0/ports/1/state"
    state.unlink()
    os.mkfifo(state)                                     # open() blocks until a writer appears: a hung read
    try:
        t0 = time.monotonic()
        facts = collect_facts(CollectContext(root=root, live=False), only=["devices", "pci"],
                              timeouts={"devices": 1.5})
        assert time.monotonic() - t0 < 4.0
        dev = section(facts, "devices")
        assert dev["status"] == "unavailable" and dev["reason"] == "timed out after 1.5 s"
        assert section(facts, "pci")["status"] == "ok"
    finally:
        fd = os.open(state, os.O_WRONLY | os.O_NONBLOCK)   # release the stuck reader thread
        os.close(fd)


def test_a_hung_command_becomes_timed_out(tmp_path):
    fake = tmp_path / "nft"
    fake.write_text("#!/bin/sh\n%s 300\n" % shutil.which("sleep"))
    fake.chmod(0o755)
    ctx = CollectContext(is_root=True, env={"PATH": str(tmp_path)})
    t0 = time.monotonic()
    facts = collect_facts(ctx, only=["firewall"], timeouts={"firewall": 1.0})
    assert time.monotonic() - t0 < 3.0
    fw = section(facts, "firewall")
    assert fw["status"] == "unavailable" and fw["reason"] == "timed out after 1 s"


def _running(pid):
    """Whether pid is a live process (a zombie waiting for its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_hung_command_does_not_outlive_rdmadoctor(tmp_path):
    # The collector is abandoned at its 1 s deadline while its command runs on (its own timeout is 5 s), in a
    # session of its own; the process that started it exits at once and must take the command with it.
    pid_file = tmp_path / "pid"
    fake = tmp_path / "nft"
    fake.write_text("#!/bin/sh\necho $$ > %s\nexec %s 300\n" % (pid_file, shutil.which("sleep")))
    fake.chmod(0o755)
    script = ("from rdmadoctor.collectors import collect_facts\n"
              "from rdmadoctor.collectors.base import CollectContext\n"
              "facts = collect_facts(CollectContext(is_root=True, env={'PATH': %r}), only=['firewall'],\n"
              "                      timeouts={'firewall': 1.0})\n"
              "print(facts['sections']['firewall']['reason'])\n" % str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "timed out after 1 s"
    pid = int(pid_file.read_text())
    end = time.monotonic() + 10
    while _running(pid) and time.monotonic() < end:
        time.sleep(0.05)
    alive = _running(pid)
    if alive:
        os.kill(pid, 9)
    assert not alive, "the hung command's process outlived rdmadoctor"


def _kill_leftovers(bound: float = 10.0) -> None:
    """Kill and reap what earlier tests of this session left in the registry (a lab guest killed here can take a
    while to die), so that the counts below are of this test's own processes."""
    end = time.monotonic() + bound
    while proc.kill_still_running() and time.monotonic() < end:
        time.sleep(0.05)


def test_every_process_started_is_killed_at_exit_only_while_it_runs():
    _kill_leftovers()
    started = proc.start(["sleep", "300"], stdout=subprocess.DEVNULL)
    finished = proc.start(["true"])
    finished.wait(timeout=10)
    try:
        assert proc.kill_still_running() >= 1
        assert started.wait(timeout=10) == -9
        assert finished.returncode == 0
        assert proc.kill_still_running() == 0
    finally:
        proc.kill_group(started)


def test_a_failing_collector_is_unavailable_not_a_crash():
    class Boom:
        TIMEOUT = 2.0

        @staticmethod
        def collect(ctx):
            raise KeyError("bug")

    class Gone:
        TIMEOUT = 2.0

        @staticmethod
        def collect(ctx):
            ctx.unreadable("half", "because")
            raise Unavailable("tool missing")

    facts = collect_facts(CollectContext(), collectors={"boom": Boom, "gone": Gone})
    assert facts["sections"]["boom"]["status"] == "unavailable"
    assert "KeyError" in facts["sections"]["boom"]["reason"]
    assert facts["sections"]["gone"]["reason"] == "tool missing"
    assert facts["sections"]["gone"]["unreadable"] == [{"what": "half", "why": "because"}]


def test_total_budget_bounds_everything():
    class Slow:
        TIMEOUT = 30.0

        @staticmethod
        def collect(ctx):
            time.sleep(20)
            return {}

    t0 = time.monotonic()
    facts = collect_facts(CollectContext(), collectors={"a": Slow, "b": Slow}, total_timeout=1.0)
    assert time.monotonic() - t0 < 2.5
    assert all(s["status"] == "unavailable" and "timed out" in s["reason"] for s in facts["sections"].values())


def test_save_and_load_round_trip(tmp_path):
    facts = collect_facts(tree("bookworm-rxe-active"))
    check_shape(facts)
    path = tmp_path / "f.json"
    save_facts(facts, path)
    assert load_facts(path) == json.loads(json.dumps(facts))


@pytest.mark.parametrize("content, message", [
    ("not json", "not JSON"),
    ("[1, 2]", "not an rdmadoctor facts document"),
    ('{"schema": "rdmadoctor/1", "verdict": {}}', "not an rdmadoctor facts document"),
    ('{"schema": "rdmadoctor-facts/9", "host": {}, "sections": {}}', "not supported"),
    ('{"schema": "rdmadoctor-facts/1", "host": {}, "sections": {"x": {"status": "fine"}}}', "no valid status"),
    ('{"schema": "rdmadoctor-facts/1", "host": {}, "sections": {"x": {"status": "ok"}}}', "no data object"),
])
def test_load_refuses_other_documents(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(FactsError, match=message):
        load_facts(path)


def test_load_missing_file(tmp_path):
    with pytest.raises(FactsError, match="cannot read"):
        load_facts(tmp_path / "absent.json")


def test_recorded_lab_facts_are_valid():
    for path in sorted((REPO / "fixtures" / "facts" / "lab").glob("*/facts-*.json")):
        validate_facts(load_facts(path))


def test_collect_inside_a_running_event_loop():
    """pyroute2 >= 0.9's sync IPRoute refuses a running loop; collectors run in their own threads."""
    import asyncio

    async def main():
        return collect_facts(CollectContext(), only=["netlink"])

    facts = asyncio.run(main())
    assert section(facts, "netlink")["status"] in ("ok", "partial"), section(facts, "netlink")


def test_unprivileged_run_reports_unreadable(nobody_python, tmp_path):
    """As uid 65534: the firewall and (with dmesg_restrict=1) the kernel log are unreadable, never clean."""
    code = ("import json, sys; sys.path.insert(0, %r); "
            "from rdmadoctor.collectors import collect_facts, CollectContext; "
            "print(json.dumps(collect_facts(CollectContext())))" % str(REPO))
    t0 = time.monotonic()
    res = subprocess.run([*nobody_python, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - t0 < 15.0
    facts = json.loads(res.stdout)
    check_shape(facts)
    assert facts["host"]["uid"] == 65534 and facts["host"]["is_root"] is False
    fw = section(facts, "firewall")
    assert fw["status"] == "unavailable" and "CAP_NET_ADMIN" in fw["reason"]
    kernel = section(facts, "kernel")
    restrict = open("/proc/sys/kernel/dmesg_restrict").read().strip()
    if restrict == "1":
        assert kernel["status"] == "partial"
        log = kernel["data"]["log"]
        assert log["readable"] is False and log["lines"] == []
        assert "dmesg_restrict=1" in log["unreadable"]
        assert any(u["what"] == "kernel log" for u in kernel["unreadable"])
