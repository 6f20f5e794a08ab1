"""Three-valued "would a NEW inbound packet be accepted?" over `nft -j list ruleset` (and iptables-save).

The semantics:
  * every base chain on the path runs, ordered by hook (netdev ingress, prerouting, input) then priority;
    `accept` ends only that base chain, `drop`/`reject` anywhere is final, a base chain's policy applies
    when its rules fall through or `return`;
  * `jump` returns to the caller, `goto` does not;
  * anything not modelled (xt matches, limit, fib, bitwise, concatenations, queue, ...) before a verdict
    makes that rule's outcome `unknown`; a later concrete drop in another base chain still drops (an
    unknown can only have accepted, dropped or passed the packet on), unless a NAT rule may have
    rewritten the packet before it;
  * only claim `drop` on a concrete drop/reject/policy; only claim `accept` when nothing on the way was
    unknown.
Packets are judged as the first packet of a connection (ct state new). Unknown packet fields (source not
given, local address unknown, ingress interface unknown) are unknown, never guessed.
"""
from __future__ import annotations

import fnmatch
import ipaddress
import shlex
from typing import Any, Callable, Dict, List, Optional, Tuple

UNKNOWN = "unknown"
VERDICTS = ("accept", "drop", "reject", "jump", "goto", "return", "queue", "continue")
NOOPS = ("counter", "log", "notrack", "mangle", "set", "ct helper", "meta", "tproxy", "synproxy", "ct timeout",
         "ct expectation", "dup", "fwd", "quota-noop")
NAT = ("dnat", "snat", "masquerade", "redirect")
HOOK_ORDER = {"ingress": 0, "prerouting": 1, "input": 2}       # a packet that arrives for this host
OUTBOUND_HOOK_ORDER = {"output": 0, "postrouting": 1}          # a packet this host sends
L4 = {"6": "tcp", "17": "udp", "1": "icmp", "58": "ipv6-icmp", "132": "sctp", "136": "udplite",
      "icmpv6": "ipv6-icmp"}
MAX_DEPTH = 16


def _l4(v: Any) -> Any:
    return L4.get(str(v), v)


class Packet:
    """A new TCP or UDP packet: arriving for this host (through `iif`), or, `outbound`, sent by it (through `oif`)."""

    def __init__(self, proto: str, dport: int, src: Optional[str] = None, dst: Optional[str] = None,
                 iif: Optional[str] = None, sport: Optional[int] = None, family: Optional[int] = None,
                 outbound: bool = False, oif: Optional[str] = None):
        self.l4, self.dport, self.sport, self.iif, self.oif = proto, dport, sport, iif, oif
        self.src, self.dst, self.outbound = src, dst, outbound
        self.ipver = family or (ipaddress.ip_address(src).version if src else
                                ipaddress.ip_address(dst).version if dst else 4)

    def hooks(self) -> Dict[str, int]:
        return OUTBOUND_HOOK_ORDER if self.outbound else HOOK_ORDER

    def describe(self) -> str:
        if self.outbound:
            return f"{self.l4}/{self.dport} to {self.dst or 'any address'}, sent by this host (IPv{self.ipver})"
        return f"{self.l4}/{self.dport} from {self.src or 'any source'} (IPv{self.ipver})"


def _value(left: Any, pkt: Packet) -> Any:
    """The packet's value for `left`; None = header absent (the match is false); UNKNOWN = not modelled."""
    if not isinstance(left, dict):
        return UNKNOWN
    if "payload" in left:
        return _payload_value(left["payload"].get("protocol"), left["payload"].get("field"), pkt)
    if "meta" in left:
        read = _META.get(left["meta"].get("key"))
        return read(pkt) if read else UNKNOWN
    if "ct" in left and left["ct"].get("key") == "state" and "dir" not in left["ct"]:
        return "new"
    return UNKNOWN


