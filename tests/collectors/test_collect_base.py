"""The context every collector reads through: bounded commands, reads that say why, fixture trees."""
import time

import pytest

from collect_helpers import tree
from rdmadoctor.collectors.base import CollectContext, Unavailable


def test_run_kills_a_hung_command_and_its_children(tmp_path):
    # a "tool" that leaves a grandchild holding stdout open and then hangs itself
    fake = tmp_path / "hangs"
    fake.write_text("#!/bin/sh\nsleep 300 &\nsleep 300\n")
    fake.chmod(0o755)
    ctx = CollectContext()
    t0 = time.monotonic()
    with pytest.raises(Unavailable, match="did not finish within 1 s"):
        ctx.run([str(fake)], timeout=1.0)
    assert time.monotonic() - t0 < 4.0


def test_run_missing_tool_and_fixture_mode(tmp_path):
    with pytest.raises(Unavailable, match="not installed"):
        CollectContext().run(["no-such-tool-rdmadoctor"])
    with pytest.raises(Unavailable, match="saved tree"):
        CollectContext(root=tmp_path, live=False).run(["true"])


def test_run_returns_output_and_rc():
    res = CollectContext().run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (res.rc, res.stdout.strip(), res.stderr.strip()) == (3, "out", "err")


def test_read_says_why(tmp_path):
    ctx = CollectContext(root=tmp_path, live=False)
    assert ctx.read("/nope")[0] is None and ctx.read("/nope")[1].startswith("ENOENT")
    (tmp_path / "f").write_text(" 42 \n")
    assert ctx.read("/f") == ("42", None)
    assert ctx.read_int("/f") == 42


def test_recorded_read_errors_come_back():
    # rxe's empty GID entries failed with EINVAL on the real host; fixture.json carries that
    ctx = tree("bookworm-rxe-active")
    text, why = ctx.read("/sys/devices/virtual/infiniband/rxe0/ports/1/gid_attrs/types/5")
    assert text is None and why.startswith("EINVAL")


def test_device_node_modes_from_fixture():
    st = tree("bookworm-rxe-active").stat("/dev/infiniband/uverbs0")
    assert st["mode"] == 0o666 and st["type"] == "char"


def test_sections_do_not_share_unreadable_lists():
    ctx = CollectContext()
    a, b = ctx.for_section(), ctx.for_section()
    a.unreadable("x", "y")
    assert b.unreadable_list == [] and ctx.unreadable_list == []


def test_realpath_stays_inside_the_tree():
    ctx = tree("handmade-mlx5-pcie-degraded")
    assert ctx.realpath("/sys/class/infiniband/mlx5_0/device").endswith("/0000:3b:00.0")
    assert ctx.link_name("/sys/class/infiniband/mlx5_0/device/driver") == "mlx5_core"
