"""A guest that is gone (a real kernel panic: sysrq ``c``; an agent that stopped answering) is named as gone,
with its console, and the next run on the pair gets a freshly booted guest in its place; ``LabManager.run``
runs its work once more.

The guests boot with ``panic=-1`` and QEMU runs with ``-no-reboot``: a panic reboots at once, and the
reboot is QEMU's exit. A lost guest is replaced so that it costs at most the test it cut short, not every
later test of its pair.
"""
from __future__ import annotations

import pytest

from tests.lab.vm import GuestGone

PAIR = "bookworm"
PANIC = "echo 1 > /proc/sys/kernel/sysrq; echo c > /proc/sysrq-trigger"


def panic(vm) -> None:
    """Crashes the guest's kernel; the answer never comes, so only send."""
    vm.agent.send({"op": "run", "sh": PANIC, "timeout": 5})


def panic_and_wait(vm) -> None:
    """Crashes the guest's kernel and waits for it to be gone: the agent answers each request in a thread of its
    own, so a short command sent after the panic may still finish before the kernel stops; one that lasts longer than
    the panic takes cannot."""
    panic(vm)
    vm.run("sleep 60", timeout=90)


@pytest.mark.lab
def test_a_panicked_guest_is_named_gone_and_booted_afresh(lab_manager):
    lab = lab_manager.get(PAIR)
    h2 = lab.h2
    panic(h2)
    with pytest.raises(GuestGone) as gone:
        h2.run("sleep 60", timeout=90)
    assert gone.value.host == "h2"
    assert "QEMU exited with status" in str(gone.value)
    assert "Kernel panic" in gone.value.console, gone.value.console
    assert not h2.alive

    lab = lab_manager.get(PAIR)
    assert lab.h2 is not h2 and lab.h2.alive
    assert list(lab.workdir.glob("h2-%s-gone-*.console" % lab.releases["h2"]))
    assert lab.h2.sh("cat /sys/class/infiniband/rxe0/ports/1/state").strip() == "4: ACTIVE"


@pytest.mark.lab
def test_work_on_a_guest_that_is_gone_runs_once_more(lab_manager, tmp_path):
    tries = []

    def work(lab):
        tries.append(lab.h1)
        if len(tries) == 1:
            panic_and_wait(lab.h1)
        return lab.h1.sh("hostname").strip()

    with pytest.warns(UserWarning, match="ran again on a fresh guest"):
        assert lab_manager.run(PAIR, work, tmp_path) == "h1"
    assert len(tries) == 2 and tries[0] is not tries[1]
    assert "Kernel panic" in (tmp_path / "guest-gone.txt").read_text()


@pytest.mark.lab
def test_a_guest_gone_twice_fails(lab_manager):
    def work(lab):
        panic_and_wait(lab.h1)
        return lab.h1.sh("hostname")

    with pytest.warns(UserWarning), pytest.raises(GuestGone):
        lab_manager.run(PAIR, work)
    assert lab_manager.get(PAIR).h1.alive


@pytest.mark.lab
def test_a_guest_whose_agent_stops_answering_is_gone(lab_manager):
    """A hung guest (here its agent stopped with SIGSTOP) answers nothing: the call's own bound passes, a ping
    goes unanswered, and the guest is gone, not a test's long wait after another."""
    lab = lab_manager.get(PAIR)
    h2 = lab.h2
    with pytest.raises(GuestGone) as gone:
        h2.run("pkill -STOP -f guest_agent", timeout=1)      # stops the agent that would answer
    assert "does not answer a ping" in str(gone.value)
    assert not h2.alive and h2.proc.poll() is None        # QEMU itself still ran
    lab = lab_manager.get(PAIR)
    assert lab.h2 is not h2 and lab.h2.alive and h2.proc.poll() is not None
    assert lab.h2.sh("hostname").strip() == "h2"