_META = {
    "l4proto": lambda pkt: pkt.l4,
    "nfproto": lambda pkt: "ipv4" if pkt.ipver == 4 else "ipv6",
    "protocol": lambda pkt: "ip" if pkt.ipver == 4 else "ip6",
    "iif": lambda pkt: _interface(pkt, output=False),
    "iifname": lambda pkt: _interface(pkt, output=False),
    "oif": lambda pkt: _interface(pkt, output=True),
    "oifname": lambda pkt: _interface(pkt, output=True),
}
# headers a TCP or UDP packet does not have: a match on them is false (link-layer ones are not modelled)
_OTHER_L4 = ("icmp", "icmpv6", "sctp", "dccp", "ah", "esp", "comp", "udplite", "arp")


def _interface(pkt: Packet, output: bool) -> Any:
    """The packet's input or output interface; "" for the one its path does not have (a packet this host sends has no
    input interface, one it receives no output interface: nft reads the name as empty); UNKNOWN when not given."""
    if output != pkt.outbound:
        return ""
    name = pkt.oif if output else pkt.iif
    return name if name else UNKNOWN


def _payload_value(proto: Any, field: Any, pkt: Packet) -> Any:
    if proto in ("ip", "ip6"):
        return _ip_value(proto, field, pkt)
    if proto in ("tcp", "udp"):
        if proto != pkt.l4:
            return None
        if field == "dport":
            return pkt.dport
        return pkt.sport if field == "sport" and pkt.sport is not None else UNKNOWN
    if proto == "th":
        if pkt.l4 not in ("tcp", "udp"):
            return None
        return pkt.dport if field == "dport" else UNKNOWN
    return None if proto in _OTHER_L4 else UNKNOWN


def _ip_value(proto: str, field: Any, pkt: Packet) -> Any:
    if (proto == "ip") != (pkt.ipver == 4):
        return None
    if field == "saddr":
        return pkt.src if pkt.src else UNKNOWN
    if field == "daddr":
        return pkt.dst if pkt.dst else UNKNOWN
    return pkt.l4 if field in ("protocol", "nexthdr") else UNKNOWN


def _eq(v: Any, r: Any) -> Any:
    if isinstance(r, (dict, list)):
        return UNKNOWN
    if isinstance(v, str) and isinstance(r, str):
        try:
            return ipaddress.ip_address(v) == ipaddress.ip_address(r)
        except ValueError:
            if "*" in r:
                return fnmatch.fnmatchcase(v, r)
            return _l4(v) == _l4(r)
    if isinstance(v, int) and isinstance(r, int):
        return v == r
    return _l4(v) == _l4(r)


def _in(v: Any, right: Any, tbl: Tuple[str, str], sets: Dict) -> Any:
    if isinstance(right, str) and right.startswith("@"):
        return _in_named_set(v, right[1:], tbl, sets)
    if isinstance(right, list):                              # ct state ["established", "related"]
        return _any([_in(v, e, tbl, sets) for e in right])
    if not isinstance(right, dict):
        return _eq(v, right)
    if "set" in right:
        return _any([_in(v, e, tbl, sets) for e in right["set"]])
    if "elem" in right:
        return _in(v, right["elem"].get("val"), tbl, sets)
    if "prefix" in right:
        return _in_prefix(v, right["prefix"])
    if "range" in right:
        return _in_range(v, right["range"])
    return UNKNOWN                                           # concatenations, expressions


def _any(results: List[Any]) -> Any:
    return True if True in results else (UNKNOWN if UNKNOWN in results else False)


def _in_named_set(v: Any, name: str, tbl: Tuple[str, str], sets: Dict) -> Any:
    s = sets.get((tbl[0], tbl[1], name))
    if s is None:
        return UNKNOWN
    if "elem" not in s:
        return UNKNOWN if "dynamic" in (s.get("flags") or []) else False   # filled at run time: not known
    return _in(v, {"set": s.get("elem", [])}, tbl, sets)


