"""`rdmadoctor fleet check`: every node's own `rdmadoctor check`, gathered over ssh through ClusterShell or read
from facts files a site collected with its own tools (Slurm `srun`, pdsh, Ansible), one record per node.

    records = over_ssh(["node001", ...], shell, "rdmadoctor check --json")
    records = from_dir(Path("facts/"), nodes=None, table=None, jobs=2)

`from_dir` reads `*.json` (a `check --save` facts file, or a saved `check --json` result; the node is the file's
name without `.json`) and `*.jsonl` (one facts document or result per line, as `check --format jsonl` prints
them; the node is the host name in its facts). Facts are diagnosed here with the same rules as on the node.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from rdmadoctor.fleet import nodes as node_records
from rdmadoctor.fleet.nodeset import sort_key
from rdmadoctor.runtime import jsonio

DEFAULT_COMMAND = "rdmadoctor check --json"
FACTS_SCHEMA = "rdmadoctor-facts/1"
RESULT_SCHEMA = "rdmadoctor/1"
_TABLE: Any = None          # the rule table a pool worker diagnoses with (inherited at fork)


PARALLEL_FROM = 64          # nodes from which the answers are checked and summarised by forked workers


def over_ssh(names: Sequence[str], shell: Any, command: str = DEFAULT_COMMAND,
             jobs: Optional[int] = None) -> List[Dict[str, Any]]:
    """Run `command` (a `check` printing its JSON result) on every node; one record per node, in order. Each
    answer is checked against the result schema (the facts inside it too), which for a thousand nodes is the
    bigger part of the work after ssh: it is shared by `jobs` forked workers."""
    replies = shell.run({name: command for name in names})
    ordered = [replies[name] for name in names]
    jobs = jobs or (os.cpu_count() or 1)
    if jobs > 1 and len(ordered) >= PARALLEL_FROM:
        return _records_in_parallel(ordered, shell.timeout, jobs)
    return [node_records.from_reply(reply, shell.timeout) for reply in ordered]


def _records_of(replies: List[Any], timeout: float) -> List[Dict[str, Any]]:
    return [node_records.from_reply(reply, timeout) for reply in replies]


def _records_in_parallel(replies: List[Any], timeout: float, jobs: int) -> List[Dict[str, Any]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:
        return _records_of(replies, timeout)
    jobs = min(jobs, 16)
    size = -(-len(replies) // jobs)
    chunks = [replies[i:i + size] for i in range(0, len(replies), size)]
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        parts = list(pool.map(_records_of, chunks, [timeout] * len(chunks)))
    return [r for part in parts for r in part]


def _diagnosed(node: str, doc: Dict[str, Any], what: str) -> Dict[str, Any]:
    """A facts document (validated here) or a saved result -> the node's record."""
    from rdmadoctor.collectors import FactsError, check_facts
    from rdmadoctor.engine import diagnose
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema == RESULT_SCHEMA:
        try:
            return node_records.from_result(node, jsonio.validate(doc, "result", what))
        except jsonio.JsonInputError as exc:
            return node_records.without_result(node, "bad-facts", str(exc))
    if schema != FACTS_SCHEMA:
        return node_records.without_result(
            node, "bad-facts", f"{what}: neither facts ({FACTS_SCHEMA}) nor a result ({RESULT_SCHEMA})")
    try:
        facts = check_facts(doc, what)
    except FactsError as exc:
        return node_records.without_result(node, "bad-facts", str(exc))
    peer = (facts.get("host") or {}).get("peer")
    return node_records.from_result(node, _summary(diagnose.check(facts, None, peer, _TABLE)))


def _summary(diagnosis: Any) -> Dict[str, Any]:
    """The parts of a diagnosis a node's record reads, as `check --json` would print them (without the evidence
    and excerpts json_out adds: a thousand nodes' records need only verdicts, rungs, findings and facts)."""
    from dataclasses import asdict

    from rdmadoctor import __version__
    return {"schema": RESULT_SCHEMA, "command": diagnosis.command, "rdmadoctor": __version__,
            "verdict": asdict(diagnosis.verdict),
            "rungs": [{"name": r.name, "state": r.state, "detail": r.detail} for r in diagnosis.rungs],
            "findings": [{"rule": f.rule, "cause": f.cause, "severity": f.severity, "title": f.title,
                          "explained_by": f.explained_by} for f in diagnosis.findings],
            "facts": diagnosis.facts}


