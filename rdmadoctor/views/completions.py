"""What a run's failed work completions say: the status, on which queue, its libibverbs name and meaning.

perftest prints a failed completion as three lines (NOTIFY_COMP_ERROR_SEND / _RECV, src/perftest_resources.h):
"Completion with error at client" when a send-queue completion failed and "at server" when a receive-queue
completion failed, whichever program printed it; then "Failed status N: ..." (6.28 and newer name the status
with ibv_wc_status_str()); then the counters. ib_send_bw's receiver also reports a failed send-queue
completion as "Poll send CQ error status=N" while it returns credits. Which queue failed tells the requester's
view (a NAK or a timeout) from the responder's (what arrived did not fit), and the rules combine the two sides'
statuses (rules/perftest-completion.toml, docs/completion-statuses.md).
"""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from rdmadoctor.model import Run

WC_STATUS = Path(__file__).resolve().parent.parent / "knowledge" / "wc_status.toml"


@lru_cache(maxsize=1)
def statuses() -> Dict[int, Dict[str, Any]]:
    """enum ibv_wc_status by number (knowledge/wc_status.toml: rdma-core libibverbs/verbs.h and enum_strs.c)."""
    with open(WC_STATUS, "rb") as f:
        return {s["number"]: s for s in tomllib.load(f)["status"]}


class OnLine:
    """A number that remembers the log line it was read from, mixed into int or float (a rule's evidence quotes that
    line: engine/conditions.py reads `line`)."""
    line: Optional[int] = None

    def __new__(cls, value: Any, line: Optional[int]) -> Any:
        made = super().__new__(cls, value)  # type: ignore[call-arg]
        made.line = line
        return made


class AtLine(OnLine, int):
    """A status number read from a line."""


def failures(run: Run) -> List[Dict[str, Any]]:
    """Every failed completion the run printed, in order: status, queue (send, recv or None when the paste
    lost the line before it), name, enum, meaning, wr_id, syndrome, qp_num, line and the counters after it."""
    out: List[Dict[str, Any]] = []
    messages = run.messages
    for i, m in enumerate(messages):
        if m.id == "T01S":
            before = messages[i - 1].id if i else None
            queue = "send" if before == "T01" else "recv" if before == "T02" else None
        elif m.id == "T05" and m.fields.get("status") is not None:
            queue = "send"          # "Poll send CQ error status=": a send-queue completion
        else:
            continue
        status = int(m.fields["status"])
        known = statuses().get(status, {})
        info: Dict[str, Any] = {
            "status": status, "queue": queue,
            "name": m.fields.get("status_name") or known.get("str") or "unknown",
            "enum": known.get("name", "unknown"), "meaning": known.get("meaning", ""),
            "meaning_zh": known.get("meaning_zh", ""),
            "wr_id": m.fields.get("wr_id"), "syndrome": m.fields.get("syndrome"), "qp_num": m.fields.get("qp_num"),
            "line": m.line,
        }
        for follow in messages[i + 1:i + 3]:
            if follow.id == "T01C":
                info.update({k: int(v) for k, v in follow.fields.items() if k in ("scnt", "ccnt", "rcnt")})
                break
        out.append(info)
    return out


def completion(run: Run, ctx) -> Optional[Dict[str, Any]]:
    """The first failed completion: status, queue, libibverbs name and meaning, wr_id, syndrome, counters."""
    found = failures(run)
    return found[0] if found else None


def _first_on(run: Run, queue: Optional[str]) -> Optional[AtLine]:
    for f in failures(run):
        if f["queue"] == queue and f["status"] != 5:      # a flush is never the first cause
            return AtLine(f["status"], f["line"])
    return None


def send_status(run: Run, ctx) -> Optional[AtLine]:
    """The status of the first failed send-queue completion that is not a flush (this side's own request).
    This side was the requester of a SEND, WRITE, READ or atomic; the responder's NAK or the transport's timeout
    ended it."""
    return _first_on(run, "send")


def recv_status(run: Run, ctx) -> Optional[AtLine]:
    """The status of the first failed receive-queue completion that is not a flush (what arrived here).
    What arrived at this side (a SEND, or a WRITE with immediate) did not fit the receive it had posted."""
    return _first_on(run, "recv")


def ccnt_before_error(run: Run, ctx) -> Optional[AtLine]:
    """How many send requests had completed when the first one failed (the ccnt= perftest printed after it).
    Only bandwidth tests print the completed count there; latency tests print scnt twice."""
    for f in failures(run):
        if "ccnt" in f:
            return AtLine(f["ccnt"], f["line"])
    return None


def only_flushed(run: Run, ctx) -> bool:
    """Every failed completion of the run is a flush (status 5): the QP had failed before any of them."""
    found = failures(run)
    return bool(found) and all(f["status"] == 5 for f in found)


FEATURES = {f.__name__: f for f in (send_status, recv_status, ccnt_before_error, only_flushed)}
COMPLETION_FIELDS = ("status", "queue", "name", "enum", "meaning", "meaning_zh", "wr_id", "syndrome", "qp_num",
                     "line", "scnt", "ccnt", "rcnt")
