"""Things built from the package's data files (the message catalogues, the rule table), kept built in the user's
cache directory so that a command does not parse the same TOML again each time it starts.

An entry is keyed by what it was built from: the path, size and modification time of every file given, the
rdmadoctor and Python versions, and a label. It is written to a temporary file and renamed (a reader never sees
half of one), read only when it is the user's own file and nobody else can write it, and checked to be the
entry of that key; anything else (missing, stale, unreadable, another version's) is built again. Set
RDMADOCTOR_CACHE=off to build every time.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rdmadoctor"


def key_of(label: str, files: Iterable[Path]) -> str:
    from rdmadoctor import __version__
    h = hashlib.sha256(f"{label}\0{__version__}\0{sys.version}".encode())
    for path in sorted(str(p) for p in files):
        try:
            st = os.stat(path)
            h.update(f"\0{path}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        except OSError:
            h.update(f"\0{path}\0missing".encode())
    return h.hexdigest()


def cached(label: str, files: Iterable[Path], build: Callable[[], T]) -> T:
    """build(), or what an earlier build() from the same files returned."""
    if os.environ.get("RDMADOCTOR_CACHE", "") == "off":
        return build()
    key = key_of(label, files)
    path = cache_dir() / f"{label}-{key[:24]}.pickle"
    try:
        st = os.stat(path)
        if st.st_uid == os.getuid() and not st.st_mode & 0o022:
            with open(path, "rb") as f:
                stored_key, value = pickle.load(f)
            if stored_key == key:
                return value
    except Exception:       # noqa: BLE001 - missing, truncated, from another version: build it again
        pass
    value = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{label}-")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump((key, value), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:       # noqa: BLE001 - a read-only home: built each time, as without the cache
        pass
    return value