def _in_prefix(v: Any, prefix: Any) -> Any:
    try:
        return ipaddress.ip_address(v) in ipaddress.ip_network(f"{prefix['addr']}/{prefix['len']}", strict=False)
    except (ValueError, TypeError, KeyError):
        return UNKNOWN


def _in_range(v: Any, bounds: Any) -> Any:
    lo, hi = bounds
    try:
        if isinstance(v, int):
            return int(lo) <= v <= int(hi)
        address: Any = ipaddress.ip_address(v)               # IPv4 against IPv6: TypeError, unknown
        return ipaddress.ip_address(lo) <= address <= ipaddress.ip_address(hi)
    except (ValueError, TypeError):
        return UNKNOWN


def _match(m: Dict[str, Any], pkt: Packet, tbl: Tuple[str, str], sets: Dict) -> Any:
    left, right, op = m.get("left"), m.get("right"), m.get("op", "==")
    key = left["meta"].get("key") if isinstance(left, dict) and isinstance(left.get("meta"), dict) else None
    own = ("oif", "oifname") if pkt.outbound else ("iif", "iifname")
    if key in own and not (pkt.oif if pkt.outbound else pkt.iif):
        if right == "lo":
            return op == "!="                                # a packet to or from a peer never crosses lo
        return UNKNOWN
    v = _value(left, pkt)
    if v is None:
        return False
    if v is UNKNOWN:
        return UNKNOWN
    if op in ("<", ">", "<=", ">="):
        if not isinstance(v, int) or not isinstance(right, int):
            return UNKNOWN
        return {"<": v < right, ">": v > right, "<=": v <= right, ">=": v >= right}[op]
    if op not in ("==", "!=", "in"):
        return UNKNOWN
    r = _in(v, right, tbl, sets)
    if r is UNKNOWN:
        return UNKNOWN
    return (not r) if op == "!=" else r


