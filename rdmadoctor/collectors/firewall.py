"""Would this host's packet filter let the RDMA side channels in, and out?

Reads `nft -j list ruleset` (covers native nftables, firewalld's nftables backend and iptables-nft) and,
when present, `iptables-legacy-save`/`ip6tables-legacy-save` (x_tables rules that nft does not show), and
evaluates three-valued (nfteval.py) for each question:
  * inbound TCP ctx.port (perftest's out-of-band port, default 18515), from the peer when given;
  * inbound UDP 4791 (RoCEv2): only Soft-RoCE (rxe) traffic passes netfilter; hardware RoCE bypasses it;
  * inbound TCP ctx.probe_port when given;
  * the same TCP port and UDP 4791 outbound, to the peer when given: a host that filters what it sends (an output
    chain with a drop policy, a hardened profile) stops its own perftest clients and Soft-RoCE traffic.
Reading the rules needs CAP_NET_ADMIN: without it the section is unavailable, never "no firewall".
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Optional, Tuple

from rdmadoctor.collectors.base import CollectContext, Unavailable
from rdmadoctor.collectors.limits import CAP_NET_ADMIN, capabilities
from rdmadoctor.collectors.nfteval import Packet, Ruleset, evaluate, parse_iptables_save

NAME = "firewall"
TIMEOUT = 15.0
ROCE_V2_PORT = 4791
KEEP_RULESET_BYTES = 512 * 1024


def _has_net_admin(ctx: CollectContext) -> bool:
    if ctx.is_root:
        return True
    status = ctx.read_text("/proc/self/status") or ""
    eff = capabilities(status).get("CapEff")
    return bool(eff is not None and eff >> CAP_NET_ADMIN & 1)


def questions(ctx: CollectContext) -> List[Dict[str, Any]]:
    qs = [{"proto": "tcp", "port": ctx.port, "purpose": "perftest out-of-band exchange (TCP)"},
          {"proto": "udp", "port": ROCE_V2_PORT,
           "purpose": "RoCEv2 (matters for Soft-RoCE rxe only: hardware RoCE bypasses netfilter)"}]
    if ctx.probe_port and ctx.probe_port != ctx.port:
        qs.append({"proto": "tcp", "port": ctx.probe_port, "purpose": "rdmadoctor probe/agent port"})
    qs += [{"proto": "tcp", "port": ctx.port, "outbound": True,
            "purpose": "perftest out-of-band exchange (TCP), a client on this host connecting to its server"},
           {"proto": "udp", "port": ROCE_V2_PORT, "outbound": True,
            "purpose": "RoCEv2 sent by this host (matters for Soft-RoCE rxe only: hardware RoCE bypasses netfilter)"}]
    return qs


def _peer_route(ctx: CollectContext) -> Dict[str, Optional[str]]:
    """The local address and interface the peer's packets arrive on (assuming a symmetric route)."""
    if not ctx.peer or not ctx.live:
        return {}
    try:
        import ipaddress
        import socket
        from rdmadoctor.collectors.netlink import Rtnetlink, pyroute2_api
        with Rtnetlink(pyroute2_api()) as ipr:
            r = ipr.route_to(ipaddress.ip_address(ctx.peer))[0]
            oif = r.get_attr("RTA_OIF")
            return {"dst": r.get_attr("RTA_PREFSRC"), "iif": socket.if_indextoname(oif) if oif else None}
    except Exception:        # noqa: BLE001 - unknown stays unknown
        return {}


def verdicts(rulesets: List[Ruleset], ctx: CollectContext, local: Dict[str, Optional[str]]) -> List[Dict[str, Any]]:
    out = []
    for q in questions(ctx):
        outbound = bool(q.get("outbound"))
        # the peer is the source of what arrives and the destination of what this host sends; the local address and
        # interface are those of the route to it (assumed symmetric)
        src, dst = (local.get("dst"), ctx.peer) if outbound else (ctx.peer, local.get("dst"))
        try:
            pkt = Packet(q["proto"], q["port"], src=src, dst=dst, iif=None if outbound else local.get("iif"),
                         outbound=outbound, oif=local.get("iif") if outbound else None)
        except ValueError:
            pkt = Packet(q["proto"], q["port"], outbound=outbound)
        res = evaluate(rulesets, pkt)
        why = res["why"]
        if ctx.peer is None:
            why += (f" ({'destination' if outbound else 'source'} address not given: rules that match on it count "
                    "as unknown; IPv4 assumed)")
        entry = {"proto": q["proto"], "port": q["port"], "src": ctx.peer if not outbound else None,
                 "family": pkt.ipver, "purpose": q["purpose"], "verdict": res["verdict"], "rule": res["rule"],
                 "why": why, "trail": res["trail"]}
        if outbound:
            entry.update(direction="out", dst=ctx.peer)
        out.append(entry)
    return out


