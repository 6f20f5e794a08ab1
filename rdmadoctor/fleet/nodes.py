"""One record per node: its verdict (from its own `rdmadoctor check`), or why there is none.

A node is never dropped. Its `state` says what happened:

| state | meaning |
|---|---|
| checked | its check ran and answered: `status`, `cause`, `summary`... are its verdict |
| unreachable | ssh could not reach it or log in (ssh's exit code 255; its message in `error`) |
| timeout | no answer within the per-node timeout |
| not-installed | the command is not on the node (exit code 126 or 127) |
| no-result | the command ran but printed no rdmadoctor result (its exit code and last error line) |
| no-facts | `--from`: no file for this node |
| bad-facts | `--from`: the node's file is not a facts document or a result (the reason in `error`) |

Every state but `checked` has status `unknown` and no cause: nothing is known of that node's RDMA.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from rdmadoctor.fleet import drift
from rdmadoctor.runtime import jsonio
from rdmadoctor.runtime.text import printable

STATES = ("checked", "unreachable", "timeout", "not-installed", "no-result", "no-facts", "bad-facts")
STATE_LABELS = {
    "checked": "checked", "unreachable": "unreachable", "timeout": "timed out",
    "not-installed": "rdmadoctor not installed", "no-result": "no result", "no-facts": "no facts file",
    "bad-facts": "unreadable facts",
}
MAX_TEXT = 400          # characters kept of one text field from a node (its summary, fix, error)


def _text(value: Any, limit: int = MAX_TEXT) -> Optional[str]:
    if value is None:
        return None
    text = printable(str(value), False)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _live(findings: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The findings nothing explains, failures and warnings: what a reader of the fleet report needs."""
    out = []
    for f in findings:
        if not isinstance(f, dict) or f.get("explained_by") or f.get("severity") not in ("fail", "warn"):
            continue
        out.append({"rule": _text(f.get("rule"), 80), "cause": _text(f.get("cause"), 80),
                    "severity": f.get("severity"), "title": _text(f.get("title"))})
    return out[:12]


def from_result(node: str, doc: Mapping[str, Any], rc: Optional[int] = None,
                seconds: Optional[float] = None) -> Dict[str, Any]:
    """A node's record from its check result (schema rdmadoctor/1, already validated)."""
    verdict = doc.get("verdict") or {}
    facts = doc.get("facts") or {}
    host = facts.get("host") or {}
    problems = [{"rung": _text(r.get("name"), 80), "state": r.get("state"), "detail": _text(r.get("detail"))}
                for r in doc.get("rungs") or [] if isinstance(r, dict) and r.get("state") in ("failed", "warning")]
    return {
        "node": node, "state": "checked", "status": verdict.get("status") or "unknown",
        "cause": _text(verdict.get("cause"), 80), "rule": _text(verdict.get("rule"), 80),
        "summary": _text(verdict.get("summary")), "fix": _text(verdict.get("fix")),
        "confidence": verdict.get("confidence"),
        "candidates": [_text(c, 80) for c in (verdict.get("candidates") or [])][:8],
        "rc": rc, "seconds": seconds, "error": None,
        "hostname": _text(host.get("hostname"), 120), "user": _text(host.get("user"), 64),
        "collected_at": _text(host.get("collected_at"), 64), "version": _text(doc.get("rdmadoctor"), 32),
        "problems": problems[:12], "findings": _live(doc.get("findings") or []),
        "attributes": {k: _text(v, 120) for k, v in drift.attributes(facts).items()},
        "address": drift.rdma_address(facts),
    }


def without_result(node: str, state: str, error: Optional[str], rc: Optional[int] = None,
                   seconds: Optional[float] = None) -> Dict[str, Any]:
    assert state in STATES and state != "checked"
    return {
        "node": node, "state": state, "status": "unknown", "cause": None, "rule": None,
        "summary": f"{STATE_LABELS[state]}: {_text(error) or 'no reason given'}", "fix": None,
        "confidence": None, "candidates": [], "rc": rc, "seconds": seconds, "error": _text(error),
        "hostname": None, "user": None, "collected_at": None, "version": None, "problems": [], "findings": [],
        "attributes": {k: None for k in drift.ATTRIBUTES}, "address": None,
    }


def result_document(stdout: bytes, what: str) -> Dict[str, Any]:
    """The rdmadoctor result a node printed, validated; JsonInputError when there is none. Lines before the
    document (a login banner, a shell profile's echo) are skipped: the result starts at the first line that
    opens a JSON object."""
    text = stdout.decode("utf-8", "replace")
    start = 0 if text.lstrip().startswith("{") else text.find("\n{")
    if start < 0:
        raise jsonio.JsonInputError(f"{what}: no JSON document in the output")
    doc = jsonio.loads(text[start:].strip(), what)
    if not isinstance(doc, dict) or doc.get("schema") != "rdmadoctor/1":
        raise jsonio.JsonInputError(f"{what}: not an rdmadoctor result (expected \"schema\": \"rdmadoctor/1\")")
    return jsonio.validate(doc, "result", what)


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def from_reply(reply: Any, timeout: float) -> Dict[str, Any]:
    """A node's record from what its ssh command returned (fleet.remote.Reply)."""
    node = reply.node
    if reply.timed_out:
        return without_result(node, "timeout", f"no answer within {timeout:g} s"
                              + (f" (last words: {_last_line(reply.stderr)})" if reply.stderr.strip() else ""),
                              None, reply.seconds)
    if reply.stdout.strip():
        try:
            doc = result_document(reply.stdout, f"{node}'s output")
        except jsonio.JsonInputError as exc:
            problem = str(exc)
        else:
            return from_result(node, doc, reply.rc, reply.seconds)
    else:
        problem = None
    err = _last_line(reply.stderr)
    if reply.rc == 255:
        return without_result(node, "unreachable", err or "ssh exited 255", reply.rc, reply.seconds)
    if reply.rc in (126, 127):
        return without_result(node, "not-installed", err or f"exit code {reply.rc}", reply.rc, reply.seconds)
    if reply.rc is None:
        return without_result(node, "unreachable", err or "the ssh command did not start", None, reply.seconds)
    reason = f"exit code {reply.rc}" + (f": {err}" if err else "") + (f"; {problem}" if problem else "")
    if reply.truncated:
        reason += "; the output was larger than the fleet reads and was cut"
    return without_result(node, "no-result", reason, reply.rc, reply.seconds)
