"""The inputs of one diagnosis indexed by file name, built once per diagnosis (kept in its ctx).

A view asked about every run must not scan every source and every run of the input for each one: with thousands
of files (or hundreds of runs in one file) that costs runs x runs. These indexes answer "the lines of this run's
file" and "the runs of this file" in constant time, and `once_per_source` computes an answer that depends only on
a file's lines or runs once for that file. Each index remembers the list it was built from and is rebuilt if the
ctx holds another one.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, TypeVar

from rdmadoctor.model import Run, SourceText

T = TypeVar("T")


def _index(ctx: Dict[str, Any], key: str, items: List[Any], attribute: str) -> Dict[str, List[Any]]:
    cached = ctx.get(key)
    if cached is not None and cached[0] is items and cached[1] == len(items):
        return cached[2]
    index: Dict[str, List[Any]] = {}
    for item in items:
        index.setdefault(getattr(item, attribute), []).append(item)
    ctx[key] = (items, len(items), index)
    return index


def sources_named(ctx: Dict[str, Any], name: str) -> List[SourceText]:
    """The sources of the input with this name, in input order (one, unless a file was given twice)."""
    return _index(ctx, "_sources_by_name", ctx.get("sources", []), "name").get(name, [])


def source_lines(run: Run, ctx: Dict[str, Any]) -> Sequence[str]:
    """The kept lines of the first source named as the run's (empty when the input has none)."""
    found = sources_named(ctx, run.source)
    return found[0].lines if found else []


def line_text(ctx: Dict[str, Any], source: str, line: int) -> Optional[str]:
    """Line `line` (1-based) of the first source of that name that holds it."""
    for s in sources_named(ctx, source):
        if 0 < line <= len(s.lines):
            return s.lines[line - 1]
    return None


def runs_of_source(ctx: Dict[str, Any], name: str) -> List[Run]:
    """The runs of ctx["runs"] read from that source, in input order."""
    return _index(ctx, "_runs_by_source", ctx.get("runs") or [], "source").get(name, [])


def once_per_source(ctx: Dict[str, Any], feature: str, source: str, compute: Callable[[], T]) -> T:
    """compute() for the first run of `source` that asks; the same answer for the others of that source."""
    cache = ctx.setdefault("_per_source", {})
    key = (feature, source)
    if key not in cache:
        cache[key] = compute()
    return cache[key]


def once_per_input(ctx: Dict[str, Any], feature: str, compute: Callable[[], T]) -> T:
    """compute() once for the whole input: for an answer that reads every run of ctx["runs"] and not the run that
    asks."""
    return once_per_source(ctx, feature, "", compute)


def last_message_line(run: Run, ctx: Dict[str, Any], source: str, message_id: Optional[str] = None) -> int:
    """The line of the last message (of `message_id`, or any) that any run of file `source` holds (0: none), found
    once per file."""
    def compute() -> int:
        runs = runs_of_source(ctx, source) or [run]
        return max((m.line for r in runs for m in r.messages
                    if m.source == source and (message_id is None or m.id == message_id)), default=0)
    if not ctx.get("runs"):
        return compute()
    return once_per_source(ctx, f"last_message_line:{message_id or '*'}", source, compute)
