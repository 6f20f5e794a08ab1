"""Starting `rdmadoctor serve` inside a lab VM, shared by the probe and bench lab tests."""
from __future__ import annotations

import time
from typing import Optional

import pytest

from tests.lab.vm import LabVM

START_DEADLINE = 90          # seconds: python start-up under TCG plus the agent's first facts


def start_agent(vm: LabVM, token_file: str, *extra: str, user: Optional[str] = None,
                memlock_kib: Optional[int] = None) -> int:
    """Spawns the agent on the VM's lab address and waits until it says it listens; returns its handle."""
    handle = vm.spawn(["python3", "-m", "rdmadoctor", "serve", "--bind", vm.address, "--token-file", token_file,
                       *extra], env=vm.python_env(), user=user,
                      rlimits={"memlock": memlock_kib * 1024} if memlock_kib else None)
    deadline = time.monotonic() + START_DEADLINE
    while time.monotonic() < deadline:
        state = vm.peek(handle)
        if "listening on" in state.get("stderr", "") + state.get("stdout", ""):
            return handle
        if not state.get("running", True):
            pytest.fail(f"the agent on {vm.name} exited: {state}")
        time.sleep(0.5)
    pytest.fail(f"the agent on {vm.name} did not start listening within {START_DEADLINE} s")
