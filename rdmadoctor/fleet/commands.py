"""What `rdmadoctor fleet check|probe|report` do, behind the command line's argument parsing (rdmadoctor/cli.py):
each returns the fleet document; `output` turns one into the text to print, in the format asked for."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from rdmadoctor.fleet import check as fleet_check
from rdmadoctor.fleet import formats, report
from rdmadoctor.fleet.nodeset import NodeSetError, expand, fold
from rdmadoctor.fleet.remote import Shell, shell_from


class FleetError(ValueError):
    """A bad node set or input: one line for the user, exit code 3 (or 64 for a usage error)."""


def nodes_of(nodeset: Optional[str]) -> Optional[List[str]]:
    if nodeset is None:
        return None
    try:
        names = expand(nodeset)
    except NodeSetError as exc:
        raise FleetError(f"not a node set: {exc}")
    if not names:
        raise FleetError(f"the node set {nodeset!r} names no node")
    return names


def _settings(shell: Shell, command: str) -> Dict[str, Any]:
    return {"command": command, "fanout": shell.fanout, "timeout": shell.timeout,
            "connect_timeout": shell.connect_timeout, "user": shell.user, "ssh_options": shell.ssh_options,
            "ssh_path": shell.ssh_path, "from": shell.settings}


def check(nodeset: Optional[str], from_dir: Optional[Path], command: str, shell: Optional[Shell] = None,
          table: Any = None, jobs: Optional[int] = None) -> Dict[str, Any]:
    names = nodes_of(nodeset)
    started = time.monotonic()
    if from_dir is not None:
        if not from_dir.is_dir():
            raise FleetError(f"{from_dir}: not a directory (--from takes a directory of check --save files)")
        records = fleet_check.from_dir(from_dir, names, table, jobs)
        source, settings = "files", {"from": str(from_dir)}
    else:
        if names is None:
            raise FleetError("give a node set (e.g. node[001-512] or @gpu), or --from DIR")
        shell = shell or shell_from()
        full = command if "--json" in command.split() or "jsonl" in command else command + " --json"
        records = fleet_check.over_ssh(names, shell, full)
        source, settings = "ssh", _settings(shell, full)
    doc = report.build("check", records, nodeset=nodeset or fold(r["node"] for r in records), source=source,
                       seconds=round(time.monotonic() - started, 3), settings=settings)
    if not records:
        doc["notes"].append(f"no node: {from_dir} holds no *.json or *.jsonl file" if from_dir else "no node")
    return doc


def read_addresses(path: Optional[Path]) -> Dict[str, str]:
    """`node address` per line (# comments); what --addresses gives."""
    if path is None:
        return {}
    import ipaddress
    out: Dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise FleetError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})")
    for n, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            raise FleetError(f"{path} line {n}: expected 'node address'")
        try:
            out[words[0]] = str(ipaddress.ip_address(words[1]))
        except ValueError:
            raise FleetError(f"{path} line {n}: {words[1]!r} is not an IP address")
    return out


def probe(nodeset: str, options: Any, shell: Optional[Shell] = None, addresses: Optional[Dict[str, str]] = None,
          check_timeout: Optional[float] = None) -> Dict[str, Any]:
    from rdmadoctor.fleet import probe as fleet_probe
    names = nodes_of(nodeset)
    assert names is not None
    if len(names) < 2:
        raise FleetError(f"{nodeset!r} names {len(names)} node: a probe needs two or more")
    shell = shell or shell_from()
    round_bound = options.round_seconds
    shell.timeout = round_bound
    doc = fleet_probe.run(names, shell, options, addresses, check_timeout=check_timeout)
    doc["nodeset"] = nodeset
    doc["settings"] = _settings(shell, options.command)
    return doc


def load(path: Path) -> Dict[str, Any]:
    """A saved fleet document (`fleet check|probe --format json`), checked against its schema."""
    from rdmadoctor.runtime import jsonio
    try:
        doc = jsonio.read(path, str(path))
        if not isinstance(doc, dict) or doc.get("schema") != report.SCHEMA:
            raise FleetError(f"{path}: not a fleet result (expected \"schema\": \"{report.SCHEMA}\")")
        return jsonio.validate(doc, "fleet", str(path))
    except jsonio.JsonInputError as exc:
        raise FleetError(str(exc))


def output(doc: Dict[str, Any], fmt: str, verbose: bool = False) -> str:
    if fmt == "json":
        import json
        return json.dumps(doc, indent=2, default=str) + "\n"
    if fmt == "text":
        from rdmadoctor.fleet import text
        return text.render(doc, verbose)
    return formats.fleet(doc, fmt)


def html(doc: Dict[str, Any]) -> str:
    from rdmadoctor.fleet import html as fleet_html
    return fleet_html.render(doc)