class Ruleset:
    def __init__(self, objs: List[Dict[str, Any]], label: str = ""):
        self.label = label                                   # "" for nft, "iptables-legacy" for legacy
        self.chains: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
        self.rules: Dict[Tuple[str, str, str], List[Dict[str, Any]]] = {}
        self.sets: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
        self.rule_count = 0
        for o in objs:
            if "chain" in o:
                c = o["chain"]
                self.chains[(c["family"], c["table"], c["name"])] = c
            elif "rule" in o:
                r = o["rule"]
                self.rules.setdefault((r["family"], r["table"], r["chain"]), []).append(r)
                self.rule_count += 1
            elif "set" in o or "map" in o:
                s: Any = o.get("set") or o.get("map")
                self.sets[(s["family"], s["table"], s["name"])] = s

    def where(self, key: Tuple[str, str, str], rule: Optional[Dict[str, Any]] = None) -> str:
        prefix = f"{self.label} " if self.label else ""
        if rule is None:
            return f"{prefix}{key[0]} {key[1]} {key[2]}"
        ref = rule.get("comment_ref") or f"handle {rule.get('handle')}"
        return f"{prefix}{key[0]} {key[1]} {key[2]} {ref}"

    # -- one chain ------------------------------------------------------------------------------------
    def run_chain(self, key: Tuple[str, str, str], pkt: Packet, nat: bool, depth: int = 0) -> Tuple[str, str]:
        """('accept'|'drop'|'unknown'|'return'|'continue'|'rewrite', where)."""
        if depth > MAX_DEPTH:
            return UNKNOWN, f"jumps nested deeper than {MAX_DEPTH} at {self.where(key)}"
        for r in self.rules.get(key, []):
            where = self.where(key, r)
            outcome = self._rule(r, key, where, pkt, nat, depth)
            if outcome is not None:
                return outcome
        return "continue", self.where(key)

    def _rule(self, r: Dict[str, Any], key, where: str, pkt: Packet, nat: bool, depth: int):
        """The rule's outcome, or None when it does not match or ends without a verdict."""
        state: Any = True                        # True while every match so far held; UNKNOWN once one may not
        tbl = (key[0], key[1])
        for e in r.get("expr", []):
            if not isinstance(e, dict) or len(e) != 1:
                state = UNKNOWN
                continue
            (kind, arg), = e.items()
            if kind in VERDICTS:
                return self._apply(kind, arg, key, where, pkt, nat, depth, certain=state is True)
            if kind == "vmap":
                return self._vmap(arg, state, key, where, pkt, nat, depth)
            step = self._step(kind, arg, state, where, pkt, tbl, nat)
            if step is None or isinstance(step, tuple):
                return step
            state = step
        return None

    def _step(self, kind: str, arg: Any, state: Any, where: str, pkt: Packet, tbl: Tuple[str, str], nat: bool):
        """An expression before the verdict: the new state, None when the rule cannot match, or an outcome."""
        if kind == "match":
            res = _match(arg, pkt, tbl, self.sets)
            return None if res is False else (UNKNOWN if res is UNKNOWN else state)
        if kind == "xt" and (arg or {}).get("type") == "target":
            return UNKNOWN, f"xt target {arg.get('name')} at {where}"
        if kind in NAT and nat:
            return "rewrite", f"{kind} at {where}" + ("" if state is True else " (may match)")
        return state if kind in NOOPS else UNKNOWN                  # xt matches, limit, quota, ct count, fib, ...

    def _vmap(self, arg: Any, state: Any, key, where: str, pkt: Packet, nat: bool, depth: int):
        v = _value(arg.get("key"), pkt)
        if v is None:
            return None
        hit = None
        for k, verdict in (arg.get("data") or {}).get("set", []):
            res = _in(v, k, (key[0], key[1]), self.sets) if v is not UNKNOWN else UNKNOWN
            if res is UNKNOWN:
                return UNKNOWN, f"cannot evaluate the verdict map at {where}"
            if res:
                hit = verdict
                break
        if hit is None:
            return None
        if state is UNKNOWN:
            return UNKNOWN, f"cannot evaluate the rule before the verdict map at {where}"
        (verb, varg), = hit.items()
        return self._apply(verb, varg, key, where, pkt, nat, depth, certain=True)

    def _apply(self, verb: str, arg: Any, key, where: str, pkt: Packet, nat: bool, depth: int, certain: bool):
        if verb in ("jump", "goto"):
            target: Any = (key[0], key[1], (arg or {}).get("target"))
            v, why = self.run_chain(target, pkt, nat, depth + 1)
            if v in ("continue", "return"):
                if verb == "jump":
                    return None                                  # back in the caller, whether or not it matched
                return ("return", why) if certain else (UNKNOWN, f"cannot evaluate the rule ending in goto at {where}")
            if not certain:
                return UNKNOWN, f"cannot evaluate the rule ending in {verb} at {where} (its chain ends in {v}: {why})"
            return v, why
        if not certain:
            return UNKNOWN, f"cannot evaluate the rule ending in {verb} at {where}"
        if verb == "reject":
            return "drop", f"reject at {where}"
        if verb == "queue":
            return UNKNOWN, f"queue to user space at {where}"
        if verb == "continue":
            return None
        return verb, where                                       # accept / drop / return

    # -- the whole path ------------------------------------------------------------------------------
    def base_chains(self, pkt: Packet) -> List[Dict[str, Any]]:
        fams = {"inet", "ip" if pkt.ipver == 4 else "ip6"}
        hooks = pkt.hooks()
        out = []
        for c in self.chains.values():
            if c.get("hook") not in hooks or c.get("type") not in ("filter", "nat"):
                continue
            # the destination NAT of the packet's own path (prerouting in, output out) may rewrite its port
            if c.get("type") == "nat" and c.get("hook") != ("output" if pkt.outbound else "prerouting"):
                continue
            if c["family"] == "netdev":
                devs = c.get("dev", [])
                devs = devs if isinstance(devs, list) else [devs]
                if pkt.iif and pkt.iif not in devs:
                    continue
                if not pkt.iif:                               # applies only if the packet arrives there
                    out.append(dict(c, _maybe=", ".join(devs)))
                    continue
            elif c["family"] not in fams:
                continue
            out.append(c)
        out.sort(key=lambda c: (hooks[c["hook"]], _prio(c.get("prio", 0))))
        return out


