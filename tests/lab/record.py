"""Records the fault matrix in the Soft-RoCE lab into fixtures/lab/.

    python -m tests.lab.record                                  # every scenario, all three pairs
    python -m tests.lab.record --pair bookworm --scenario qp-mismatch-client-10
    python -m tests.lab.record --pair mixed --out /tmp/rec      # somewhere else

One lab (two VMs) serves every scenario; between pairs only the hosts whose release changes are
replaced (bookworm -> mixed replaces h2, mixed -> trixie replaces h1). Writes
``<out>/<pair>/<scenario>/{server.log,client.log,meta.json[,check-<host>.json]}`` and
``<out>/<pair>/timings.json``.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from . import image as lab_image
from .runner import run_scenario
from .scenarios import BY_NAME, PAIR_ORDER, PAIRS, for_pair  # PAIR_ORDER: each step replaces one host
from .vm import REPO, Lab, LabError

DEFAULT_OUT = REPO / "fixtures" / "lab"


def _sigterm(*_):
    raise SystemExit(143)


def record(pairs: List[str], names: Optional[List[str]], out: Path, facts: bool = True,
           keep_going: bool = True, recorder: Optional[str] = None) -> int:
    signal.signal(signal.SIGTERM, _sigterm)
    started = time.monotonic()
    t0 = time.monotonic()
    lab_image.ensure_site()
    lab_image.ensure_images(sorted({r for p in pairs for r in PAIRS[p]}))
    images_seconds = round(time.monotonic() - t0, 1)
    failures = 0
    lab: Optional[Lab] = None
    summary: Dict[str, Dict] = {}
    try:
        for pair in pairs:
            h1, h2 = PAIRS[pair]
            pair_started = time.monotonic()
            if lab is None:
                lab = Lab(h1, h2)
                lab.start()
                boot = lab.timings.get("start")
            else:
                t = time.monotonic()
                lab.ensure(h1, h2)
                boot = round(time.monotonic() - t, 1)
            scenarios = [s for s in for_pair(pair) if names is None or s.name in names]
            timings = {"pair": pair, "releases": {"h1": h1, "h2": h2}, "boot_or_replace_seconds": boot,
                       "hosts": {n: dict(vm.info, boot_seconds=vm.boot_seconds) for n, vm in lab.hosts.items()},
                       "scenarios": {}}
            for sc in scenarios:
                print("[lab-record] %s / %s ..." % (pair, sc.name), end=" ", flush=True)
                try:
                    meta = run_scenario(lab, sc, out / pair / sc.name, facts=facts, recorder=recorder)
                except (LabError, OSError) as exc:
                    failures += 1
                    print("ERROR: %s" % exc, flush=True)
                    timings["scenarios"][sc.name] = {"error": str(exc)[:500]}
                    if not keep_going:
                        raise
                    _recover(lab)
                    continue
                c = meta["client"]
                s = meta["server"] or {}
                print("%.1f s  server rc=%s%s  client rc=%s%s" % (
                    meta["seconds"]["total"], s.get("exit_code"), " (bound)" if s.get("timed_out") else "",
                    c["exit_code"], " (bound)" if c["timed_out"] else ""), flush=True)
                timings["scenarios"][sc.name] = meta["seconds"]["total"]
            timings["pair_seconds"] = round(time.monotonic() - pair_started, 1)
            summary[pair] = timings
            if names is None:  # only a full run of a pair rewrites its timings
                (out / pair).mkdir(parents=True, exist_ok=True)
                (out / pair / "timings.json").write_text(json.dumps(timings, indent=2) + "\n")
    finally:
        if lab is not None:
            lab.close()
    total = round(time.monotonic() - started, 1)
    print("[lab-record] images %.1f s, total %.1f s, %d error(s)" % (images_seconds, total, failures))
    for pair, t in summary.items():
        print("[lab-record]   %-8s %6.1f s (boot/replace %.1f s, %d scenarios)" % (
            pair, t["pair_seconds"], t["boot_or_replace_seconds"] or 0, len(t["scenarios"])))
    return 1 if failures else 0


HEADER_LINE = re.compile(r"^\s*(\*|-{20,}|Dual-port|Number of qps|Connection type|PCIe relax|ibv_wr\* API|TX depth|"
                         r"CQ Moderation|Mtu |Link type|GID index|Max inline|rdma_cm QPs|Data ex\. method|Lock-free|"
                         r"Using DDP|Outstand reads|local address|remote address|GID: |#bytes|RDMA_\w+ .*Test|"
                         r"Send .*Test|Transport type|Using SRQ|CQE Poll|RX depth|Waiting for client to connect)")
RESULT_ROW = re.compile(r"^\s*\d+\s+\d+\s+[\d.]+\s+[\d.]+")


def key_lines(text: str) -> List[str]:
    """The lines of a recorded log that matter for a diagnosis (no prompt, header box or addresses)."""
    out = []
    for line in text.splitlines()[1:]:
        if not line.strip() or HEADER_LINE.match(line):
            continue
        if RESULT_ROW.match(line):
            first = line.split()[0]
            line = "<garbage row %s ...>" % first if len(first) > 12 else "<result row>"
            if out and out[-1] == line:
                continue
        out.append(line.strip())
    return out


def header_fields(text: str) -> Dict[str, str]:
    """``Name : value`` pairs of the header box (test name under ``test``)."""
    fields = {}
    for line in text.splitlines():
        if re.match(r"^\s+(RDMA_\w+|Send) .*Test\s*$", line):
            fields["test"] = line.strip()
        for part in line.split("\t"):
            m = re.match(r"^\s*([A-Za-z][\w .*-]*?)\s*:\s*(\S.*?)\s*$", part)
            if m and not part.strip().startswith(("local address", "remote address", "GID:")):
                fields.setdefault(m.group(1), m.group(2))
    return fields


def table(root: Path) -> str:
    """Markdown table of what each side printed, per scenario, from the recordings under ``root``."""
    rows = ["| scenario | server printed | client printed | expected `explain` | `explain` said | `check` said "
            "(faulty host) |", "|---|---|---|---|---|---|"]

    def cell(pair: str, name: str, side: str) -> Optional[str]:
        path = root / pair / name / (side + ".log")
        if not path.exists():
            return None
        other = root / pair / name / ("client.log" if side == "server" else "server.log")
        mine = header_fields(path.read_text())
        theirs = header_fields(other.read_text()) if other.exists() else {}
        differ = ["%s : %s" % (k, v) for k, v in mine.items() if k in theirs and theirs[k] != v]
        lines = key_lines(path.read_text())
        text = " / ".join("`%s`" % line.replace("|", "\\|") for line in lines) or "(nothing)"
        if differ:
            text = "header " + ", ".join("`%s`" % d for d in differ) + "; " + text
        return text

    for name, sc in BY_NAME.items():
        cells = []
        for side in ("server", "client"):
            per_pair = {pair: cell(pair, name, side) for pair in PAIR_ORDER}
            known = {p: v for p, v in per_pair.items() if v is not None}
            if not known:
                cells.append("(not run)" if side == "server" and sc.server is None else "(not recorded)")
                continue
            groups: Dict[str, List[str]] = {}
            for p, v in known.items():
                groups.setdefault(v, []).append(p)
            if len(groups) == 1:
                cells.append(next(iter(groups)))
            else:
                cells.append("<br>".join("**%s**: %s" % (", ".join(ps), v) for v, ps in groups.items()))
        expect = sc.expect_explain or ("(healthy)" if sc.healthy else "(recorded only)")
        if sc.alternatives:
            expect += " (alt.: %s)" % ", ".join(sc.alternatives)
        said = _grouped({pair: _explain_said(root / pair / name) for pair in PAIR_ORDER})
        checked = _grouped({pair: _check_said(root / pair / name) for pair in PAIR_ORDER})
        rows.append("| `%s` | %s | %s | %s | %s | %s |" % (name, cells[0], cells[1], expect, said, checked))
    return "\n".join(rows) + "\n"


def _grouped(per_pair: Dict[str, Optional[str]]) -> str:
    """One value when every recorded pair agrees, else each pair's."""
    groups: Dict[str, List[str]] = {}
    for pair, value in per_pair.items():
        if value is not None:
            groups.setdefault(value, []).append(pair)
    if len(groups) <= 1:
        return next(iter(groups), "")
    return "<br>".join("**%s**: %s" % (", ".join(ps), v) for v, ps in groups.items())


