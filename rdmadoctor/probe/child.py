"""Run verbs_child.py in a child process: JSON-line events in, a hard deadline per wait, kill at the deadline.

The child gets its own process group (start_new_session), so a kill takes everything it started. A reader
thread moves its stdout lines into a queue; `next_event(deadline)` returns the next event, None at the
deadline, or {"ev": "eof"} when the child is gone. Nothing here blocks without a deadline.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from rdmadoctor.runtime import proc

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "verbs_child.py")
STDERR_KEEP = 4096


class Child:
    def __init__(self, argv: Sequence[str], env: Optional[Dict[str, str]] = None):
        self.argv = list(argv)
        self.started = time.monotonic()
        self.events: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.history: List[Dict[str, Any]] = []
        self.stderr = b""
        self.killed = False
        self.proc = proc.start(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, close_fds=True, env=proc.child_env(env))
        threading.Thread(target=self._read, daemon=True, name="rdmadoctor-probe-child-out").start()
        threading.Thread(target=self._drain, daemon=True, name="rdmadoctor-probe-child-err").start()

    # Each reader owns its pipe and closes it at its end: a kill does not wait for them (kill_group's
    # close_output=False), for a child stuck in the kernel (rdma_destroy_id() of a connection whose packets cannot
    # leave: cm_destroy_id(), uninterruptible) keeps the pipe open, and the read in progress, for many minutes.
    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        with stdout:
            for raw in iter(stdout.readline, b""):
                try:
                    event = json.loads(raw.decode("utf-8", "replace"))
                except ValueError:
                    continue
                if isinstance(event, dict):
                    self.events.put(event)
        self.events.put({"ev": "eof"})

    def _drain(self) -> None:
        stderr = self.proc.stderr
        assert stderr is not None
        with stderr:
            for chunk in iter(lambda: stderr.read(1024), b""):
                self.stderr = (self.stderr + chunk)[-STDERR_KEEP:]

    def send(self, message: Dict[str, Any]) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def next_event(self, deadline: float) -> Optional[Dict[str, Any]]:
        """The next event, or None when `deadline` (time.monotonic()) passes first."""
        left = deadline - time.monotonic()
        try:
            event = self.events.get(timeout=max(0.0, left)) if left > 0 else self.events.get_nowait()
        except queue.Empty:
            return None
        self.history.append(event)
        return event

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.killed = True
        proc.kill_group(self.proc, wait=2.0, close_output=False)

    def close(self) -> None:
        """Ask it to exit, then make sure it has."""
        if self.proc.poll() is None:
            self.send({"op": "exit"})
            try:
                self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def stderr_tail(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()[-500:]


def start(mode: str, args: Optional[Dict[str, Any]] = None, python: Optional[str] = None,
          script: str = SCRIPT) -> Child:
    argv = [python or proc.pythons()[0], "-I", script, mode]
    if args is not None:
        argv.append(json.dumps(args))
    return Child(argv)


def start_ready(mode: str, args: Optional[Dict[str, Any]] = None, deadline: float = 0.0,
                script: str = SCRIPT) -> "tuple[Optional[Child], Dict[str, Any]]":
    """A child that said "ready" (trying each Python until one imports pyverbs), or (None, why).

    `why` is the last fatal/timeout event: {"ev": "fatal", "kind": "import"|"timeout"|"crash", "error": ...}."""
    last: Dict[str, Any] = {"ev": "fatal", "kind": "import", "error": "no Python interpreter found"}
    for exe in proc.pythons():
        child = start(mode, args, exe, script)
        while True:
            event = child.next_event(deadline)
            if event is None:
                child.kill()
                return None, {"ev": "fatal", "kind": "timeout", "python": exe,
                              "error": f"the verbs child did not start within its deadline ({exe})"}
            if event.get("ev") == "ready":
                return child, event
            if event.get("ev") in ("fatal", "eof"):
                child.kill()
                last = dict(event, python=exe)
                if event.get("ev") == "eof":
                    last = {"ev": "fatal", "kind": "crash", "python": exe,
                            "error": f"the verbs child exited without a word: {child.stderr_tail() or 'no output'}"}
                break
        if last.get("kind") != "import":
            return None, last
    return None, last
