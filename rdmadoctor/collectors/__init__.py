"""Fact collectors for `rdmadoctor check`: the registry, `collect_facts`, and the facts file format.

    facts = collect_facts(CollectContext(peer="192.0.2.2"))
    save_facts(facts, "host1.json");  facts = load_facts("host1.json")

Each collector runs in its own daemon thread with a deadline (its TIMEOUT, capped by the total budget); one
that does not finish in time becomes `unavailable: timed out after N s`, and one that raises becomes
`unavailable` with the exception named. collect_facts never raises for a host's state.

The document (schema "rdmadoctor-facts/1") is a contract read by the rule engine and the HTML report:
    {"schema", "host": {...}, "sections": {name: {"status": "ok"|"partial"|"unavailable", "data"?,
     "reason"?, "unreadable": [{"what", "why"}], "seconds", "source"}}}
"""
from __future__ import annotations

import datetime as _dt
import importlib
import json
import os
import platform
import socket
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from rdmadoctor.collectors.base import CollectContext, Unavailable
from rdmadoctor.runtime import jsonio
from rdmadoctor.runtime.files import write_private

SCHEMA = "rdmadoctor-facts/1"
ORDER = ("versions", "devices", "kernel", "netlink", "limits", "firewall", "ports", "pci", "qos")
STATUSES = ("ok", "partial", "unavailable")
TOTAL_BUDGET = 30.0


class FactsError(ValueError):
    """A facts file that is not an rdmadoctor facts document (or not of a schema this version reads)."""


def registry() -> Dict[str, Any]:
    """name -> collector module, in report order."""
    return {name: importlib.import_module(f"rdmadoctor.collectors.{name}") for name in ORDER}


def _version() -> str:
    try:
        from rdmadoctor import __version__
        return __version__
    except ImportError:
        return "unknown"


def host_info(ctx: CollectContext) -> Dict[str, Any]:
    uid: Optional[int] = getattr(os, "geteuid", lambda: None)()
    user = None
    if uid is not None:
        try:
            import pwd
            user = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            user = os.environ.get("USER")
    osr = None
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        text = ctx.read_text(path)
        if text:
            for line in text.splitlines():
                if line.startswith("PRETTY_NAME="):
                    osr = line.split("=", 1)[1].strip().strip('"')
            break
    hostname = ctx.read_text("/proc/sys/kernel/hostname") if not ctx.live else socket.gethostname()
    return {
        "hostname": hostname,
        "kernel": ctx.read_text("/proc/sys/kernel/osrelease") or (platform.release() if ctx.live else None),
        "machine": platform.machine() if ctx.live else None,
        "os": osr,
        "user": user,
        "uid": uid,
        "is_root": bool(ctx.is_root),
        "collected_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "rdmadoctor": _version(),
        "live": ctx.live,
        "root": None if ctx.live else str(ctx.root),
        "peer": ctx.peer,
        "port": ctx.port,
    }


def _section(status: str, data: Optional[Dict[str, Any]], reason: Optional[str],
             unreadable: List[Dict[str, str]], seconds: float, source: Optional[str]) -> Dict[str, Any]:
    sec: Dict[str, Any] = {"status": status}
    if status != "unavailable" and data is not None:
        sec["data"] = data
    if reason:
        sec["reason"] = reason
    sec["unreadable"] = unreadable
    sec["seconds"] = round(seconds, 3)
    sec["source"] = source
    return sec


