"""What every collector shares: the context it reads through, and how "could not read" is said.

A collector is a module with `NAME` (its section in the facts), `TIMEOUT` (seconds) and
`collect(ctx) -> dict`. It only reads. When it cannot read its subsystem at all it raises
`Unavailable(reason)`; when it can read part of it, it returns what it read and lists the rest with
`ctx.unreadable(what, why)`. It never guesses a value it could not read. A collector may set
`ctx.source` to say where its data came from ("pyverbs", "sysfs", "nft -j", ...).

Fixture trees (`CollectContext(root=..., live=False)`) are copies of real hosts' /sys, /proc, /dev and /etc.
Two things git cannot carry are described in `<root>/fixture.json`:
  "errors": {"sys/.../gid_attrs/types/5": "EINVAL"}  files whose read() failed on the real host;
  "stat":   {"dev/infiniband/uverbs0": {"mode": "0o666", "uid": 0, "gid": 0}}  modes of device nodes.
"""
from __future__ import annotations

import errno as _errno
import json
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rdmadoctor.knowledge.perftest import DEFAULT_PORT
from rdmadoctor.runtime import proc
from rdmadoctor.runtime.proc import CommandResult


class Unavailable(Exception):
    """The whole section could not be read; the message says why (not root, tool missing, ...)."""


def _euid() -> int:
    geteuid = getattr(os, "geteuid", None)      # not on Windows
    return geteuid() if geteuid else -1


def errno_text(exc: OSError) -> str:
    """'EACCES (Permission denied)' for an OSError, the way the report shows it."""
    name = _errno.errorcode.get(exc.errno or 0)
    text = exc.strerror or str(exc)
    return f"{name} ({text})" if name else text


