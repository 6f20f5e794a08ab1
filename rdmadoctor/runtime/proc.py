"""Child processes that cannot make rdmadoctor wait: each in its own process group, with a deadline, and
killed as a group, so a grandchild that keeps a pipe open cannot hold anything up.

Every command, verbs child and perftest process rdmadoctor starts goes through `start`. A process still
running when rdmadoctor exits is killed with its group: a collector abandoned at its deadline leaves its
command behind in a session of its own, where no terminal's hang-up reaches it.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

# The distribution's interpreter: its python3-pyverbs matches the system's rdma-core.
SYSTEM_PYTHON = "/usr/bin/python3"
# What no child inherits: the agent's shared token (a perftest server or a collector's command has no use
# for it, and another user may read a process's environment through a core dump or a debugger).
SECRET_ENV = ("RDMADOCTOR_AGENT_TOKEN",)


def child_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment for a child process: this one's without the secrets, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
    env.update(extra or {})
    return env


class NotRun(Exception):
    """The command could not be started (not installed, not executable); the message says why."""


class Hung(Exception):
    """The command did not finish within its deadline; its process group was killed."""


@dataclass
class CommandResult:
    argv: List[str]
    rc: int
    stdout: str
    stderr: str
    seconds: float = 0.0


def pythons() -> List[str]:
    """The interpreters that may run a verbs child: this one first, then the distribution's. This one is left out
    when pyverbs is nowhere on its path (a child started with -I sees no more than this process does), as from a
    virtualenv without the distribution's packages: starting it only to fail the import costs `check` its slowest
    collector's time again."""
    out: List[str] = []
    for exe in (sys.executable, SYSTEM_PYTHON):
        if exe and os.path.exists(exe) and os.path.realpath(exe) not in [os.path.realpath(p) for p in out]:
            out.append(exe)
    if len(out) > 1 and importlib.util.find_spec("pyverbs") is None:       # (out[0] is this one)
        del out[0]
    return out


# The processes `start` made; a finished one leaves when it is collected.
_STARTED: "weakref.WeakSet[subprocess.Popen[bytes]]" = weakref.WeakSet()
_STARTED_LOCK = threading.Lock()


def start(argv: Sequence[str], **popen: Any) -> "subprocess.Popen[bytes]":
    """Popen(argv, **popen) in a new session (its own process group), remembered until rdmadoctor exits."""
    started = subprocess.Popen(list(argv), start_new_session=True, **popen)
    with _STARTED_LOCK:
        _STARTED.add(started)
    return started


@atexit.register
def kill_still_running() -> int:
    """SIGKILL the group of every started process that is still running; how many there were."""
    with _STARTED_LOCK:
        started = list(_STARTED)
    # poll() reaps a finished process, so its pid (and group id) is never signalled after it is reused
    running = [p for p in started if p.poll() is None]
    for p in running:
        signal_group(p, signal.SIGKILL)
    return len(running)


def signal_group(proc: "subprocess.Popen[bytes]", sig: int) -> bool:
    """Send `sig` to the process's group (it was started with start_new_session); False when it is gone."""
    try:
        os.killpg(proc.pid, sig)
        return True
    except (OSError, AttributeError):
        try:
            proc.send_signal(sig)
            return True
        except OSError:
            return False


def kill_group(proc: "subprocess.Popen[bytes]", wait: float = 1.0, close_output: bool = True) -> None:
    """SIGKILL the whole group, reap the process (up to `wait` seconds) and close its pipes. `close_output=False`
    leaves its stdout and stderr to the threads that read them: closing a buffered pipe waits for the lock of a read
    in progress, and a process stuck in the kernel (or one that escaped the group) may never end that read."""
    if proc.poll() is None:
        signal_group(proc, signal.SIGKILL)
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        pass
    for stream in (proc.stdin, proc.stdout, proc.stderr) if close_output else (proc.stdin,):
        try:
            if stream:
                stream.close()
        except OSError:
            pass


def run(argv: Sequence[str], timeout: float, env: Optional[Dict[str, str]] = None,
        stdin: Optional[str] = None) -> CommandResult:
    """Run argv (no shell) in its own process group with the C locale. Raises NotRun or Hung."""
    started = time.monotonic()
    try:
        proc = start(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                     env=child_env({"LC_ALL": "C", "LANG": "C", **(env or {})}), close_fds=True)
    except OSError as exc:
        raise NotRun(f"{argv[0]}: {exc.strerror or exc}") from None
    try:
        out, err = proc.communicate(stdin.encode() if stdin is not None else None, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise Hung(f"{' '.join(argv)} did not finish within {timeout:g} s") from None
    return CommandResult(list(argv), proc.returncode, out.decode("utf-8", "replace"),
                         err.decode("utf-8", "replace"), round(time.monotonic() - started, 3))