def _start(name: str, module: Any, sub: CollectContext) -> Tuple[threading.Thread, Dict[str, Any], float]:
    """One collector started in a daemon thread: (the thread, the box it leaves its data or its reason in, when it
    started). A collector's failure is put in the box, never raised."""
    box: Dict[str, Any] = {}
    started = time.monotonic()

    def work() -> None:
        try:
            box["data"] = module.collect(sub)
        except Unavailable as exc:
            box["unavailable"] = str(exc) or "unavailable"
        except BaseException as exc:     # noqa: BLE001 - a collector bug must not end `check`
            box["unavailable"] = f"collector failed: {type(exc).__name__}: {exc}"
        finally:
            box["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=work, name=f"rdmadoctor-collect-{name}", daemon=True)
    thread.start()
    return thread, box, started


def _finish(name: str, thread: threading.Thread, box: Dict[str, Any], sub: CollectContext, started: float,
            limit: float) -> Dict[str, Any]:
    if thread.is_alive():
        return _section("unavailable", None, f"timed out after {limit:g} s", sub.unreadable_list,
                        time.monotonic() - started, sub.source)
    seconds = box.get("seconds", time.monotonic() - started)
    if "unavailable" in box:
        return _section("unavailable", None, box["unavailable"], sub.unreadable_list, seconds, sub.source)
    unread = sub.unreadable_list
    data = box.get("data") or {}
    reason = None
    if unread:
        reason = "could not read: " + "; ".join(u["what"] for u in unread[:5]) + (" …" if len(unread) > 5 else "")
    elif isinstance(data, dict) and data.get("note"):
        reason = str(data["note"])
    return _section("partial" if unread else "ok", data, reason, unread, seconds, sub.source)


def collect_facts(ctx: Optional[CollectContext] = None, only: Optional[Iterable[str]] = None,
                  total_timeout: float = TOTAL_BUDGET,
                  timeouts: Optional[Dict[str, float]] = None,
                  collectors: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Run the collectors in parallel and return the facts document. Never raises for a host's state;
    raises ValueError for an unknown name in `only`."""
    ctx = ctx or CollectContext()
    mods = collectors if collectors is not None else registry()
    names = list(mods)
    if only is not None:
        wanted = list(only)
        unknown = [n for n in wanted if n not in mods]
        if unknown:
            raise ValueError(f"unknown collector(s): {', '.join(unknown)} (known: {', '.join(names)})")
        names = [n for n in names if n in wanted]
    started = time.monotonic()
    total_deadline = started + total_timeout
    running = []
    for name in names:
        module = mods[name]
        limit = float((timeouts or {}).get(name, getattr(module, "TIMEOUT", 10.0)))
        limit = min(limit, total_timeout)
        sub = ctx.for_section()
        thread, box, t0 = _start(name, module, sub)
        running.append((name, thread, box, sub, t0, limit))
    sections: Dict[str, Any] = {}
    for name, thread, box, sub, t0, limit in running:
        deadline = min(t0 + limit, total_deadline)
        thread.join(max(0.0, deadline - time.monotonic()))
        sections[name] = _finish(name, thread, box, sub, t0, limit if t0 + limit <= total_deadline
                                 else max(0.0, total_deadline - t0))
    return {"schema": SCHEMA, "host": host_info(ctx), "sections": sections,
            "seconds": round(time.monotonic() - started, 3)}


# -- the facts file -----------------------------------------------------------------------------------------

def validate_facts(doc: Any, where: str = "facts") -> Dict[str, Any]:
    """The document itself, or FactsError saying what is wrong with it."""
    if not isinstance(doc, dict):
        raise FactsError(f"{where}: not an rdmadoctor facts document (a JSON object is expected)")
    schema = doc.get("schema")
    if schema != SCHEMA:
        if isinstance(schema, str) and schema.startswith("rdmadoctor-facts/"):
            raise FactsError(f"{where}: facts schema {schema!r} is not supported by this rdmadoctor "
                             f"(it reads {SCHEMA!r})")
        raise FactsError(f"{where}: not an rdmadoctor facts document (schema is {schema!r}, "
                         f"expected {SCHEMA!r}; save one with `rdmadoctor check --save FILE`)")
    if not isinstance(doc.get("host"), dict) or not isinstance(doc.get("sections"), dict):
        raise FactsError(f"{where}: facts document without 'host' and 'sections' objects")
    for name, sec in doc["sections"].items():
        if not isinstance(sec, dict) or sec.get("status") not in STATUSES:
            raise FactsError(f"{where}: section {name!r} has no valid status (one of {', '.join(STATUSES)})")
        if sec["status"] != "unavailable" and not isinstance(sec.get("data"), dict):
            raise FactsError(f"{where}: section {name!r} is {sec['status']} but has no data object")
    return doc


def save_facts(facts: Dict[str, Any], path: Union[str, Path]) -> None:
    """Write the facts for their owner only (runtime/files.py: mode 0600, never through a planted name).
    Raises OSError."""
    validate_facts(facts, "facts to save")
    text = json.dumps(facts, indent=1, sort_keys=False, default=str)
    write_private(path, text + "\n")


def check_facts(doc: Any, where: str) -> Dict[str, Any]:
    """A facts document from outside (a file, a peer agent) as the views may read it, or FactsError: the
    envelope first (for its clearer messages), then every field's kind against
    rdmadoctor/schemas/facts.schema.json."""
    validate_facts(doc, where)
    try:
        return jsonio.validate(doc, "facts", where)
    except jsonio.JsonInputError as exc:
        raise FactsError(str(exc)) from None


def load_facts(path: Union[str, Path]) -> Dict[str, Any]:
    try:
        doc = jsonio.read(path, str(path))
    except jsonio.JsonInputError as exc:
        raise FactsError(str(exc)) from None
    return check_facts(doc, str(path))


__all__ = ["SCHEMA", "ORDER", "CollectContext", "Unavailable", "FactsError", "collect_facts", "load_facts",
           "save_facts", "validate_facts", "check_facts", "registry", "host_info"]
