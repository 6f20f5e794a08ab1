"""The command line: argument handling only; the work is in diagnose, collectors, probe and render.

Exit codes (Nagios-style, see README): 0 nothing wrong, 1 warnings only, 2 failure diagnosed,
3 could not tell (cause unknown, or input unreadable), 64 bad invocation (click's usage errors are
moved there so they are not mistaken for "failure diagnosed").
"""
from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional, cast

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
fleet_app = typer.Typer(help="A whole cluster: every node's check, pairwise probes, one report (docs/fleet.md).",
                        no_args_is_help=True)
app.add_typer(fleet_app, name="fleet")


def _option(default, *names, **kw):
    """typer.Option without typer's "[default: ...]" suffix: the help texts say the defaults that matter, and
    the suffix is what makes typer load its rich help machinery (~80 ms of start-up)."""
    return typer.Option(default, *names, show_default=False, **kw)


def _argument(default, *names, **kw):
    return typer.Argument(default, *names, show_default=False, **kw)


def _required(value, hint: str, kind: str) -> None:
    """Required parameters are checked here, not by typer (whose "[required]" suffix costs start-up)."""
    if value is None or value == []:
        raise click.exceptions.MissingParameter(param_hint=f"'{hint}'", param_type=kind)


def _within(low, high):
    """A range check as a callback (typer's min=/max= would print "[x>=5]" in the help)."""
    def check(value):
        if value is not None and ((low is not None and value < low) or (high is not None and value > high)):
            bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise typer.BadParameter(f"{value} is not {bounds}")
        return value
    return check


def _lang_option():
    return _option(None, "--lang", metavar="LANG",
                   help="Language of the result: en or zh (default: from LC_ALL/LC_MESSAGES/LANG, else en).")


