"""A perftest process on a pseudo-terminal: its output as a terminal (and a user's paste) shows it.

perftest prints its header and banner on stdout and its errors on stderr; through pipes stdout is block
buffered, so the errors come first and the banner only at exit. On a pty both are line buffered and in
order. No shell: argv only.
"""
from __future__ import annotations

import os
import pty
import signal
import subprocess
import threading
import time
from typing import List

from rdmadoctor.runtime import proc

OUTPUT_LIMIT = 1 << 20             # bytes of output kept


class PtyProcess:
    def __init__(self, argv: List[str]):
        self.argv = list(argv)
        self.chunks: List[bytes] = []
        self.size = 0
        self.timed_out = False
        self.started = time.monotonic()
        master, slave = pty.openpty()
        try:
            self.proc = proc.start(self.argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd="/",
                                   env=proc.child_env())
        except OSError:
            os.close(master)
            raise
        finally:
            os.close(slave)
        self.master = master
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:            # EIO: the process closed its end of the pty
                break
            if not chunk:
                break
            if self.size < OUTPUT_LIMIT:
                self.chunks.append(chunk[:OUTPUT_LIMIT - self.size])
            self.size += len(chunk)
        os.close(self.master)

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace").replace("\r\n", "\n")

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_for(self, needle: str, seconds: float) -> bool:
        """True once the output holds `needle`; False if the process exits first or time runs out."""
        end = time.monotonic() + seconds
        raw = needle.encode()
        while time.monotonic() < end:
            if raw in b"".join(self.chunks):
                return True
            if not self.running():
                return raw in b"".join(self.chunks)
            time.sleep(0.05)
        return False

    def wait(self, seconds: float) -> None:
        """Wait for the exit; stop the process (SIGINT, like Ctrl-C, then SIGKILL) when it takes longer."""
        try:
            self.proc.wait(timeout=max(0.0, seconds))
        except subprocess.TimeoutExpired:
            self.timed_out = True
            self.stop()

    def stop(self) -> None:
        if not self.running():
            return
        # SIGINT first: perftest prints what it prints on Ctrl-C
        for sig, grace in ((signal.SIGINT, 2.0), (signal.SIGKILL, 5.0)):
            if not proc.signal_group(self.proc, sig):
                return
            try:
                self.proc.wait(timeout=grace)
                return
            except subprocess.TimeoutExpired:
                continue

    def result(self) -> dict:
        self.reader.join(timeout=2)
        return {"output": self.text(), "rc": self.proc.returncode, "timed_out": self.timed_out,
                "seconds": round(time.monotonic() - self.started, 3), "truncated": self.size > OUTPUT_LIMIT}