def read_nft(ctx: CollectContext) -> Dict[str, Any]:
    res = ctx.run(["nft", "-j", "list", "ruleset"], timeout=6.0)
    if res.rc != 0:
        raise Unavailable(f"nft -j list ruleset: exit {res.rc}: {(res.stderr.strip() or res.stdout.strip())[:300]}")
    try:
        doc = json.loads(res.stdout or '{"nftables": []}')
    except ValueError as exc:
        raise Unavailable(f"nft -j list ruleset: not JSON ({exc})")
    return doc


def _saves(ctx: CollectContext, tools: Tuple[Tuple[str, str], ...]) -> Iterator[Tuple[str, str, Any]]:
    """(tool, family, its result) for each of the *-save tools that is installed."""
    for tool, fam in tools:
        if ctx.which(tool) is not None:
            yield tool, fam, ctx.run([tool], timeout=5.0)


def read_legacy(ctx: CollectContext) -> Dict[str, str]:
    texts = {}
    for tool, fam, res in _saves(ctx, (("iptables-legacy-save", "ip"), ("ip6tables-legacy-save", "ip6"))):
        if res.rc != 0:
            ctx.unreadable(tool, f"exit {res.rc}: {res.stderr.strip()[:200]}")
            continue
        texts[fam] = res.stdout
    return texts


def has_xt(nft_doc: Optional[Dict[str, Any]]) -> bool:
    return bool(nft_doc) and '"xt"' in json.dumps(nft_doc)


def read_nft_save(ctx: CollectContext) -> Dict[str, str]:
    """iptables-nft-save text, which keeps what the nft JSON shows as opaque xt matches (conntrack states...)."""
    return {fam: res.stdout for _, fam, res in _saves(ctx, (("iptables-nft-save", "ip"), ("ip6tables-nft-save", "ip6")))
            if res.rc == 0 and res.stdout.strip()}


def _replace_xt_tables(objs: List[Dict[str, Any]], nft_save: Dict[str, str]) -> Tuple[List[Dict[str, Any]],
                                                                                      List[Ruleset]]:
    """Tables written by iptables-nft are evaluated from iptables-nft-save's text instead of their xt blobs."""
    extra: List[Ruleset] = []
    drop = set()
    for fam, text in nft_save.items():
        parsed = parse_iptables_save(text, fam)
        tables = {o["chain"]["table"] for o in parsed if "chain" in o}
        xt_tables = {(o["rule"]["family"], o["rule"]["table"]) for o in objs
                     if "rule" in o and '"xt"' in json.dumps(o["rule"].get("expr"))}
        replace = {(fam, t) for t in tables} & xt_tables
        if not replace:
            continue
        drop |= replace
        extra.append(Ruleset([o for o in parsed if (fam, next(iter(o.values()))["table"]) in replace],
                             label=f"{'ip6tables' if fam == 'ip6' else 'iptables'}-nft"))
    kept = [o for o in objs if not (isinstance(o, dict) and len(o) == 1 and isinstance(next(iter(o.values())), dict)
                                    and (next(iter(o.values())).get("family"),
                                         next(iter(o.values())).get("table", next(iter(o.values())).get("name")))
                                    in drop)]
    return kept, extra


