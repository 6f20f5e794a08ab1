"""The rule table: rules/*.toml, loaded and checked. A rule is data; nothing in it is executed."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from rdmadoctor.model import RUNGS, SEVERITIES

SCOPES = ("run", "pair", "input", "facts")
KINDS = ("cause", "symptom")
CONFIDENCES = ("high", "medium", "low")
_REQUIRED = ("id", "cause", "severity", "title", "scope", "when", "why")
_ALLOWED = set(_REQUIRED) | {"fix", "confidence", "kind", "explains", "candidates", "next_steps", "refs", "rung",
                             "key", "fix_command", "each", "doc", "priority", "fallback"}
# condition keys the interpreter understands (engine/conditions.py)
CONDITION_KEYS = {"all", "any", "not", "message", "fields", "of", "differ", "param", "op", "value", "versus",
                  "option", "feature", "exists", "side", "fact", "item", "kind"}


class RuleError(Exception):
    """The rule table is malformed; the message names the file and the rule."""


@dataclass(frozen=True)
class Rule:
    id: str
    cause: str
    severity: str
    title: str
    scope: str
    when: Dict[str, Any]
    why: str
    fix: Tuple[str, ...] = ()
    confidence: str = "medium"
    kind: str = "cause"
    explains: Tuple[str, ...] = ()
    candidates: Tuple[str, ...] = ()
    next_steps: Tuple[str, ...] = ()
    refs: Tuple[str, ...] = ()
    rung: Optional[str] = None
    key: Optional[str] = None
    fix_command: Optional[Dict[str, Any]] = None
    each: Optional[str] = None
    doc: str = ""
    priority: int = 0                 # breaks ties between equally ranked causes: higher first
    fallback: bool = False            # tried last, on the messages no other finding cites
    file: str = field(default="", compare=False)


def rules_dir() -> Path:
    """The installed copy inside the package, else the repository's rules/ (a source checkout)."""
    packaged = Path(__file__).resolve().parent.parent / "_rules"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent.parent / "rules"


def _check_condition(cond: Any, where: str) -> None:
    if not isinstance(cond, dict) or not cond:
        raise RuleError(f"{where}: a condition must be a non-empty table")
    unknown = set(cond) - CONDITION_KEYS
    if unknown:
        raise RuleError(f"{where}: unknown condition key(s) {sorted(unknown)}")
    for key in ("all", "any"):
        if key in cond:
            if not isinstance(cond[key], list) or not cond[key]:
                raise RuleError(f"{where}: '{key}' needs a non-empty list")
            for i, sub in enumerate(cond[key]):
                _check_condition(sub, f"{where}.{key}[{i}]")
    if "not" in cond:
        _check_condition(cond["not"], f"{where}.not")


def _rule_from(entry: Dict[str, Any], file: str) -> Rule:
    where = f"{file}: rule {entry.get('id', '?')}"
    missing = [k for k in _REQUIRED if k not in entry]
    if missing:
        raise RuleError(f"{where}: missing {missing}")
    unknown = set(entry) - _ALLOWED
    if unknown:
        raise RuleError(f"{where}: unknown key(s) {sorted(unknown)}")
    if entry["severity"] not in SEVERITIES:
        raise RuleError(f"{where}: severity must be one of {SEVERITIES}")
    if entry["scope"] not in SCOPES:
        raise RuleError(f"{where}: scope must be one of {SCOPES}")
    kind = entry.get("kind", "cause")
    if kind not in KINDS:
        raise RuleError(f"{where}: kind must be one of {KINDS}")
    if entry.get("confidence", "medium") not in CONFIDENCES:
        raise RuleError(f"{where}: confidence must be one of {CONFIDENCES}")
    if entry.get("rung") is not None and entry["rung"] not in RUNGS:
        raise RuleError(f"{where}: rung must be one of {RUNGS}")
    if kind == "symptom" and not (entry.get("candidates") and entry.get("next_steps")):
        raise RuleError(f"{where}: a symptom rule must list its candidate causes and what to collect next")
    if kind == "cause" and not entry.get("fix"):
        raise RuleError(f"{where}: a cause rule must give a fix")
    _check_condition(entry["when"], where + ".when")
    tuple_keys = ("fix", "explains", "candidates", "next_steps", "refs")
    values = {k: tuple(entry[k]) if k in tuple_keys else entry[k] for k in entry}
    return Rule(file=file, **values)


@lru_cache(maxsize=4)
def load(directory: Optional[str] = None) -> Tuple[Rule, ...]:
    base = Path(directory) if directory else rules_dir()
    files = sorted(base.glob("*.toml"))
    if not files:
        raise RuleError(f"no rule files in {base}")
    rules: List[Rule] = []
    seen: Dict[str, str] = {}
    for path in files:
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except tomllib.TOMLDecodeError as exc:
            raise RuleError(f"{path.name}: {exc}") from None
        for entry in data.get("rule", []):
            rule = _rule_from(entry, path.name)
            if rule.id in seen:
                raise RuleError(f"{path.name}: rule id {rule.id} already defined in {seen[rule.id]}")
            seen[rule.id] = path.name
            rules.append(rule)
    known = set(seen)
    for rule in rules:
        for target in rule.explains:
            if target not in known:
                raise RuleError(f"{rule.file}: rule {rule.id} explains unknown rule {target}")
    return tuple(rules)