def _prio(p: Any) -> int:
    named = {"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100}
    if isinstance(p, int):
        return p
    return named.get(str(p), 0)


def evaluate(rulesets: List[Ruleset], pkt: Packet) -> Dict[str, Any]:
    """{'verdict': 'accept'|'drop'|'unknown', 'rule', 'why', 'trail': [...]} for one packet."""
    chains: List[Tuple[Ruleset, Dict[str, Any]]] = []
    for rs in rulesets:
        chains.extend((rs, c) for c in rs.base_chains(pkt))
    hooks = pkt.hooks()
    chains.sort(key=lambda rc: (hooks[rc[1]["hook"]], _prio(rc[1].get("prio", 0))))
    trail: List[Dict[str, Any]] = []
    unknown: Optional[Tuple[str, str]] = None
    rewritten: Optional[str] = None
    for rs, c in chains:
        v, at = _base_chain(rs, c, pkt)
        trail.append({"chain": rs.where((c["family"], c["table"], c["name"])), "verdict": v, "at": at})
        if v == "drop":
            if rewritten:
                return _result(UNKNOWN, at, f"{at} would drop it, but NAT may have rewritten the packet first "
                                            f"({rewritten})", trail)
            return _result("drop", at, _drop_text(at), trail)
        if v == "rewrite" or (v == UNKNOWN and "queue" in at):
            rewritten = rewritten or at
        if v in ("rewrite", UNKNOWN):
            unknown = unknown or (at, f"NAT may rewrite the packet ({at})" if v == "rewrite" else at)
    if unknown:
        return _result(UNKNOWN, unknown[0], unknown[1], trail)
    last = trail[-1]["at"] if trail else f"no base chain on the {'output' if pkt.outbound else 'input'} path"
    return _result("accept", last, "accepted" + (f" ({last})" if trail else ": no filtering chain applies"), trail)


def _base_chain(rs: Ruleset, c: Dict[str, Any], pkt: Packet) -> Tuple[str, str]:
    """One base chain's verdict: its rules', else its policy; reject is drop."""
    key = (c["family"], c["table"], c["name"])
    v, at = rs.run_chain(key, pkt, c.get("type") == "nat")
    if v in ("continue", "return"):
        policy = c.get("policy", "accept")
        v, at = policy, f"policy {policy} of {rs.where(key)}"
    if v == "reject":
        v = "drop"
    if c.get("_maybe") and v in ("drop", "rewrite"):
        v, at = UNKNOWN, f"{at} (only for packets arriving on {c['_maybe']}; the ingress interface is unknown)"
    return v, at


def _drop_text(at: str) -> str:
    return at if at.startswith(("reject", "policy")) else f"drop at {at}"


def _result(verdict: str, rule: str, why: str, trail: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"verdict": verdict, "rule": rule, "why": why, "trail": trail}


# -- iptables-save (legacy) -> the same object model --------------------------------------------------------

LEGACY_BASE = {("filter", "INPUT"): ("input", 0), ("mangle", "PREROUTING"): ("prerouting", -150),
               ("mangle", "INPUT"): ("input", -150), ("raw", "PREROUTING"): ("prerouting", -300),
               ("security", "INPUT"): ("input", 50), ("nat", "PREROUTING"): ("prerouting", -100),
               ("filter", "OUTPUT"): ("output", 0), ("mangle", "OUTPUT"): ("output", -150),
               ("raw", "OUTPUT"): ("output", -300), ("security", "OUTPUT"): ("output", 50),
               ("nat", "OUTPUT"): ("output", -100), ("mangle", "POSTROUTING"): ("postrouting", -150)}
TERMINAL = {"ACCEPT": "accept", "DROP": "drop", "REJECT": "reject", "RETURN": "return"}


def parse_iptables_save(text: str, family: str = "ip") -> List[Dict[str, Any]]:
    """`iptables-save` text -> nft-JSON-like objects (chain/rule), unknown options as opaque xt matches."""
    objs: List[Dict[str, Any]] = []
    table = None
    counts: Dict[Tuple[str, str], int] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("*"):
            table = line[1:]
            continue
        if line == "COMMIT":
            table = None
            continue
        if table is None:
            continue
        if line.startswith(":"):
            parts = line[1:].split()
            name, policy = parts[0], parts[1] if len(parts) > 1 else "-"
            c: Dict[str, Any] = {"family": family, "table": table, "name": name}
            if (table, name) in LEGACY_BASE:
                hook, prio = LEGACY_BASE[(table, name)]
                c.update(hook=hook, prio=prio, type="nat" if table == "nat" else "filter",
                         policy=policy.lower() if policy != "-" else "accept")
            objs.append({"chain": c})
            continue
        if line.startswith("-A "):
            try:
                argv = shlex.split(line)
            except ValueError:
                argv = line.split()
            chain = argv[1]
            counts[(table, chain)] = counts.get((table, chain), 0) + 1
            n = counts[(table, chain)]
            declared = {o["chain"]["name"] for o in objs if "chain" in o and o["chain"]["table"] == table}
            objs.append({"rule": {"family": family, "table": table, "chain": chain, "handle": n,
                                  "comment_ref": f"rule {n}", "text": line,
                                  "expr": _legacy_expr(argv[2:], family, declared)}})
    return objs


def _legacy_expr(argv: List[str], family: str, chains: Any = ()) -> List[Dict[str, Any]]:
    return _LegacyRule(family, chains).parse(argv)


def _match_expr(left: Dict[str, Any], right: Any, negate: bool) -> Dict[str, Any]:
    return {"match": {"op": "!=" if negate else "==", "left": left, "right": right}}


def _xt_match(name: str) -> Dict[str, Any]:
    return {"xt": {"type": "match", "name": name}}


def _ports(spec: str) -> Any:
    items: List[Any] = []
    for part in spec.split(","):
        if ":" in part:
            lo, hi = part.split(":", 1)
            items.append({"range": [int(lo or 0), int(hi or 65535)]})
        else:
            items.append(int(part))
    return items[0] if len(items) == 1 else {"set": items}


class _LegacyRule:
    """The options of one `-A CHAIN ...` line -> nft-JSON expressions, the verdict last. An option not
    modelled becomes an opaque xt match (the rule's outcome is then unknown)."""

    def __init__(self, family: str, chains: Any):
        self.ipf = "ip" if family == "ip" else "ip6"
        self.chains = chains
        self.expr: List[Dict[str, Any]] = []
        self.proto: Optional[str] = None
        self.verdict: Optional[Dict[str, Any]] = None

    def parse(self, argv: List[str]) -> List[Dict[str, Any]]:
        i, neg = 0, False
        while i < len(argv):
            a = argv[i]
            if a == "!":
                neg, i = True, i + 1
                continue
            val = argv[i + 1] if i + 1 < len(argv) else ""
            handler = self.OPTIONS.get(a, _LegacyRule._unknown)
            try:
                i = handler(self, a, val, neg, argv, i)
            except (ValueError, IndexError):
                self.expr.append(_xt_match(a))
                i += 2
            neg = False
        return self.expr + self._verdict()

    def _verdict(self) -> List[Dict[str, Any]]:
        if self.verdict is None:
            return []
        target = self.verdict.get("xt_target")
        if target is None:
            return [self.verdict]
        return [{"dnat": {}}] if target in ("DNAT", "REDIRECT") else [{"xt": {"type": "target", "name": target}}]

    # each option: read it (and its value) at argv[i], return where the next option starts
    def _protocol(self, a: str, val: str, neg: bool, argv: List[str], i: int) -> int:
        self.proto = _l4(val.lower())
        self.expr.append(_match_expr({"meta": {"key": "l4proto"}}, self.proto, neg))
        return i + 2

    def _address(self, a: str, val: str, neg: bool, argv: List[str], i: int) -> int:
        field = "saddr" if a in ("-s", "--source") else "daddr"
        nets = [{"prefix": {"addr": str(n.network_address), "len": n.prefixlen}}
                for n in (ipaddress.ip_network(x, strict=False) for x in val.split(","))]
        self.expr.append(_match_expr({"payload": {"protocol": self.ipf, "field": field}},
                                     nets[0] if len(nets) == 1 else {"set": nets}, neg))
        return i + 2

    def _interface(self, a: str, val: str, neg: bool, argv: List[str], i: int) -> int:
        key = "iifname" if a in ("-i", "--in-interface") else "oifname"
        self.expr.append(_match_expr({"meta": {"key": key}}, val.replace("+", "*"), neg))
        return i + 2

    def _port(self, a: str, val: str, neg: bool, argv: List[str], i: int) -> int:
        field = "dport" if "d" in a.lstrip("-")[:1] else "sport"
        if self.proto not in ("tcp", "udp"):
            self.expr.append(_xt_match(a))
        else:
            self.expr.append(_match_expr({"payload": {"protocol": self.proto, "field": field}}, _ports(val), neg))
        return i + 2

    def _module(self, a: str, val: str, neg: bool, argv: List[str], i: int) -> int:
        if val not in ("tcp", "udp", "multiport", "comment", "state", "conntrack"):
            self.expr.append(_xt_match(val))
            return i + 2
        i += 2
        if val == "comment" and i < len(argv) and argv[i] == "--comment":
            i += 2
        return i

    def _state(self, a: str, val: str, neg: bool, argv: List[str], i: int) -> int:
        self.expr.append(_match_expr({"ct": {"key": "state"}}, [s.lower() for s in val.split(",")], neg))
        return i + 2

    def _target(self, a: str, val: str, neg: bool, argv: List[str], i: int) -> int:
        if val in TERMINAL:
            self.verdict = {TERMINAL[val]: None}
        elif val == "LOG":
            self.verdict = None
            self.expr.append({"log": {}})
        elif val in self.chains:
            self.verdict = {"jump" if a in ("-j", "--jump") else "goto": {"target": val}}
        else:
            self.verdict = {"xt_target": val}
        i += 2
        while i < len(argv) and argv[i].startswith("--"):     # target options (--reject-with ...)
            i += 2
        return i

    def _unknown(self, a: str, val: str, neg: bool, argv: List[str], i: int) -> int:
        self.expr.append(_xt_match(a))
        i += 1
        while i < len(argv) and not argv[i].startswith("-") and argv[i] != "!":
            i += 1
        return i

    OPTIONS: Dict[str, Callable[..., int]] = {
        **dict.fromkeys(("-p", "--protocol"), _protocol),
        **dict.fromkeys(("-s", "--source", "-d", "--destination"), _address),
        **dict.fromkeys(("-i", "--in-interface", "-o", "--out-interface"), _interface),
        **dict.fromkeys(("--dport", "--destination-port", "--sport", "--source-port", "--dports", "--sports",
                         "--destination-ports", "--source-ports"), _port),
        "-m": _module,
        **dict.fromkeys(("--state", "--ctstate"), _state),
        **dict.fromkeys(("-j", "--jump", "-g", "--goto"), _target),
    }