def evaluate_documents(nft_doc: Optional[Dict[str, Any]], legacy: Dict[str, str],
                       ctx: CollectContext, local: Optional[Dict[str, Optional[str]]] = None,
                       nft_save: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The section's data from a ruleset document and legacy save texts (used live and by tests)."""
    rulesets: List[Ruleset] = []
    backends: List[str] = []
    tables: List[str] = []
    rules_seen = 0
    if nft_doc is not None:
        objs = [o for o in nft_doc.get("nftables", []) if isinstance(o, dict)]
        tables = [f"{o['table']['family']} {o['table']['name']}" for o in objs if "table" in o]
        if nft_save:
            objs, extra = _replace_xt_tables(objs, nft_save)
            rulesets.extend(extra)
            rules_seen += sum(r.rule_count for r in extra)
        rs = Ruleset(objs)
        rulesets.append(rs)
        rules_seen += rs.rule_count
        if tables:
            backends.append("nftables")
    legacy_rules = 0
    for fam, text in legacy.items():
        objs = parse_iptables_save(text, fam)
        rs = Ruleset(objs, label=f"{'ip6tables' if fam == 'ip6' else 'iptables'}-legacy")
        non_default = rs.rule_count or any(c.get("policy") not in (None, "accept") for c in rs.chains.values())
        if non_default:
            rulesets.append(rs)
            legacy_rules += rs.rule_count
    if legacy_rules or any("iptables-legacy" in r.label for r in rulesets):
        backends.append("iptables-legacy")
    rules_seen += legacy_rules
    data: Dict[str, Any] = {
        "backend": backends[0] if len(backends) == 1 else ("+".join(backends) if backends else "none"),
        "backends": backends,
        "tables": tables,
        "rules_seen": rules_seen,
        "verdicts": verdicts(rulesets, ctx, local or {}),
    }
    return data


def collect(ctx: CollectContext) -> Dict[str, Any]:
    if not ctx.live:
        raise Unavailable("not read: a saved tree has no ruleset (firewall rules are read live with nft -j)")
    if not _has_net_admin(ctx):
        raise Unavailable("needs CAP_NET_ADMIN (run as root): nft and iptables-save cannot read the rules "
                          "otherwise")
    nft_doc, legacy = _read_rulesets(ctx)
    nft_save: Dict[str, str] = {}
    if has_xt(nft_doc):
        try:
            nft_save = read_nft_save(ctx)
        except Unavailable as exc:
            ctx.unreadable("iptables-nft-save", str(exc))
    data = evaluate_documents(nft_doc, legacy, ctx, _peer_route(ctx), nft_save=nft_save)
    _keep_texts(data, nft_doc, legacy, nft_save)
    ctx.source = " + ".join(s for s in ("nft -j" if nft_doc is not None else "",
                                        "iptables-legacy-save" if legacy else "") if s)
    return data


def _read_rulesets(ctx: CollectContext) -> Tuple[Optional[Dict[str, Any]], Dict[str, str]]:
    """The nft ruleset and the iptables-legacy save texts; one of them must be readable."""
    nft_doc = None
    nft_error = None
    try:
        nft_doc = read_nft(ctx)
    except Unavailable as exc:
        nft_error = str(exc)
    legacy: Dict[str, str] = {}
    try:
        legacy = read_legacy(ctx)
    except Unavailable as exc:
        ctx.unreadable("iptables-legacy rules", str(exc))
    if nft_doc is None and not legacy:
        raise Unavailable(f"cannot read the ruleset: {nft_error}; iptables-legacy-save is not installed either")
    if nft_doc is None:
        ctx.unreadable("nftables ruleset", nft_error or "unreadable")
    return nft_doc, legacy


def _keep_texts(data: Dict[str, Any], nft_doc: Optional[Dict[str, Any]], legacy: Dict[str, str],
                nft_save: Dict[str, str]) -> None:
    """What was read, kept in the section so that a saved facts file can be judged again (a large ruleset
    only by its size)."""
    if nft_save:
        data["nft_save"] = nft_save
    if nft_doc is not None:
        raw = json.dumps(nft_doc)
        data["nft_ruleset"] = nft_doc if len(raw) <= KEEP_RULESET_BYTES else None
        if len(raw) > KEEP_RULESET_BYTES:
            data["nft_ruleset_omitted"] = f"{len(raw)} bytes (over {KEEP_RULESET_BYTES})"
    if legacy:
        data["legacy_save"] = legacy
