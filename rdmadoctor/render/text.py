"""The terminal view: the verdict first, then each finding with its evidence and fix commands."""
from __future__ import annotations

from typing import List

from rich.console import Console
from rich.text import Text

from rdmadoctor.model import Diagnosis, Finding

STATUS_STYLE = {"ok": ("OK", "bold green"), "warning": ("WARNING", "bold yellow"),
                "failure": ("FAILURE", "bold red"), "unknown": ("UNKNOWN", "bold magenta")}
SEVERITY_GLYPH = {"fail": ("[✗]", "red"), "warn": ("[!]", "yellow"), "info": ("[i]", "cyan")}
RUNG_GLYPH = {"passed": ("[✓]", "green"), "failed": ("[✗]", "red"), "warning": ("[!]", "yellow"),
              "skipped": ("[-]", "dim"), "not-inspected": ("[?]", "magenta")}


def _runs_line(d: Diagnosis) -> str:
    if not d.runs:
        return ""
    parts = [f"{r.source}: {r.side}" + (f" ({r.tool})" if r.tool else "") for r in d.runs[:6]]
    more = f", … {len(d.runs) - 6} more" if len(d.runs) > 6 else ""
    return f"{len(d.runs)} run(s) — " + ", ".join(parts) + more


def _finding(console: Console, f: Finding, verbose: bool) -> None:
    glyph, style = SEVERITY_GLYPH[f.severity]
    kind = "symptom" if f.kind == "symptom" else f.cause
    head = Text()
    head.append(glyph + " ", style=style)
    head.append(f.rule, style="bold")
    head.append(f"  {kind}  ", style="cyan" if f.kind == "cause" else "magenta")
    head.append(f"({f.confidence})", style="dim")
    console.print(head)
    console.print(Text("    " + f.title, style="bold"))
    console.print(Text("    " + f.explanation.replace("\n\n", "\n    ")), soft_wrap=False)
    _evidence(console, f)
    _steps(console, "Fix", "→", f.fix, "green")
    if f.kind == "symptom":
        console.print(Text("    Could be: " + ", ".join(f.candidates), style="magenta"))
    _steps(console, "Next", "•", f.next_steps, "")
    if verbose and f.refs:
        console.print(Text("    Refs: " + "; ".join(f.refs), style="dim"))
    console.print()


def _evidence(console: Console, f: Finding, shown: int = 8) -> None:
    if not f.evidence:
        return
    console.print("    [dim]Evidence:[/]")
    for e in f.evidence[:shown]:
        where = f"{e.source}:{e.line}" if e.line else e.source
        line = Text(f"      {where:<24} ", style="dim")
        line.append(e.text, style="yellow")
        if e.note:
            line.append(f"   ({e.note})", style="dim")
        console.print(line, soft_wrap=True)
    if len(f.evidence) > shown:
        console.print(f"      [dim]… {len(f.evidence) - shown} more[/]")


def _steps(console: Console, title: str, bullet: str, steps: List[str], style: str) -> None:
    if not steps:
        return
    console.print(f"    [dim]{title}:[/]")
    for step in steps:
        console.print(Text(f"      {bullet} " + step, style=style))


def _bench_table(console: Console, bench: dict) -> None:
    from rich.table import Table
    table = Table(title=f"Sweep with {bench.get('peer')}", title_justify="left", show_edge=False)
    for column in ("combination", "status", "BW avg Gb/s", "MsgRate Mpps", "t_typical us", "cause"):
        table.add_column(column, justify="right" if column[0].isupper() or column.startswith("t_") else "left")
    for r in bench.get("results", []):
        best = " (best)" if r.get("tool") and bench.get("best") and bench["best"].startswith(r["tool"]) and \
            bench["best"] == _combo_label(r) else ""
        cells = ["" if r.get(k) is None else f"{r[k]:g}" for k in ("bw_avg_gbps", "msg_rate_mpps", "lat_typical_us")]
        table.add_row(_combo_label(r) + best, r.get("status", ""), *cells, (r.get("verdict") or {}).get("cause") or "",
                      style="red" if r.get("status") != "ok" else ("bold" if best else ""))
    console.print(table)
    console.print()


def _combo_label(r: dict) -> str:
    return f"{r.get('tool')} qp={r.get('qp')}" + (f" size={r['size']}" if r.get("size") is not None else "")


def render(d: Diagnosis, console: Console, verbose: bool = False) -> None:
    _verdict(d, console)
    if d.bench:
        _bench_table(console, d.bench)
    if d.rungs:
        _ladder(d, console)
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
                glyph, style = SEVERITY_GLYPH[f.severity]
                console.print(Text(f"  {glyph} {f.rule}: {f.title}  ← {f.explained_by}", style="dim"))
        console.print()


def _verdict(d: Diagnosis, console: Console) -> None:
    v = d.verdict
    label, style = STATUS_STYLE[v.status]
    title = Text()
    title.append(f"{label}", style=style)
    if v.cause and v.status != "ok":
        title.append(f"  {v.cause}", style="bold")
    if v.confidence:
        title.append(f"  ({v.confidence} confidence)", style="dim")
    console.print(title)
    console.print(Text("  " + v.summary))
    if v.fix:
        console.print(Text("  Fix: " + v.fix, style="green"))
    if v.candidates:
        console.print(Text("  Possible causes: " + ", ".join(v.candidates), style="magenta"))
    for step in v.next_steps[:3]:
        console.print(Text("  Next: " + step))
    runs = _runs_line(d)
    if runs:
        console.print(Text("  " + runs, style="dim"))
    for note in d.notes:
        console.print(Text("  Note: " + note, style="dim"))
    console.print()


def _ladder(d: Diagnosis, console: Console) -> None:
    console.print("[bold]Ladder[/]")
    for r in d.rungs:
        glyph, gstyle = RUNG_GLYPH[r.state]
        line = Text(f"  {glyph} ", style=gstyle)
        line.append(f"{r.title:<34}", style="bold" if r.state == "failed" else "")
        line.append(r.detail, style="dim")
        console.print(line)
    console.print()