@dataclass
class CollectContext:
    root: Path = Path("/")                 # prefix for /sys, /proc, /dev, /etc: tests point it at a fixture tree
    peer: Optional[str] = None             # --peer address, for the route and firewall questions
    port: int = DEFAULT_PORT               # the perftest side-channel port to ask about
    probe_port: Optional[int] = None       # the rdmadoctor agent / probe port, when one is used
    is_root: bool = field(default_factory=lambda: _euid() == 0)
    live: bool = True                      # False when reading a fixture tree: no commands, no netlink
    sample_seconds: float = 1.0            # interval between the two counter samples (0: one sample only)
    use_pyverbs: bool = True               # False: read devices from sysfs only
    env: Optional[Dict[str, str]] = None   # extra environment for commands (tests: a fake PATH)
    source: Optional[str] = None           # set by a collector: where its data came from
    _unreadable: List[Dict[str, str]] = field(default_factory=list)
    _fixture: Optional[Dict[str, Any]] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    # -- one copy per section, so parallel collectors do not share their "unreadable" lists ----------
    def for_section(self) -> "CollectContext":
        return replace(self, source=None, _unreadable=[], _fixture=self._fixture)

    @property
    def unreadable_list(self) -> List[Dict[str, str]]:
        return list(self._unreadable)

    def unreadable(self, what: str, why: str) -> None:
        """Record a part of the section that could not be read, so no rule reads it as 'ok'."""
        entry = {"what": what, "why": why}
        if entry not in self._unreadable:
            self._unreadable.append(entry)

    # -- files -----------------------------------------------------------------------------------------
    def path(self, path: str) -> Path:
        return self.root / str(path).lstrip("/")

    def fixture(self) -> Dict[str, Any]:
        """fixture.json of a fixture tree ({} on a live host or when absent)."""
        if self._fixture is None:
            data: Dict[str, Any] = {}
            if not self.live:
                try:
                    with open(self.root / "fixture.json") as f:
                        data = json.load(f)
                except (OSError, ValueError):
                    data = {}
            self._fixture = data
        return self._fixture

    def read(self, path: str, limit: int = 1 << 20) -> Tuple[Optional[str], Optional[str]]:
        """(stripped text, None) or (None, why) — why is e.g. 'ENOENT (No such file or directory)'."""
        rel = str(path).lstrip("/")
        recorded = self.fixture().get("errors", {}).get(rel)
        if recorded:
            code = getattr(_errno, recorded, None)
            return None, f"{recorded} ({os.strerror(code)})" if code else recorded
        try:
            with open(self.path(rel), "rb") as f:
                return f.read(limit).decode("utf-8", "replace").strip(), None
        except OSError as exc:
            return None, errno_text(exc)

    def read_text(self, path: str) -> Optional[str]:
        """The stripped content of a file, or None when it cannot be read (absent, EINVAL, EACCES)."""
        return self.read(path)[0]

    def read_int(self, path: str, base: int = 10) -> Optional[int]:
        text = self.read_text(path)
        if text is None:
            return None
        try:
            return int(text.split()[0], base) if text else None
        except ValueError:
            return None

    def exists(self, path: str) -> bool:
        return os.path.lexists(self.path(path))

    def isdir(self, path: str) -> bool:
        return os.path.isdir(self.path(path))

    def listdir(self, path: str) -> List[str]:
        try:
            return sorted(os.listdir(self.path(path)))
        except OSError:
            return []

    def listdir_or_why(self, path: str) -> Tuple[Optional[List[str]], Optional[str]]:
        try:
            return sorted(os.listdir(self.path(path))), None
        except OSError as exc:
            return None, errno_text(exc)

    def realpath(self, path: str) -> Optional[str]:
        """The resolved path relative to root ('/sys/devices/...'), or None when it does not exist."""
        p = self.path(path)
        if not os.path.lexists(p):
            return None
        real = os.path.realpath(p)
        root = os.path.realpath(self.root)
        if root == "/":
            return real
        rel = os.path.relpath(real, root)
        if rel.startswith(".."):
            return None                    # a fixture link that leaves the tree: not a fact of that host
        return "/" + rel

    def link_name(self, path: str) -> Optional[str]:
        """Basename of a symlink's target (device/driver -> 'mlx5_core'), None when absent."""
        try:
            return os.path.basename(os.readlink(self.path(path)))
        except OSError:
            return None

    def stat(self, path: str) -> Dict[str, Any]:
        """{'mode': 0o666, 'uid', 'gid', 'readable', 'writable'} — from fixture.json for fixture trees.
        Raises OSError when the path cannot be stat'ed."""
        rel = str(path).lstrip("/")
        rec = self.fixture().get("stat", {}).get(rel)
        if rec is not None:
            mode = int(str(rec["mode"]), 8) if isinstance(rec["mode"], str) else int(rec["mode"])
            uid, gid = rec.get("uid"), rec.get("gid")
            return {"mode": mode, "uid": uid, "gid": gid, "type": rec.get("type"),
                    "readable": _mode_allows(mode, uid, gid, 4, rec.get("as_uid", 0)),
                    "writable": _mode_allows(mode, uid, gid, 2, rec.get("as_uid", 0))}
        st = os.stat(self.path(rel))
        import stat as _stat
        kind = "char" if _stat.S_ISCHR(st.st_mode) else "dir" if _stat.S_ISDIR(st.st_mode) else "other"
        readable: Optional[bool]
        writable: Optional[bool]
        if self.live:
            readable, writable = os.access(self.path(rel), os.R_OK), os.access(self.path(rel), os.W_OK)
        else:
            readable = writable = None     # a fixture file's own mode says nothing about the host
        return {"mode": _stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid, "type": kind,
                "readable": readable, "writable": writable}

    # -- commands --------------------------------------------------------------------------------------
    def which(self, name: str) -> Optional[str]:
        if os.path.isabs(name):
            return name if os.access(name, os.X_OK) else None
        path = (self.env or {}).get("PATH") or os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
        return shutil.which(name, path=path)

    def run(self, argv: Sequence[str], timeout: float = 5.0, stdin: Optional[str] = None) -> CommandResult:
        """Run a read-only command with a deadline (runtime.proc: its own process group, killed whole on
        timeout). Raises Unavailable when it is missing or hangs."""
        if not self.live:
            raise Unavailable(f"not run: reading a saved tree, not this host ({argv[0]})")
        exe = self.which(argv[0])
        if exe is None:
            raise Unavailable(f"{argv[0]} is not installed")
        try:
            return proc.run([exe, *argv[1:]], timeout, env=self.env, stdin=stdin)
        except (proc.NotRun, proc.Hung) as exc:
            raise Unavailable(str(exc).replace(exe, argv[0], 1)) from None


def _mode_allows(mode: int, uid: Optional[int], gid: Optional[int], bit: int, as_uid: int) -> Optional[bool]:
    """Permission by mode bits for the user a fixture was recorded as (root: always)."""
    if as_uid == 0:
        return True
    if uid == as_uid:
        return bool(mode & (bit << 6))
    return bool(mode & bit)            # group membership unknown in a fixture: judge by "other"