def _verdict_words(verdict: Dict) -> str:
    status = verdict.get("status")
    return "(healthy)" if status == "ok" else "%s %s" % (status, verdict.get("cause") or "")


def _explain_said(recording: Path) -> Optional[str]:
    """What `rdmadoctor explain` says now on the recording's two logs."""
    logs = [str(recording / n) for n in ("server.log", "client.log") if (recording / n).exists()]
    if not logs:
        return None
    from rdmadoctor.engine import diagnose
    from rdmadoctor.logparse.streams import parse_paths
    return _verdict_words(diagnose.explain(parse_paths(logs)).verdict.to_dict())


def _check_said(recording: Path) -> Optional[str]:
    """What `rdmadoctor check` printed live inside the faulty host (meta.json), when the scenario ran it."""
    meta = recording / "meta.json"
    check = json.loads(meta.read_text()).get("check") if meta.exists() else None
    return _verdict_words(check["verdict"]) if check and check.get("verdict") else None


def _recover(lab: Lab) -> None:
    """After a failed scenario: a reset, else reboot both hosts on the same wire."""
    try:
        lab.reset()
    except LabError:
        for name in ("h1", "h2"):
            lab.replace(name, lab.releases[name])


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lab.record", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", metavar="NAME", help="scenario to record (repeatable)")
    parser.add_argument("--pair", action="append", choices=sorted(PAIRS), help="pair to record (repeatable)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default fixtures/lab)")
    parser.add_argument("--no-facts", action="store_true", help="skip the rdmadoctor check --save hook")
    parser.add_argument("--stop-on-error", action="store_true")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--table", action="store_true",
                        help="print a markdown table of the recordings under --out and exit (for docs/lab.md)")
    args = parser.parse_args(argv)
    if args.table:
        sys.stdout.write(table(args.out))
        return 0
    if args.list:
        for name, sc in BY_NAME.items():
            print("%-36s %-26s %s" % (name, sc.expect_explain or ("(healthy)" if sc.healthy else "-"), sc.description))
        return 0
    unknown = [n for n in args.scenario or [] if n not in BY_NAME]
    if unknown:
        parser.error("unknown scenario(s): %s (see --list)" % ", ".join(unknown))
    pairs = [p for p in PAIR_ORDER if p in (args.pair or PAIR_ORDER)]
    recorder = " ".join(["python", "-m", "tests.lab.record"] + [shlex.quote(a) for a in (argv or sys.argv[1:])])
    return record(pairs, args.scenario, args.out, facts=not args.no_facts, keep_going=not args.stop_on_error,
                  recorder=recorder)


if __name__ == "__main__":
    sys.exit(main())
