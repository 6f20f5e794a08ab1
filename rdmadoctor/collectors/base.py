"""What every collector shares: the context it reads through, and how "could not read" is said.

A collector is a module with `NAME` (its section in the facts), `TIMEOUT` (seconds) and
`collect(ctx) -> dict`. It only reads. When it cannot read its subsystem at all it raises
`Unavailable(reason)`; when it can read part of it, it returns what it read and lists the rest with
`ctx.unreadable(what, why)`. It never guesses a value it could not read.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence


class Unavailable(Exception):
    """The whole section could not be read; the message says why (not root, tool missing, ...)."""


@dataclass
class CommandResult:
    argv: List[str]
    rc: int
    stdout: str
    stderr: str


@dataclass
class CollectContext:
    root: Path = Path("/")                 # prefix for /sys, /proc, /dev, /etc: tests point it at a fixture tree
    peer: Optional[str] = None             # --peer address, for the route and firewall questions
    port: int = 18515                      # the perftest side-channel port to ask about
    is_root: bool = field(default_factory=lambda: os.geteuid() == 0)
    live: bool = True                      # False when reading a fixture tree: no commands, no netlink
    _unreadable: List[Dict[str, str]] = field(default_factory=list)

    def path(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def read_text(self, path: str) -> Optional[str]:
        """The stripped content of a file, or None when it cannot be read (absent, EINVAL, EACCES)."""
        try:
            with open(self.path(path), "rb") as f:
                return f.read(1 << 20).decode("utf-8", "replace").strip()
        except OSError:
            return None

    def listdir(self, path: str) -> List[str]:
        try:
            return sorted(os.listdir(self.path(path)))
        except OSError:
            return []

    def run(self, argv: Sequence[str], timeout: float = 5.0) -> CommandResult:
        """Run a read-only command with a deadline. Raises Unavailable when it is missing or hangs."""
        if not self.live:
            raise Unavailable(f"not run: reading a saved tree, not this host ({argv[0]})")
        exe = shutil.which(argv[0])
        if exe is None:
            raise Unavailable(f"{argv[0]} is not installed")
        try:
            proc = subprocess.run([exe, *argv[1:]], capture_output=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"})
        except subprocess.TimeoutExpired:
            raise Unavailable(f"{' '.join(argv)} did not finish within {timeout:g} s")
        except OSError as exc:
            raise Unavailable(f"{argv[0]}: {exc.strerror}")
        return CommandResult(list(argv), proc.returncode, proc.stdout.decode("utf-8", "replace"),
                             proc.stderr.decode("utf-8", "replace"))

    def unreadable(self, what: str, why: str) -> None:
        """Record a part of the section that could not be read, so no rule reads it as 'ok'."""
        self._unreadable.append({"what": what, "why": why})
