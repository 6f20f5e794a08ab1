"""What the peer's perftest is doing, set against this side: `check --peer` with the peer's agent.

The agent reports the perftest processes it sees (collectors/perftest_procs.py: binary, the options that must
match, the ports they listen on). This compares them with what this side runs or ran: the perftest log given
with --log (its command line, the address and port its client aimed at) or, without one, the port check was
asked about. The result is view["peer_perftest"], which rules/peer-perftest.toml reads:

    known          the peer's agent reported its perftest processes (an older agent does not)
    asked_port     the port this side's client connects to (the log's -p, else check's --port)
    servers        the peer's perftest servers; waiting: the one listening on asked_port; elsewhere: another
    differences    the options that differ between the log's client and the peer's server (names, both values)
    start_command  a server command for the peer that matches this side
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from rdmadoctor.knowledge.perftest import DEFAULT_PORT
from rdmadoctor.model import Command, Run
from rdmadoctor.runtime.text import shell_words
from rdmadoctor.views import params

# compared between the log's client and the peer's server (the port separately: it decides whether they meet)
COMPARED = ("verb", "test_kind", "num_qps", "connection", "all_sizes", "size", "iters", "duration", "bidirectional",
            "rdma_cm_qps", "exchange_method", "atomic_type", "report_units", "report_per_port", "run_infinitely",
            "data_validation")
# the options of this side a matching server must repeat, in the order a person writes them
REPEATED = ("size", "all", "qp", "iters", "duration", "connection", "bidirectional", "rdma_cm", "comm_rdma_cm",
            "atomic_type", "report_gbits", "run_infinitely", "write_with_imm", "send_with_imm", "data_validation",
            "report-per-port", "port")
_SHORT = {"size": "-s", "qp": "-q", "iters": "-n", "duration": "-D", "connection": "-c", "port": "-p",
          "ib-dev": "-d", "all": "-a", "bidirectional": "-b", "rdma_cm": "-R", "comm_rdma_cm": "-z",
          "atomic_type": "-A", "gid-index": "-x", "mtu": "-m"}


def _words(options: Dict[str, Any], names: Sequence[str]) -> List[str]:
    """The command-line words of these options, in this order ("-s", "65536", "-a", ...)."""
    out: List[str] = []
    for name in names:
        if name not in options:
            continue
        value = options[name]
        out += [_SHORT.get(name, f"--{name}")] + ([] if value is True else [str(value)])
    return out


def server_run(entry: Dict[str, Any]) -> Run:
    """The peer's process as a perftest run with only a command line, so that views/params.py reads its
    parameters (and perftest's defaults) exactly as it reads a pasted server's."""
    options = dict(entry.get("options") or {})
    argv = [entry["tool"], *_words(options, list(options))]
    run = Run(source="peer", index=0, first_line=0, last_line=0, side="server")
    run.command = Command(tool=entry["tool"], argv=argv, options=options, host=None, line=0, text=" ".join(argv))
    run.tool = entry["tool"]
    return run


def describe(entry: Dict[str, Any], lang: str = "en") -> str:
    """'ib_write_bw on port 18520 with -s 65536 -q 4' (the options it was started with that matter)."""
    words = " ".join(_words(entry.get("options") or {}, [n for n in REPEATED if n != "port"]))
    where = ", ".join(str(p) for p in entry.get("listening") or [entry.get("port")] if p)
    if lang == "zh":
        return f"{entry.get('tool')}（端口 {where}，" + (f"参数 {words}）" if words else "默认参数）")
    return f"{entry.get('tool')} on port {where}" + (f" with {words}" if words else " with default options")


def _entries(entries: List[Any], role: str) -> List[Dict[str, Any]]:
    return [dict(e, text=describe(e), text_zh=describe(e, "zh"))
            for e in entries if isinstance(e, dict) and e.get("role") == role]


def _summaries(out: Dict[str, Any]) -> None:
    servers, clients = out["servers"], len(out["clients"])
    if servers:
        out["summary"] = "the peer runs " + "; ".join(s["text"] for s in servers)
        out["summary_zh"] = "对端运行着 " + "；".join(s["text_zh"] for s in servers)
    else:
        out["summary"] = "no perftest server runs on the peer" + (
            f" ({clients} perftest client(s) do)" if clients else "")
        out["summary_zh"] = "对端没有运行 perftest 服务端" + (f"（有 {clients} 个 perftest 客户端）" if clients else "")


def _log_client(runs: Sequence[Run]) -> Optional[Run]:
    perftest = [r for r in runs if r.producer == "perftest"]
    return next((r for r in perftest if r.side == "client"), None) or \
        next((r for r in perftest if any(m.id == "C02" for m in r.messages)), None)


def _start_command(client: Optional[Run], remote: Dict[str, Any], port: int) -> str:
    """The server command for the peer, shell-quoted word by word (the log's options are pasted text)."""
    tool = (client.command.tool if client is not None and client.command else None) or \
        (client.tool if client is not None and client.tool else None) or "ib_write_bw"
    devices = [d.get("name") for d in remote.get("devices") or [] if d.get("name")]
    words = [tool, "-d", devices[0] if len(devices) == 1 else "<device>"]
    options = dict(client.command.options) if client is not None and client.command else {}
    options.pop("port", None)
    words += _words(options, [n for n in REPEATED if n != "port"])
    if port != DEFAULT_PORT:
        words += ["-p", str(port)]
    return shell_words(words)


def build(view: Dict[str, Any], runs: Sequence[Run]) -> Optional[Dict[str, Any]]:
    """view["peer_perftest"], or None without a peer view."""
    remote = view.get("remote")
    if not isinstance(remote, dict):
        return None
    entries = remote.get("perftest")
    client = _log_client(runs)
    log_port = params.read(client, "port") if client is not None else None
    log_host = params.read(client, "host") if client is not None else None
    asked = (log_port.value if log_port is not None else None) or (view.get("host") or {}).get("port") or DEFAULT_PORT
    peer_address = (view.get("peer") or {}).get("address") or (view.get("probe") or {}).get("peer")
    peer_addresses = {peer_address} | {a for p in remote.get("ports") or [] for a in p.get("netdev_ipv4") or []}
    out: Dict[str, Any] = {
        "known": isinstance(entries, list), "asked_port": asked, "peer_address": peer_address,
        "log": client is not None, "log_tool": client.tool if client is not None else None,
        "log_target": log_host.value if log_host is not None else None,
        # the client aimed at none of the peer's addresses (the probed one, those of its RDMA netdevs)
        "target_differs": bool(log_host is not None and peer_address and log_host.value not in peer_addresses),
        "servers": [], "clients": [], "waiting": None, "elsewhere": None, "differences": [], "differ": False,
        "differences_text": "", "differences_text_zh": "", "qp_count_differs": False, "matching": False,
        "start_command": _start_command(client, remote, asked), "summary": "", "summary_zh": "",
    }
    if not isinstance(entries, list):
        return out
    out["servers"], out["clients"] = _entries(entries, "server"), _entries(entries, "client")
    # a server waits on a port it listens on; where its sockets were not visible (an agent without root, an
    # rdma_cm listener), on its -p unless it is busy with a client
    waiting = next((s for s in out["servers"] if asked in (s.get("listening") or []) or
                    (not s.get("listening") and not s.get("connected") and s.get("port") == asked)), None)
    elsewhere = next((s for s in out["servers"] if s is not waiting), None)
    out["waiting"], out["elsewhere"] = waiting, (elsewhere if waiting is None else None)
    server = waiting or elsewhere
    if server is not None and client is not None:
        diffs = params.differences(server_run(server), client, list(COMPARED))
        out["differences"] = [{"name": n, "label": params.label(n), "option": params.option(n),
                               "peer": a.value, "here": b.value} for n, a, b in diffs]
        out["differ"] = bool(diffs)
        out["qp_count_differs"] = any(n == "num_qps" for n, _, _ in diffs)
        out["differences_text"] = "; ".join(f"{d['label']} ({d['option']}): {d['peer']} on the peer, {d['here']} here"
                                            for d in out["differences"])
        out["differences_text_zh"] = "；".join(f"{d['label']}（{d['option']}）：对端 {d['peer']}，本端 {d['here']}"
                                              for d in out["differences"])
    out["matching"] = waiting is not None and not out["differ"]
    _summaries(out)
    return out
