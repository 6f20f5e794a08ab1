"""The terminal view: the verdict first, then each finding with its evidence and fix commands.

Every string shown comes from outside in the end (a log line, a facts file, a peer agent's answer), so each
goes through _t (runtime/text.printable: ESC, C1 and bidirectional controls shown as escapes, never sent to
the terminal) and into a rich Text, never into a markup string ("[link=...]" in a log stays text)."""
from __future__ import annotations

from typing import List

from rich.console import Console
from rich.text import Text

from rdmadoctor.model import Diagnosis, Finding
from rdmadoctor.runtime.text import printable


def _t(value: object, keep_newlines: bool = False) -> str:
    return printable("" if value is None else value, keep_newlines)

STATUS_STYLE = {"ok": ("OK", "bold green"), "warning": ("WARNING", "bold yellow"),
                "failure": ("FAILURE", "bold red"), "unknown": ("UNKNOWN", "bold magenta")}
SEVERITY_GLYPH = {"fail": ("[✗]", "red"), "warn": ("[!]", "yellow"), "info": ("[i]", "cyan")}
RUNG_GLYPH = {"passed": ("[✓]", "green"), "failed": ("[✗]", "red"), "warning": ("[!]", "yellow"),
              "skipped": ("[-]", "dim"), "not-inspected": ("[?]", "magenta")}


def _runs_line(d: Diagnosis) -> str:
    if not d.runs:
        return ""
    parts = [f"{_t(r.source)}: {_t(r.side)}" + (f" ({_t(r.tool)})" if r.tool else "") for r in d.runs[:6]]
    more = f", … {len(d.runs) - 6} more" if len(d.runs) > 6 else ""
    return f"{len(d.runs)} run(s) — " + ", ".join(parts) + more


def _finding(console: Console, f: Finding, verbose: bool) -> None:
    glyph, style = SEVERITY_GLYPH.get(f.severity, ("[?]", ""))
    kind = "symptom" if f.kind == "symptom" else f.cause
    head = Text()
    head.append(glyph + " ", style=style)
    head.append(_t(f.rule), style="bold")
    head.append(f"  {_t(kind)}  ", style="cyan" if f.kind == "cause" else "magenta")
    head.append(f"({_t(f.confidence)})", style="dim")
    console.print(head)
    console.print(Text("    " + _t(f.title), style="bold"))
    console.print(Text("    " + _t(f.explanation, True).replace("\n\n", "\n    ")), soft_wrap=False)
    if f.evidence:
        console.print("    [dim]Evidence:[/]")
        for e in f.evidence[:8]:
            where = f"{_t(e.source)}:{e.line}" if e.line else _t(e.source)
            line = Text(f"      {where:<24} ", style="dim")
            line.append(_t(e.text), style="yellow")
            if e.note:
                line.append(f"   ({_t(e.note)})", style="dim")
            console.print(line, soft_wrap=True)
        if len(f.evidence) > 8:
            console.print(f"      [dim]… {len(f.evidence) - 8} more[/]")
    if f.fix:
        console.print("    [dim]Fix:[/]")
        for fix in f.fix:
            console.print(Text("      → " + _t(fix), style="green"))
    if f.kind == "symptom":
        console.print(Text("    Could be: " + _t(", ".join(f.candidates)), style="magenta"))
    if f.next_steps:
        console.print("    [dim]Next:[/]")
        for step in f.next_steps:
            console.print(Text("      • " + _t(step)))
    if verbose and f.refs:
        console.print(Text("    Refs: " + _t("; ".join(f.refs)), style="dim"))
    console.print()


def _bench_table(console: Console, bench: dict) -> None:
    from rich.table import Table
    table = Table(title=Text(f"Sweep with {_t(bench.get('peer'))}"), title_justify="left", show_edge=False)
    for column in ("combination", "status", "BW avg Gb/s", "MsgRate Mpps", "t_typical us", "cause"):
        table.add_column(column, justify="right" if column[0].isupper() or column.startswith("t_") else "left")
    for r in bench.get("results", []):
        best = " (best)" if r.get("tool") and bench.get("best") and bench["best"].startswith(r["tool"]) and \
            bench["best"] == _combo_label(r) else ""
        cells = ["" if r.get(k) is None else f"{r[k]:g}" for k in ("bw_avg_gbps", "msg_rate_mpps", "lat_typical_us")]
        table.add_row(*(Text(_t(c)) for c in (_combo_label(r) + best, r.get("status", ""), *cells,
                                                (r.get("verdict") or {}).get("cause") or "")),
                      style="red" if r.get("status") != "ok" else ("bold" if best else ""))
    console.print(table)
    console.print()


def _combo_label(r: dict) -> str:
    return f"{r.get('tool')} qp={r.get('qp')}" + (f" size={r['size']}" if r.get("size") is not None else "")


def render(d: Diagnosis, console: Console, verbose: bool = False) -> None:
    v = d.verdict
    label, style = STATUS_STYLE[v.status]
    title = Text()
    title.append(f"{label}", style=style)
    if v.cause and v.status != "ok":
        title.append(f"  {_t(v.cause)}", style="bold")
    if v.confidence:
        title.append(f"  ({_t(v.confidence)} confidence)", style="dim")
    console.print(title)
    console.print(Text("  " + _t(v.summary)))
    if v.fix:
        console.print(Text("  Fix: " + _t(v.fix), style="green"))
    if v.candidates:
        console.print(Text("  Possible causes: " + _t(", ".join(v.candidates)), style="magenta"))
    for step in v.next_steps[:3]:
        console.print(Text("  Next: " + _t(step)))
    runs = _runs_line(d)
    if runs:
        console.print(Text("  " + runs, style="dim"))
    for note in d.notes:
        console.print(Text("  Note: " + _t(note), style="dim"))
    console.print()

    if d.bench:
        _bench_table(console, d.bench)

    if d.rungs:
        console.print("[bold]Ladder[/]")
        for r in d.rungs:
            glyph, gstyle = RUNG_GLYPH.get(r.state, ("[?]", ""))
            line = Text(f"  {glyph} ", style=gstyle)
            line.append(f"{_t(r.title):<34}", style="bold" if r.state == "failed" else "")
            line.append(_t(r.detail), style="dim")
            console.print(line)
        console.print()

    live: List[Finding] = [f for f in d.findings if f.explained_by is None]
    explained = [f for f in d.findings if f.explained_by is not None]
    if live:
        console.print("[bold]Findings[/]")
        for f in live:
            _finding(console, f, verbose)
    if explained:
        console.print(f"[bold]Explained by the findings above[/] [dim]({len(explained)})[/]")
        for f in explained:
            if verbose:
                _finding(console, f, verbose)
            else:
                glyph, style = SEVERITY_GLYPH.get(f.severity, ("[?]", ""))
                console.print(Text(f"  {glyph} {_t(f.rule)}: {_t(f.title)}  ← {_t(f.explained_by)}", style="dim"))
        console.print()

