"""The command line: argument handling only; the work is in diagnose, collectors, probe and render.

Exit codes (Nagios-style, see README): 0 nothing wrong, 1 warnings only, 2 failure diagnosed,
3 could not tell (cause unknown, or input unreadable), 64 bad invocation (click's usage errors are
moved there so they are not mistaken for "failure diagnosed").
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import click
import typer

from rdmadoctor import __version__

EXIT_OK, EXIT_WARNING, EXIT_FAILURE, EXIT_UNKNOWN, EXIT_USAGE = 0, 1, 2, 3, 64
STATUS_EXIT = {"ok": EXIT_OK, "warning": EXIT_WARNING, "failure": EXIT_FAILURE, "unknown": EXIT_UNKNOWN}

app = typer.Typer(
    name="rdmadoctor",
    help="Names the root cause of RDMA (InfiniBand, RoCE) failures, with the evidence and the fix.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
rules_app = typer.Typer(help="List the rule table, or show one rule with its explanation.", no_args_is_help=True)
app.add_typer(rules_app, name="rules")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rdmadoctor {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """rdmadoctor: explain perftest logs, check hosts, render reports."""


def _fail_input(message: str) -> "typer.Exit":
    typer.echo(f"rdmadoctor: {message}", err=True)
    return typer.Exit(EXIT_UNKNOWN)


def _emit(diagnosis, json_out: bool, html: Optional[Path], verbose: bool, redact: bool = False) -> int:
    from rdmadoctor.render import json_out as jr
    if html is not None:
        from rdmadoctor.render import html as hr
        try:
            html.write_text(hr.render(jr.to_dict(diagnosis), redact=redact), encoding="utf-8")
        except OSError as exc:
            raise _fail_input(f"cannot write {html}: {exc.strerror or exc}")
    if json_out:
        sys.stdout.write(jr.render(diagnosis))
    else:
        from rich.console import Console
        from rdmadoctor.render import text
        text.render(diagnosis, Console(highlight=False, soft_wrap=True), verbose=verbose)
        if html is not None:
            typer.echo(f"HTML report: {html}", err=True)
    return STATUS_EXIT[diagnosis.verdict.status]


@app.command()
def explain(
    logs: List[str] = typer.Argument(..., metavar="LOG...",
                                     help="perftest output: one or both sides, files or '-' for stdin."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON (schema rdmadoctor/1)."),
    html: Optional[Path] = typer.Option(None, "--html", metavar="FILE", help="Also write an HTML report."),
    link_rate: Optional[str] = typer.Option(None, "--link-rate", metavar="RATE",
                                            help="The link's rate (e.g. 100G) to judge bandwidth against."),
    redact: bool = typer.Option(False, "--redact", help="Mask addresses, GIDs, GUIDs and host names in the HTML report."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show explained findings in full, and references."),
) -> None:
    """Name the root cause of a failing (or slow) perftest run from its output."""
    from rdmadoctor import diagnose
    from rdmadoctor.logparse import InputError, parse_paths
    rate = None
    if link_rate is not None:
        try:
            rate = diagnose.parse_rate(link_rate)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--link-rate")
    if logs.count("-") > 1:
        raise click.BadParameter("standard input ('-') can be given once", param_hint="LOG")
    try:
        parsed = parse_paths(logs)
    except InputError as exc:
        raise _fail_input(str(exc))
    raise typer.Exit(_emit(diagnose.explain(parsed, rate), json_out, html, verbose, redact))


def _peer_address(value: Optional[str]) -> Optional[str]:
    """--peer: an IP address (a host name is resolved once, here, so every rule sees the same address)."""
    if value is None:
        return None
    import ipaddress
    import socket
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(value, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise typer.BadParameter(f"{value!r} is neither an IP address nor a name that resolves ({exc})",
                                 param_hint="--peer")
    return infos[0][4][0]


@app.command()
def check(
    peer: Optional[str] = typer.Option(None, "--peer", metavar="IP",
                                       help="The other host: check the route to it (and, with its agent, probe it)."),
    port: int = typer.Option(18515, "--port", min=1, max=65535, help="perftest's side-channel port to check."),
    log: List[str] = typer.Option([], "--log", metavar="FILE",
                                  help="A perftest log from this host to diagnose together with the facts (repeatable)."),
    save: Optional[Path] = typer.Option(None, "--save", metavar="FILE", help="Write the collected facts to FILE (JSON)."),
    from_file: Optional[Path] = typer.Option(None, "--from", metavar="FILE",
                                             help="Diagnose facts saved earlier with --save instead of this host's."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON (schema rdmadoctor/1)."),
    html: Optional[Path] = typer.Option(None, "--html", metavar="FILE", help="Also write an HTML report."),
    redact: bool = typer.Option(False, "--redact", help="Mask addresses, GIDs, GUIDs and host names in the HTML report."),
    sample: float = typer.Option(1.0, "--sample", min=0.0, max=30.0, metavar="SECONDS",
                                 help="Interval between the two port-counter samples (0: one sample)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show explained findings in full, and references."),
    # issue 5: the probe ladder against --peer (rdmadoctor/probe)
    probe: bool = typer.Option(True, "--probe/--no-probe",
                               help="With --peer: climb the probe ladder (TCP, rdma_cm, exchange, burst) and ask "
                                    "the peer's agent; --no-probe only checks the route."),
    agent_port: int = typer.Option(18600, "--agent-port", min=1, max=65534, metavar="PORT",
                                   help="TCP port of `rdmadoctor serve` on the peer (its rdma_cm listener: PORT+1)."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", metavar="FILE",
                                              help="The agent's shared token (default: $RDMADOCTOR_AGENT_TOKEN)."),
    probe_perftest: bool = typer.Option(False, "--probe-perftest",
                                        help="Also try a TCP connect to the peer's perftest port (--port): a "
                                             "waiting perftest server takes it for its client and fails."),
) -> None:
    """Check whether RDMA can work on this host and, if not, why (read-only)."""
    from rdmadoctor import diagnose
    from rdmadoctor.collectors import FactsError, collect_facts, load_facts, save_facts
    from rdmadoctor.collectors.base import CollectContext
    from rdmadoctor.logparse import InputError, parse_paths
    if from_file is not None and save is not None:
        raise typer.BadParameter("--from reads saved facts; --save writes this host's: use one of them",
                                 param_hint="--from/--save")
    address = _peer_address(peer)
    parsed = None
    if log:
        try:
            parsed = parse_paths(log)
        except InputError as exc:
            raise _fail_input(str(exc))
    if from_file is not None:
        try:
            facts = load_facts(from_file)
        except (OSError, FactsError) as exc:
            raise _fail_input(f"{from_file}: {exc}")
    else:
        ctx = CollectContext(peer=address, port=port, sample_seconds=sample)
        if address and probe:                 # issue 5: the probe ladder runs alongside the collection
            from rdmadoctor.agent.protocol import read_token
            from rdmadoctor.probe.run import ProbeOptions, collect_with_probe
            try:
                token, _ = read_token(str(token_file) if token_file else None)
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--token-file")
            facts = collect_with_probe(ctx, ProbeOptions(address, agent_port, token,
                                                         port if probe_perftest else None, facts_port=port))
        else:
            facts = collect_facts(ctx)
        if save is not None:
            try:
                save_facts(facts, save)
            except OSError as exc:
                raise _fail_input(f"cannot write {save}: {exc.strerror or exc}")
            typer.echo(f"facts saved to {save}", err=True)
    peer_of_facts = address or (facts.get("host") or {}).get("peer")
    raise typer.Exit(_emit(diagnose.check(facts, parsed, peer_of_facts), json_out, html, verbose, redact))


@app.command()
def serve(
    bind: str = typer.Option("auto", "--bind", metavar="ADDR",
                             help="Address to listen on. Default: this host's only IPv4 address on an RDMA "
                                  "device (several or none: give one)."),
    port: int = typer.Option(18600, "--port", min=1, max=65534, help="TCP port (its rdma_cm listener: PORT+1)."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", metavar="FILE",
                                              help="Shared token, first line, mode 600 (default: "
                                                   "$RDMADOCTOR_AGENT_TOKEN; neither: no authentication)."),
    max_clients: int = typer.Option(8, "--max-clients", min=1, max=256, help="Clients served at once."),
) -> None:
    """Be the peer for `rdmadoctor check --peer` on another host: facts and an rdma_cm listener (read-only)."""
    from rdmadoctor.agent import serve as agent_serve       # issue 5
    raise typer.Exit(agent_serve.main(bind, port, token_file, max_clients))


@app.command()
def report(
    result: Path = typer.Argument(..., metavar="RESULT.json", help="A saved `--json` result of explain or check."),
    output: Path = typer.Option(..., "--output", "-o", metavar="FILE", help="The HTML file to write."),
    redact: bool = typer.Option(False, "--redact", help="Mask addresses, GIDs, GUIDs and host names."),
) -> None:
    """Render a saved JSON result as one self-contained HTML file."""
    import json
    from rdmadoctor.render import html as hr
    from rdmadoctor.render.json_out import SCHEMA
    try:
        document = json.loads(result.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _fail_input(f"{result}: {exc.strerror or exc}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise _fail_input(f"{result}: not a JSON result ({exc})")
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise _fail_input(f"{result}: not an rdmadoctor result (expected \"schema\": \"{SCHEMA}\")")
    try:
        output.write_text(hr.render(document, redact=redact), encoding="utf-8")
    except OSError as exc:
        raise _fail_input(f"cannot write {output}: {exc.strerror or exc}")
    typer.echo(f"HTML report: {output}", err=True)
    raise typer.Exit(STATUS_EXIT.get(document.get("verdict", {}).get("status"), EXIT_UNKNOWN))


@rules_app.command("list")
def rules_list(json_out: bool = typer.Option(False, "--json", help="As JSON.")) -> None:
    """Every rule: id, severity, cause, title."""
    import json
    from rdmadoctor.engine import rules
    table = rules.load()
    if json_out:
        typer.echo(json.dumps([{"id": r.id, "cause": r.cause, "severity": r.severity, "kind": r.kind,
                                "scope": r.scope, "title": r.title, "file": r.file} for r in table], indent=2))
        return
    for r in table:
        typer.echo(f"{r.id:<26} {r.severity:<5} {r.kind:<8} {r.cause:<36} {r.title}")


@rules_app.command("show")
def rules_show(rule_id: str = typer.Argument(..., metavar="ID")) -> None:
    """One rule: what it matches, why, how to fix, what it explains."""
    from rdmadoctor.engine import rules
    by_id = {r.id: r for r in rules.load()}
    rule = by_id.get(rule_id.upper())
    if rule is None:
        raise click.BadParameter(f"no rule {rule_id!r} (see `rdmadoctor rules list`)", param_hint="ID")
    typer.echo(f"{rule.id}  ({rule.file})\n  cause: {rule.cause}   severity: {rule.severity}   kind: {rule.kind}"
               f"   confidence: {rule.confidence}   scope: {rule.scope}\n  {rule.title}\n")
    typer.echo("Why:\n  " + " ".join(rule.why.split()))
    for heading, items in (("Fix", rule.fix), ("Candidates", rule.candidates), ("Next", rule.next_steps),
                           ("Explains", rule.explains), ("References", rule.refs)):
        if items:
            typer.echo(f"{heading}:")
            for item in items:
                typer.echo(f"  - {item}")
    typer.echo(f"When: {rule.when}")


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.UsageError as exc:
        exc.show()
        code = EXIT_USAGE
    except click.ClickException as exc:
        exc.show()
        code = EXIT_USAGE
    except click.exceptions.Abort:
        typer.echo("Aborted.", err=True)
        code = 130
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        code = EXIT_OK
    sys.exit(code or 0)