def _read_file(path: str) -> List[Dict[str, Any]]:
    """The records one file holds (a .json: one node; a .jsonl: one per line)."""
    p = Path(path)
    if p.suffix == ".jsonl":
        out = []
        try:
            with open(p, "rb") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    what = f"{p.name} line {n}"
                    try:
                        doc = jsonio.loads(line, what)
                    except jsonio.JsonInputError as exc:
                        out.append(node_records.without_result(f"{p.stem}:{n}", "bad-facts", str(exc)))
                        continue
                    facts = None
                    if isinstance(doc, dict):
                        facts = doc.get("facts") if doc.get("schema") == RESULT_SCHEMA else doc
                    host = ((facts or {}).get("host") or {}) if isinstance(facts, dict) else {}
                    name = host.get("hostname") if isinstance(host.get("hostname"), str) else None
                    out.append(_diagnosed(name or f"{p.stem}:{n}", doc, what))
        except OSError as exc:
            out.append(node_records.without_result(p.stem, "bad-facts", f"{p.name}: {exc.strerror or exc}"))
        return out
    try:
        doc = jsonio.read(p, p.name)
    except jsonio.JsonInputError as exc:
        return [node_records.without_result(p.stem, "bad-facts", str(exc))]
    return [_diagnosed(p.stem, doc, p.name)]


def _read_many(paths: List[str]) -> List[Dict[str, Any]]:
    return [r for path in paths for r in _read_file(path)]


def _files(directory: Path) -> List[Path]:
    return sorted((p for p in directory.iterdir() if p.suffix in (".json", ".jsonl") and p.is_file()),
                  key=lambda p: sort_key(p.name))


def _in_parallel(paths: List[str], jobs: int) -> List[Dict[str, Any]]:
    """The files split into `jobs` chunks, each read and diagnosed by a forked worker (the rule table is loaded
    once, before the fork, and shared)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    chunks = [paths[i::jobs] for i in range(jobs)]
    try:
        context = multiprocessing.get_context("fork")
    except ValueError:                      # no fork on this platform: one process does it all
        return _read_many(paths)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        parts = list(pool.map(_read_many, chunks))
    return [r for part in parts for r in part]


def from_dir(directory: Path, names: Optional[Iterable[str]] = None, table: Any = None,
             jobs: Optional[int] = None) -> List[Dict[str, Any]]:
    """Every node's record from the files in `directory`. With `names` (a node set), only those nodes, and each
    of them without a file is a `no-facts` record: never dropped."""
    global _TABLE
    from rdmadoctor.engine import rules
    _TABLE = table if table is not None else rules.load()
    files = _files(directory)
    wanted = list(names) if names is not None else None
    if wanted is not None:
        keep = set(wanted)
        files = [p for p in files if p.suffix == ".jsonl" or p.stem in keep]
    paths = [str(p) for p in files]
    jobs = max(1, min(jobs or (os.cpu_count() or 1), 16, max(1, len(paths) // 32)))
    records = _in_parallel(paths, jobs) if jobs > 1 else _read_many(paths)
    if wanted is not None:
        by_node: Dict[str, Dict[str, Any]] = {}
        for r in records:
            if r["node"] in keep:
                by_node.setdefault(r["node"], r)
        records = [by_node.get(n) or node_records.without_result(n, "no-facts", f"no {n}.json in {directory}")
                   for n in wanted]
    else:
        records = _unique(records)
    return sorted(records, key=lambda r: sort_key(r["node"]))


def _unique(records: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Two files naming the same node: the first is kept and the other is a bad-facts record beside it."""
    seen: Dict[str, int] = {}
    out = []
    for r in records:
        n = seen.get(r["node"], 0)
        seen[r["node"]] = n + 1
        if n:
            out.append(node_records.without_result(f"{r['node']}#{n + 1}", "bad-facts",
                                                    f"a second document for node {r['node']}"))
        else:
            out.append(r)
    return out


def split(records: Sequence[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """(checked, not checked)."""
    return ([r for r in records if r["state"] == "checked"], [r for r in records if r["state"] != "checked"])
