"""The installed version of a Python distribution, from its metadata, without importing importlib.metadata
when there is no metadata to read.

importlib.metadata brings email, zipfile and csv with it: 20 ms on a development machine, 0.6 s in a TCG
guest. The packages check asks about are often installed without metadata (Debian's python3-pyverbs has
none), so the sys.path directories are looked at first for a ``<name>-*.dist-info`` or ``<name>*.egg-info``
entry, as importlib.metadata's own finder looks for them.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Optional

_SUFFIXES = (".dist-info", ".egg-info")


def _normal(project: str) -> str:
    """A project name as PEP 503 compares them, with the separators the metadata directory names use."""
    return re.sub(r"[-_.]+", "_", project).lower()


def has_metadata(name: str) -> bool:
    """Whether a directory on sys.path holds metadata for the distribution `name`."""
    wanted = _normal(name)
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for item in names:
            if item.endswith(_SUFFIXES) and _normal(item.rsplit(".", 1)[0].split("-", 1)[0]) == wanted:
                return True
    return False


def installed_version(name: str) -> Optional[str]:
    """The distribution's version from its metadata, or None when it has none (or it cannot be read)."""
    if not has_metadata(name):
        return None
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:        # noqa: BLE001 - PackageNotFoundError, unreadable or malformed metadata
        return None