def _language(value: Optional[str]) -> str:
    from rdmadoctor.knowledge.phrases import language
    try:
        return language(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--lang")


def _rules_dir_option():
    return _option([], "--rules-dir", metavar="DIR",
                   help="A directory of site rules (*.toml) to use beside the package's (repeatable).")


def _format_option():
    return _option(None, "--format", metavar="FORMAT",
                   help="text (default), json (as --json), jsonl (one line), line (Nagios/NHC: "
                        "'RDMA CRITICAL cause: summary'), prom (Prometheus textfile).")


def _format(value: Optional[str], json_out: bool) -> str:
    from rdmadoctor.fleet.formats import parse
    try:
        return parse(value, json_out)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--format")


def _table(dirs: List[str]):
    """The rule table with the site directories; a site rule that does not load is an input error (exit 3)."""
    from rdmadoctor.engine import rules
    try:
        return rules.load(dirs)
    except rules.RuleError as exc:
        raise _fail_input(f"the rule table does not load:\n{exc}")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rdmadoctor {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(version: bool = _option(False, "--version", "-V", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """rdmadoctor: explain perftest logs, check hosts, render reports."""


def _say(message: object) -> None:
    """One line on stderr; what it quotes from outside cannot drive the terminal."""
    from rdmadoctor.runtime.text import printable
    typer.echo(f"rdmadoctor: {printable(message, False)}", err=True)


def _fail_input(message: str) -> "typer.Exit":
    """Each line of the message on a line of its own (a rule table's problems are listed one per line)."""
    for line in message.splitlines() or [message]:
        _say(line)
    return typer.Exit(EXIT_UNKNOWN)


def _stdout_closed() -> None:
    """The reader of stdout went away (`| head -1`): what is left to print goes nowhere, and the exit code
    stays the diagnosis's (and Python's own flush at exit finds nothing to complain about)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _write(path: Path, text: str) -> None:
    from rdmadoctor.runtime.files import write_private
    try:
        write_private(path, text)
    except OSError as exc:
        raise _fail_input(f"cannot write {path}: {exc.strerror or exc}")


def _emit(diagnosis, json_out: bool, html: Optional[Path], verbose: bool, redact: bool = False,
          lang: Optional[str] = None, fmt: Optional[str] = None) -> int:
    from rdmadoctor.render import json_out as jr
    code = STATUS_EXIT[diagnosis.verdict.status]
    if html is not None:
        from rdmadoctor.render import html as hr
        _write(html, hr.render(jr.to_dict(diagnosis), redact=redact))
    try:
        if fmt in ("line", "jsonl", "prom"):
            from rdmadoctor.fleet import formats
            document = jr.to_dict(diagnosis)
            if redact:
                from rdmadoctor.render.redact import redact_document
                document = redact_document(document)[0]
            sys.stdout.write(formats.check(document, fmt))
            sys.stdout.flush()
        elif json_out:
            document = jr.to_dict(diagnosis)
            if redact:
                from rdmadoctor.render.redact import redact_document
                document = redact_document(document)[0]
            sys.stdout.write(jr.dumps(document))
            sys.stdout.flush()
        else:
            from rdmadoctor.render import text
            from rdmadoctor.render.terminal import Terminal
            text.render(diagnosis, Terminal(), verbose=verbose, lang=lang)
            sys.stdout.flush()
            if html is not None:
                _say(f"HTML report: {html}")
    except BrokenPipeError:
        _stdout_closed()
    except OSError as exc:                    # ENOSPC, EIO on a redirected stdout
        raise _fail_input(f"cannot write the result to standard output: {exc.strerror or exc}")
    return code


@app.command()
def explain(
    logs: Optional[List[str]] = _argument(None, metavar="LOG...",
                                     help="The output: one or both sides, files, pipes or '-' for stdin (not a device)."),
    files_from: Optional[str] = _option(None, "--files-from", metavar="FILE",
                                        help="Also the logs FILE names, one a line ('-': the names come on stdin): "
                                             "for more files than a command line holds."),
    json_out: bool = _option(False, "--json", help="Print the result as JSON (schema rdmadoctor/1)."),
    html: Optional[Path] = _option(None, "--html", metavar="FILE", help="Also write an HTML report."),
    link_rate: Optional[str] = _option(None, "--link-rate", metavar="RATE",
                                            help="The link's rate (e.g. 100G) to judge bandwidth against."),
    redact: bool = _option(False, "--redact", help="Mask addresses, GIDs, GUIDs and host names in --json and the HTML report."),
    verbose: bool = _option(False, "--verbose", "-v", help="Show explained findings in full, and references."),
    rules_dir: List[str] = _rules_dir_option(),
    lang: Optional[str] = _lang_option(),
) -> None:
    """Name the root cause of a failing (or slow) RDMA run from its output: perftest, NCCL, UCX, Open MPI,
    libfabric, the verbs and rdma_cm tools, device listings, the kernel log."""
    if files_from is None:
        _required(logs, "LOG...", "argument")
    logs = logs or []
    from rdmadoctor.engine import diagnose
    from rdmadoctor.logparse.streams import InputError, parse_paths
    rate = None
    if link_rate is not None:
        try:
            rate = diagnose.parse_rate(link_rate)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--link-rate")
    if logs.count("-") > 1:
        raise click.BadParameter("standard input ('-') can be given once", param_hint="LOG")
    if files_from == "-" and "-" in logs:
        raise click.BadParameter("standard input holds either the list of files or a log, not both",
                                 param_hint="--files-from")
    language = _language(lang)
    table = _table(rules_dir)
    listing = _listing(files_from)
    try:
        parsed = parse_paths(logs, listing)
    except InputError as exc:
        raise _fail_input(str(exc))
    except OSError as exc:                    # EIO in the middle of a file
        raise _fail_input(f"cannot read {exc.filename or 'the input'}: {exc.strerror or exc}")
    finally:
        if listing is not None:
            listing.close()
    raise typer.Exit(_emit(diagnose.explain(parsed, rate, table, language), json_out, html, verbose, redact,
                           language))


def _listing(path: Optional[str]) -> Optional[BinaryIO]:
    """--files-from: the list of files, seekable (it is read twice); a pipe or standard input is kept in a spooled
    temporary file (in memory up to 1 MiB, on disk beyond)."""
    if path is None:
        return None
    try:
        source = sys.stdin.buffer if path == "-" else open(path, "rb")
    except OSError as exc:
        raise _fail_input(f"{path}: {exc.strerror or exc}")
    if source is not sys.stdin.buffer and source.seekable():
        return source
    import shutil
    import tempfile
    spool = tempfile.SpooledTemporaryFile(max_size=1 << 20)
    try:
        shutil.copyfileobj(source, spool)
    except OSError as exc:
        spool.close()
        raise _fail_input(f"{path}: {exc.strerror or exc}")
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    return cast(BinaryIO, spool)


def _bad_peer_answer(facts) -> Optional[str]:
    """One line when the peer's agent sent an answer not to be believed (probe/run.py: agent.bad_answer)."""
    probe = ((facts.get("sections") or {}).get("probe") or {}).get("data") or {}
    bad = (probe.get("agent") or {}).get("bad_answer")
    return f"the peer's agent sent an answer that is not valid ({bad}): nothing it said is used" if bad else None


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


def _parsed_logs(paths: List[str]):
    """check --log: the logs parsed, to diagnose together with the facts."""
    from rdmadoctor.logparse.streams import InputError, parse_paths
    try:
        return parse_paths(paths)
    except InputError as exc:
        raise _fail_input(str(exc))
    except OSError as exc:
        raise _fail_input(f"cannot read {exc.filename or 'a log'}: {exc.strerror or exc}")


def _collect_with_probe(ctx, address: str, agent_port: int, token_file: Optional[Path], facts_port: int,
                        perftest_port: Optional[int], bounds: Dict[str, Any]) -> Dict[str, Any]:
    """This host's facts, collected while the probe ladder climbs to the peer (and asks its agent)."""
    from rdmadoctor.collectors import collect_facts
    from rdmadoctor.probe.protocol import read_token
    from rdmadoctor.probe.run import ProbeOptions, collect_with_probe
    try:
        token, _ = read_token(str(token_file) if token_file else None)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--token-file")
    return collect_with_probe(ctx, ProbeOptions(address, agent_port, token, perftest_port, facts_port=facts_port),
                              (lambda c: collect_facts(c, **bounds)) if bounds else None)


def _save_facts(facts: Dict[str, Any], path: Path, redact: bool) -> None:
    """check --save: the facts written to a file (masked with --redact), for a later --from."""
    from rdmadoctor.collectors import save_facts
    kept = facts
    if redact:
        from rdmadoctor.render.redact import redact_facts
        kept = redact_facts(facts)
    try:
        save_facts(kept, path)
    except OSError as exc:
        raise _fail_input(f"cannot write {path}: {exc.strerror or exc}")
    _say(f"facts saved to {path}")


@app.command()
def check(
    peer: Optional[str] = _option(None, "--peer", metavar="IP",
                                       help="The other host: check the route to it (and, with its agent, probe it)."),
    port: int = _option(18515, "--port", callback=_within(1, 65535), help="perftest's side-channel port to check (default 18515)."),
    log: List[str] = _option([], "--log", metavar="FILE",
                                  help="A perftest log from this host to diagnose together with the facts (repeatable)."),
    save: Optional[Path] = _option(None, "--save", metavar="FILE", help="Write the collected facts to FILE (JSON)."),
    from_file: Optional[Path] = _option(None, "--from", metavar="FILE",
                                             help="Diagnose facts saved earlier with --save instead of this host's."),
    json_out: bool = _option(False, "--json", help="Print the result as JSON (schema rdmadoctor/1)."),
    fmt: Optional[str] = _format_option(),
    html: Optional[Path] = _option(None, "--html", metavar="FILE", help="Also write an HTML report."),
    redact: bool = _option(False, "--redact", help="Mask addresses, GIDs, GUIDs and host names in --json, --save "
                                                    "and the HTML report."),
    sample: float = _option(1.0, "--sample", callback=_within(0.0, 30.0), metavar="SECONDS",
                                 help="Interval between the two port-counter samples (default 1; 0: one sample)."),
    verbose: bool = _option(False, "--verbose", "-v", help="Show explained findings in full, and references."),
    probe: bool = _option(True, "--probe/--no-probe",
                               help="With --peer: climb the probe ladder (TCP, rdma_cm, exchange, burst) and ask "
                                    "the peer's agent; --no-probe only checks the route."),
    agent_port: int = _option(18600, "--agent-port", callback=_within(1, 65534), metavar="PORT",
                                   help="TCP port of `rdmadoctor serve` on the peer (default 18600; its rdma_cm listener: PORT+1)."),
    token_file: Optional[Path] = _option(None, "--token-file", metavar="FILE",
                                              help="The agent's shared token (default: $RDMADOCTOR_AGENT_TOKEN)."),
    probe_perftest: bool = _option(False, "--probe-perftest",
                                        help="Also try a TCP connect to the peer's perftest port (--port): a "
                                             "waiting perftest server takes it for its client and fails."),
    timeout: Optional[float] = _option(None, "--timeout", "-t", callback=_within(1.0, 600.0), metavar="SECONDS",
                                       help="How long each collector, and the collection as a whole, may take "
                                            "(default: each collector its own deadline, 30 s in all)."),
    rules_dir: List[str] = _rules_dir_option(),
    lang: Optional[str] = _lang_option(),
) -> None:
    """Check whether RDMA can work on this host and, if not, why (read-only)."""
    from rdmadoctor.engine import diagnose
    from rdmadoctor.collectors import FactsError, collect_facts, load_facts
    from rdmadoctor.collectors.base import CollectContext
    if from_file is not None and save is not None:
        raise typer.BadParameter("--from reads saved facts; --save writes this host's: use one of them",
                                 param_hint="--from/--save")
    fmt = _format(fmt, json_out)
    json_out = fmt == "json"
    address = _peer_address(peer)
    language = _language(lang)
    table = _table(rules_dir)
    bounds = {}
    if timeout is not None:
        from rdmadoctor.collectors import ORDER
        bounds = {"total_timeout": timeout, "timeouts": {name: timeout for name in ORDER}}
    parsed = _parsed_logs(log) if log else None
    if from_file is not None:
        try:
            facts = load_facts(from_file)
        except FactsError as exc:
            raise _fail_input(str(exc))
    else:
        ctx = CollectContext(peer=address, port=port, sample_seconds=sample)
        if address and probe:                 # the probe ladder runs alongside the collection
            facts = _collect_with_probe(ctx, address, agent_port, token_file, port, port if probe_perftest else None,
                                        bounds)
        else:
            facts = collect_facts(ctx, **bounds)
        bad_peer = _bad_peer_answer(facts)
        if bad_peer:
            raise _fail_input(bad_peer)
        if save is not None:
            _save_facts(facts, save, redact)
    peer_of_facts = address or (facts.get("host") or {}).get("peer")
    raise typer.Exit(_emit(diagnose.check(facts, parsed, peer_of_facts, table, language), json_out, html, verbose,
                           redact, language, fmt))


@app.command()
def serve(
    bind: str = _option("auto", "--bind", metavar="ADDR",
                             help="Address to listen on. Default: this host's only IPv4 address on an RDMA "
                                  "device (several or none: give one)."),
    port: int = _option(18600, "--port", callback=_within(1, 65534), help="TCP port (default 18600; its rdma_cm listener: PORT+1)."),
    token_file: Optional[Path] = _option(None, "--token-file", metavar="FILE",
                                              help="Shared token, first line, mode 600 (default: "
                                                   "$RDMADOCTOR_AGENT_TOKEN; neither: no authentication)."),
    max_clients: int = _option(8, "--max-clients", callback=_within(1, 256), help="Clients served at once (default 8)."),
    allow_perftest: bool = _option(False, "--allow-perftest",
                                        help="Let `rdmadoctor bench` start perftest servers here (allowlisted "
                                             "binaries and options only, one at a time)."),
    share_privileged: bool = _option(False, "--share-privileged-facts",
                                          help="Without a token, still answer with what only root can read "
                                               "(firewall rules, kernel log); by default a token-less agent "
                                               "answers only what any local user could read."),
) -> None:
    """Be the peer for `rdmadoctor check --peer` (facts, an rdma_cm listener) and, opted in, `rdmadoctor bench`."""
    from rdmadoctor.agent import serve as agent_serve
    raise typer.Exit(agent_serve.main(bind, port, token_file, max_clients, allow_perftest=allow_perftest,
                                      privileged_facts=share_privileged))


def _earlier_bench(path: Path):
    """bench --compare: the results an earlier --save wrote."""
    from rdmadoctor.bench import results
    try:
        return results.load_json(path)
    except results.BenchFileError as exc:
        raise _fail_input(str(exc))


def _bench_peer(address: str, agent_port: int, token_file: Optional[Path]):
    """The peer's agent, greeted (and authenticated when it has a token) before the sweep is announced."""
    from rdmadoctor.probe import protocol as ap
    from rdmadoctor.bench.remote import AgentPeer, BenchAgentError, BenchAgentInvalid
    try:
        token, _ = ap.read_token(str(token_file) if token_file else None)
    except ValueError as exc:
        raise _fail_input(str(exc))
    remote = AgentPeer(address, agent_port, token)
    try:
        remote.hello()
    except (BenchAgentError, BenchAgentInvalid) as exc:
        raise _fail_input(str(exc))
    return remote


@app.command()
def bench(
    peer: Optional[str] = _option(None, "--peer", metavar="IP", help="The other host (required); its agent starts the servers."),
    test: str = _option("ib_write_bw", "--test", metavar="TOOL", help="The perftest binary, both sides (default ib_write_bw)."),
    qp: str = _option("1", "--qp", metavar="N[,N...]", help="QP counts to sweep, e.g. 1,2,4,8,16 (default 1)."),
    size: Optional[str] = _option(None, "--size", metavar="S[,S...]", help="Message sizes, e.g. 4K,64K,1M."),
    device: Optional[str] = _option(None, "--ib-dev", "-d", metavar="DEV", help="RDMA device (both sides)."),
    gid_index: Optional[int] = _option(None, "--gid-index", "-x", callback=_within(0, 64), help="GID index (both sides)."),
    duration: Optional[int] = _option(None, "--duration", "-D", callback=_within(1, 600), help="Seconds per combination."),
    iters: Optional[int] = _option(None, "--iters", "-n", callback=_within(5, 100_000_000), help="Iterations per combination."),
    agent_port: int = _option(18600, "--agent-port", callback=_within(1, 65535), help="The peer agent's TCP port (default 18600)."),
    token_file: Optional[Path] = _option(None, "--token-file", metavar="FILE", help="The agent's shared token."),
    link_rate: Optional[str] = _option(None, "--link-rate", metavar="RATE", help="Link rate to judge against."),
    stop_on_failure: bool = _option(False, "--stop-on-failure", help="Stop at the first failed combination."),
    save: Optional[Path] = _option(None, "--save", metavar="FILE", help="Write the results (for --compare)."),
    csv_file: Optional[Path] = _option(None, "--csv", metavar="FILE", help="Write the results as CSV."),
    compare: Optional[Path] = _option(None, "--compare", metavar="OLD.json", help="An earlier --save to compare with."),
    threshold: float = _option(10.0, "--threshold", callback=_within(0.0, 100.0), help="Regression threshold in percent (default 10)."),
    json_out: bool = _option(False, "--json", help="Print the diagnosis as JSON (schema rdmadoctor/1)."),
    html: Optional[Path] = _option(None, "--html", metavar="FILE", help="Also write an HTML report."),
    rules_dir: List[str] = _rules_dir_option(),
    lang: Optional[str] = _lang_option(),
) -> None:
    """Sweep perftest over QP counts and sizes with the peer's agent: both sides always run the same options."""
    _required(peer, "--peer", "option")
    from rdmadoctor.engine import diagnose
    from rdmadoctor.bench import plan, results
    from rdmadoctor.bench import run as bench_run
    from rdmadoctor.bench.remote import BenchAgentInvalid
    try:
        common = {k: v for k, v in (("ib-dev", device), ("gid-index", gid_index), ("duration", duration),
                                    ("iters", iters)) if v is not None}
        sweep = plan.Sweep(test, plan.parse_counts(qp), plan.parse_sizes(size) if size else [None], common)
        specs = sweep.specs()
        rate = diagnose.parse_rate(link_rate) if link_rate else None
    except (plan.PlanError, ValueError) as exc:
        raise typer.BadParameter(str(exc))
    language = _language(lang)
    table = _table(rules_dir)
    earlier = _earlier_bench(compare) if compare is not None else None
    address = _peer_address(peer)
    remote = _bench_peer(address, agent_port, token_file)
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.text import Text
    from rdmadoctor.runtime.text import printable
    err = Console(stderr=True)
    err.print(Text(f"bench: {len(specs)} combinations of {test} with {address}, about "
                   f"{plan.estimate_seconds(specs) / 60:.1f} min"))
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeRemainingColumn(), console=err, transient=True) as progress:
        task = progress.add_task("starting", total=len(specs))

        def done(combo) -> None:
            if combo.status != "ok" and (combo.client_log or combo.server_log):
                diagnose.explain_combo(combo, rate, table, language)
            shown = f"{combo.bw_avg_gbps:g} Gb/s" if combo.bw_avg_gbps is not None else combo.status
            progress.update(task, advance=1, description=Text(printable(f"{combo.label}: {shown}", False)))
            # the summary quotes the peer's log: text, never markup, never a terminal control
            err.print(Text(printable(f"  {combo.label}: {combo.status}" + (
                f", {combo.bw_avg_gbps:g} Gb/s" if combo.bw_avg_gbps is not None else "") + (
                f" ({(combo.verdict or {}).get('cause')}: {(combo.verdict or {}).get('summary')})"
                if combo.status != "ok" else ""), False)))
        try:
            outcome = bench_run.run_sweep(specs, address, remote, rate, stop_on_failure, on_result=done)
            outcome.facts = {"peer": remote.facts()}
        except BenchAgentInvalid as exc:
            raise _fail_input(str(exc))
    from rdmadoctor.collectors import collect_facts
    from rdmadoctor.collectors.base import CollectContext
    local = collect_facts(CollectContext(peer=address, sample_seconds=0))
    outcome.facts["local"] = local
    for path, write in ((save, lambda p: results.save_json(outcome, p)),
                        (csv_file, lambda p: results.save_csv(outcome, p))):
        if path is not None:
            try:
                write(path)
            except OSError as exc:
                raise _fail_input(f"cannot write {path}: {exc.strerror or exc}")
    diagnosis = diagnose.bench(outcome, local, outcome.facts.get("peer"), earlier, threshold / 100.0, table, language)
    diagnosis.bench = {k: v for k, v in outcome.to_dict().items() if k != "facts"}
    code = _emit(diagnosis, json_out, html, verbose=False, lang=language)
    raise typer.Exit(130 if outcome.interrupted else code)


@app.command()
def report(
    result: Optional[Path] = _argument(None, metavar="RESULT.json", help="A saved `--json` result of explain or check."),
    output: Optional[Path] = _option(None, "--output", "-o", metavar="FILE", help="The HTML file to write (required)."),
    redact: bool = _option(False, "--redact", help="Mask addresses, GIDs, GUIDs and host names."),
) -> None:
    """Render a saved JSON result as one self-contained HTML file."""
    _required(result, "RESULT.json", "argument")
    _required(output, "--output", "option")
    from rdmadoctor.render import html as hr
    from rdmadoctor.render.json_out import SCHEMA
    from rdmadoctor.runtime import jsonio
    try:
        document = jsonio.read(result, str(result))
        if not isinstance(document, dict) or document.get("schema") != SCHEMA:
            raise _fail_input(f"{result}: not an rdmadoctor result (expected \"schema\": \"{SCHEMA}\")")
        jsonio.validate(document, "result", str(result))
    except jsonio.JsonInputError as exc:
        raise _fail_input(str(exc))
    _write(output, hr.render(document, redact=redact))
    _say(f"HTML report: {output}")
    raise typer.Exit(STATUS_EXIT[document["verdict"]["status"]])


def _ssh_options():
    """The ssh settings of `fleet check` and `fleet probe` (ClusterShell's; clush.conf's [Main] gives defaults)."""
    return {
        "command": _option("rdmadoctor check", "--command", metavar="CMD",
                           help="How to run `rdmadoctor check` on a node (default 'rdmadoctor check'); the fleet "
                                "adds --json (and --peer for a probe). E.g. 'sudo /opt/rdmadoctor/bin/rdmadoctor check'."),
        "user": _option(None, "--user", "-l", metavar="USER", help="ssh user (default: clush.conf's ssh_user, else yours)."),
        "ssh_options": _option(None, "--ssh-options", "-o", metavar="OPTS", help="Extra ssh options, e.g. '-F cfg'."),
        "ssh_path": _option(None, "--ssh-path", metavar="PATH", help="The ssh command (default: clush.conf's ssh_path, else ssh)."),
        "fanout": _option(None, "--fanout", "-f", callback=_within(1, 4096), metavar="N",
                          help="ssh connections at once (default: clush.conf's, else 64)."),
        "connect_timeout": _option(None, "--connect-timeout", callback=_within(1, 600), metavar="SECONDS",
                                   help="ssh connect timeout (default: clush.conf's, else 10)."),
    }


def _fleet_fail(exc: Exception) -> "typer.Exit":
    return _fail_input(str(exc))


def _fleet_run(run, fmt: str, html: Optional[Path], verbose: bool) -> "typer.Exit":
    """Runs a fleet command (`run` gives its result document), prints it, and exits with its status."""
    from rdmadoctor.fleet import commands
    from rdmadoctor.fleet.report import exit_code
    try:
        doc = run()
    except commands.FleetError as exc:
        raise _fleet_fail(exc)
    _fleet_print(doc, fmt, html, verbose)
    return typer.Exit(exit_code(doc))


def _fleet_print(doc, fmt: str, html: Optional[Path], verbose: bool = False) -> None:
    from rdmadoctor.fleet import commands
    if html is not None:
        _write(html, commands.html(doc))
    try:
        sys.stdout.write(commands.output(doc, fmt, verbose))
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_closed()
    if html is not None and fmt == "text":
        _say(f"HTML report: {html}")


_SSH, _SSH_PROBE = _ssh_options(), _ssh_options()     # one set of option objects per command


@fleet_app.command("check")
def fleet_check(
    nodeset: Optional[str] = _argument(None, metavar="NODESET",
                                       help="Nodes in ClusterShell's syntax: node[001-512], @gpu, a,b,c."),
    from_dir: Optional[Path] = _option(None, "--from", metavar="DIR",
                                       help="Read the nodes' saved facts (check --save files, NODE.json; or *.jsonl) "
                                            "instead of running check over ssh."),
    command: str = _SSH["command"], user: Optional[str] = _SSH["user"], ssh_options: Optional[str] = _SSH["ssh_options"],
    ssh_path: Optional[str] = _SSH["ssh_path"], fanout: Optional[int] = _SSH["fanout"],
    connect_timeout: Optional[float] = _SSH["connect_timeout"],
    timeout: Optional[float] = _option(None, "--timeout", "-t", callback=_within(1, 3600), metavar="SECONDS",
                                       help="Per-node time limit (default: clush.conf's command_timeout, else 60)."),
    json_out: bool = _option(False, "--json", help="Print the fleet result as JSON (schema rdmadoctor-fleet/1)."),
    fmt: Optional[str] = _format_option(),
    html: Optional[Path] = _option(None, "--html", metavar="FILE", help="Also write the HTML overview."),
    jobs: Optional[int] = _option(None, "--jobs", "-j", callback=_within(1, 64), metavar="N",
                                  help="With --from: processes diagnosing the files (default: the CPUs)."),
    verbose: bool = _option(False, "--verbose", "-v", help="Show every group in full."),
    rules_dir: List[str] = _rules_dir_option(),
) -> None:
    """Check every node of a node set (over ssh through ClusterShell, or from saved facts): nodes grouped by
    verdict and cause, the drift across them."""
    from rdmadoctor.fleet import commands
    from rdmadoctor.fleet.remote import shell_from
    fmt = _format(fmt, json_out)
    table = _table(rules_dir) if from_dir is not None else None
    shell = None if from_dir is not None else shell_from(fanout, timeout, connect_timeout, user, ssh_options, ssh_path)
    raise _fleet_run(lambda: commands.check(nodeset, from_dir, command, shell, table, jobs), fmt, html, verbose)


@fleet_app.command("probe")
def fleet_probe(
    nodeset: Optional[str] = _argument(None, metavar="NODESET", help="The nodes to probe between (two or more)."),
    command: str = _SSH_PROBE["command"], user: Optional[str] = _SSH_PROBE["user"], ssh_options: Optional[str] = _SSH_PROBE["ssh_options"],
    ssh_path: Optional[str] = _SSH_PROBE["ssh_path"], fanout: Optional[int] = _SSH_PROBE["fanout"],
    connect_timeout: Optional[float] = _SSH_PROBE["connect_timeout"],
    check_timeout: float = _option(60.0, "--check-timeout", callback=_within(1, 3600), metavar="SECONDS",
                                   help="Per-node limit of the first pass (each node's check: its state and RDMA address; default 60)."),
    round_timeout: float = _option(60.0, "--round-timeout", callback=_within(5, 3600), metavar="SECONDS",
                                   help="The bound of one round: each probe's limit (default 60)."),
    rounds: Optional[int] = _option(None, "--rounds", callback=_within(1, 100000), metavar="N",
                                    help="Rounds of disjoint pairs (default: every pair up to 16 nodes, else 8 "
                                         "rounds spread over the full round-robin)."),
    seed: Optional[int] = _option(None, "--seed", metavar="N", help="Shuffle the node order first (other pairs)."),
    isolate: bool = _option(True, "--isolate/--no-isolate", help="Retest each failing pair's nodes against nodes that passed (default on)."),
    isolation_rounds: int = _option(6, "--isolation-rounds", callback=_within(1, 1000), metavar="N",
                                    help="At most this many rounds of retests (default 6)."),
    token_file: Optional[str] = _option(None, "--token-file", metavar="PATH",
                                        help="The agents' token file, as a path on the nodes (check --peer --token-file)."),
    agent_port: Optional[int] = _option(None, "--agent-port", callback=_within(1, 65534), metavar="PORT",
                                        help="The agents' TCP port (default 18600)."),
    addresses: Optional[Path] = _option(None, "--addresses", metavar="FILE",
                                        help="'node address' lines: the RDMA address to probe (default: the one "
                                             "IPv4 address on an RDMA port in each node's facts)."),
    json_out: bool = _option(False, "--json", help="Print the fleet result as JSON (schema rdmadoctor-fleet/1)."),
    fmt: Optional[str] = _format_option(),
    html: Optional[Path] = _option(None, "--html", metavar="FILE", help="Also write the HTML overview with the pair matrix."),
    verbose: bool = _option(False, "--verbose", "-v", help="List the pairs that passed too."),
) -> None:
    """Probe pairs of nodes through their agents (check --peer on one, `rdmadoctor serve` on the other), no agent
    in two probes at once; failing pairs are retested to name the node or the link."""
    _required(nodeset, "NODESET", "argument")
    from rdmadoctor.fleet import commands
    from rdmadoctor.fleet.probe import ProbeOptions
    from rdmadoctor.fleet.remote import shell_from
    fmt = _format(fmt, json_out)
    shell = shell_from(fanout, round_timeout, connect_timeout, user, ssh_options, ssh_path)
    options = ProbeOptions(command=command, rounds=rounds, seed=seed, round_seconds=round_timeout,
                           token_file=token_file, agent_port=agent_port, isolate=isolate,
                           isolation_rounds=isolation_rounds)
    raise _fleet_run(lambda: commands.probe(nodeset, options, shell, commands.read_addresses(addresses), check_timeout),
                     fmt, html, verbose)


@fleet_app.command("report")
def fleet_report(
    result: Optional[Path] = _argument(None, metavar="FLEET.json", help="A saved `fleet check|probe --json` result."),
    output: Optional[Path] = _option(None, "--output", "-o", metavar="FILE", help="The HTML file to write (required)."),
) -> None:
    """Render a saved fleet result as one self-contained HTML overview."""
    _required(result, "FLEET.json", "argument")
    _required(output, "--output", "option")
    from rdmadoctor.fleet import commands
    try:
        doc = commands.load(result)
    except commands.FleetError as exc:
        raise _fleet_fail(exc)
    _write(output, commands.html(doc))
    _say(f"HTML report: {output}")
    from rdmadoctor.fleet.report import exit_code
    raise typer.Exit(exit_code(doc))


@rules_app.command("list")
def rules_list(json_out: bool = _option(False, "--json", help="As JSON."), lang: Optional[str] = _lang_option()) -> None:
    """Every rule: id, severity, kind, cause, and its title in words."""
    import json
    from rdmadoctor.engine import rules
    table = rules.load()
    language = _language(lang)
    if json_out:
        typer.echo(json.dumps([{"id": r.id, "cause": r.cause, "severity": r.severity, "kind": r.kind,
                                "scope": r.scope, "producer": r.producer, "title": r.text("title", language),
                                "file": r.file} for r in table], indent=2, ensure_ascii=False))
        return
    from rdmadoctor.render.text import wrap
    from rdmadoctor.runtime.text import printable
    width = _width()
    for r in table:
        typer.echo(printable(f"{r.id}  {r.severity}  {r.kind}  {r.cause}", False))
        for line in wrap(printable(rules.readable(r.text("title", language)), False), width, "    "):
            typer.echo(line)


def _width() -> int:
    """The terminal's width, or 80 columns when the output is not a terminal (always the same in a pipe)."""
    import shutil
    return shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80


def _rule_ids(incomplete: str) -> List[str]:
    """Shell completion for `rules show ID`."""
    from rdmadoctor.engine import rules
    try:
        return [r.id for r in rules.load() if r.id.startswith(incomplete.upper())]
    except rules.RuleError:
        return []


@rules_app.command("check")
def rules_check(directory: Optional[Path] = _argument(None, metavar="DIR",
                                                      help="A directory of site rules; default: the package's.")) -> None:
    """Load the rule table (with DIR), check every name its rules use, and run their cases."""
    from rdmadoctor.engine import cases, rules
    dirs = [str(directory)] if directory is not None else []
    try:
        table = rules.build([rules.rules_dir(), *dirs])
    except rules.RuleError as exc:
        typer.echo(f"rdmadoctor: the rule table does not load:\n{exc}", err=True)
        raise typer.Exit(EXIT_FAILURE)
    mine = [r for r in table if directory is None or Path(r.directory).resolve() == directory.resolve()]
    outcomes = cases.run_all(table, mine)
    gaps = [f"{r.id}: {gap}" for r in mine for gap in cases.coverage(r)]
    failed = [o for o in outcomes if not o.ok]
    from rdmadoctor.runtime.text import printable
    for o in failed:
        typer.echo(printable(f"FAIL {o.name}: {o.message}"))
    for gap in gaps:
        typer.echo(printable(f"WARN {gap}"))
    typer.echo(f"{len(mine)} rules checked, {len(outcomes) - len(failed)} of {len(outcomes)} cases passed")
    raise typer.Exit(EXIT_FAILURE if failed else EXIT_WARNING if gaps else EXIT_OK)


@rules_app.command("show")
def rules_show(rule_id: Optional[str] = _argument(None, metavar="ID", autocompletion=_rule_ids),
               lang: Optional[str] = _lang_option()) -> None:
    """One rule: what it matches, why, how to fix, what it explains."""
    _required(rule_id, "ID", "argument")
    from rdmadoctor.engine import rules
    language = _language(lang)
    by_id = {r.id: r for r in rules.load()}
    rule = by_id.get(rule_id.upper())
    if rule is None:
        raise click.BadParameter(f"no rule {rule_id!r} (see `rdmadoctor rules list`)", param_hint="ID")
    from rdmadoctor.runtime.text import printable
    echo = lambda text: typer.echo(printable(text))    # noqa: E731 - a site rule's text is input too
    echo(f"{rule.id}  ({rule.file})\n  cause: {rule.cause}   severity: {rule.severity}   kind: {rule.kind}"
         f"   confidence: {rule.confidence}   scope: {rule.scope}\n  {rule.text('title', language)}\n")
    echo("Why:\n  " + " ".join(rule.text("why", language).split()))
    for heading, items in (("Fix", rule.text("fix", language)), ("Candidates", rule.candidates),
                           ("Next", rule.text("next_steps", language)), ("Explains", rule.explains),
                           ("References", rule.refs)):
        if items:
            echo(f"{heading}:")
            for item in items:
                echo(f"  - {item}")
    echo(f"When: {rule.when}")


def main() -> None:
    from rdmadoctor.runtime.text import printable
    try:
        code = app(standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:         # usage errors quote what was typed: no terminal controls
        exc.message = printable(exc.message)
        exc.show()
        code = EXIT_USAGE
    except click.exceptions.Abort:
        typer.echo("Aborted.", err=True)
        code = 130
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        _stdout_closed()
        code = EXIT_OK
    except RecursionError:
        _say("the input nests too deeply to be read")
        code = EXIT_UNKNOWN
    except OSError as exc:                      # EIO, ENOSPC where no command caught it
        _say(f"{exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}")
        code = EXIT_UNKNOWN
    except Exception as exc:                    # noqa: BLE001 - the last line of defence: one line, exit 3
        if os.environ.get("RDMADOCTOR_DEBUG"):
            raise
        _say_bug(exc)
        code = EXIT_UNKNOWN
    sys.exit(code or 0)


def run() -> None:
    """The console script and `python -m rdmadoctor`: main(), then the objects it made are frozen (gc.freeze), so
    that the interpreter's teardown does not walk them again in its collections: 25 ms of the 200 of `explain` on a
    small log. Its exit is the same (buffers flushed, files closed, atexit run); main() itself is left as it is for
    callers that go on running."""
    try:
        main()
    finally:
        gc.freeze()


def _say_bug(exc: Exception) -> None:
    """One line for an exception no command expected: what, and where it was raised (the innermost frame)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb is not None else ""
    _say(f"could not finish: {type(exc).__name__}{where}: {exc} (a bug: please report it; "
         "RDMADOCTOR_DEBUG=1 shows the traceback)")
