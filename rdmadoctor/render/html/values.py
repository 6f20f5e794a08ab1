"""The report's readers of document values: every field is read with a default, so a document that lacks
optional parts (an older result, a hand-made one) still renders."""
from __future__ import annotations

import json
import math
import re
from typing import Any, Dict, List, Optional


def _d(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> List[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _s(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_s(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _slug_label(slug: Any) -> str:
    if not slug or slug == "unknown":
        return ""
    return str(slug).replace("-", " ").replace("_", " ")


def _anchor(*parts: Any) -> str:
    text = "-".join(str(p) for p in parts if p is not None)
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-").lower() or "x"


def human_bytes(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return _s(value)
    if value < 0 or value >= 1 << 62:
        return "unlimited"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= factor:
            v = value / factor
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{value:.0f} B"


def _num(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
