"""The root-cause vocabulary (causes.toml): every rule's cause is one of these slugs."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, Optional, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FILE = Path(__file__).resolve().parent / "causes.toml"


@dataclass(frozen=True)
class Cause:
    slug: str
    group: str
    meaning: str
    zh: Optional[str] = None          # the meaning in Chinese


@lru_cache(maxsize=1)
def load() -> Dict[str, Cause]:
    with open(FILE, "rb") as f:
        data = tomllib.load(f)
    return {c["slug"]: Cause(**c) for c in data["cause"]}


def slugs() -> Tuple[str, ...]:
    return tuple(load())
