"""What one line of a perftest paste is: a command, a header field, an address, a result row, a message...

A line may hold several of these when a chat or a blog flattened the paste: it is cut at every place
where something perftest prints begins (a message of the catalogue, a header box, an address line, a
result table, a command), and each piece is classified on its own.
"""
from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from typing import AbstractSet, Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from rdmadoctor.logparse import catalog
from rdmadoctor.logparse.command import TOOL_RE, parse_command
from rdmadoctor.logparse.kept import CODE_FIELDS, CODE_NAMES
from rdmadoctor.knowledge.perftest import TOOLS

# Header box keys (perftest_parameters.c ctx_print_test_info, every generation) -> field names.
HEADER_KEYS = {
    "Dual-port": "dual_port", "Device": "device", "Number of qps": "num_qps", "Transport type": "transport",
    "Connection type": "connection", "Using SRQ": "srq", "PCIe relax order": "pcie_relax_order",
    "Lock-free": "lock_free", "ibv_wr* API": "wr_api", "Using DDP": "ddp",
    "Using Enhanced Reorder": "enhanced_reorder", "TX depth": "tx_depth", "Recv Post List": "recv_post_list",
    "Post List": "post_list", "RX depth": "rx_depth", "DCS active num streams": "dcs_active_streams",
    "DCS num streams": "dcs_streams", "Number of data encryption keys": "encryption_keys",
    "Block Size": "block_size", "CQ Moderation": "cq_moderation", "CQE Poll Batch": "cqe_poll_batch",
    "Mtu": "mtu", "Link type": "link_type", "Buffer size": "buffer_size", "GID index2": "gid_index2",
    "GID index": "gid_index", "Max inline data": "max_inline", "Outstand reads": "outstand_reads",
    "rdma_cm QPs": "rdma_cm_qps", "Use ROCm memory": "rocm_memory", "Use MUSA memory": "musa_memory",
    "Data ex. method": "data_ex_method", "TOS": "tos", "NUMA node": "numa_node",
}
_HEADER_RE = re.compile(
    r"(?<![\w-])(?P<key>" + "|".join(re.escape(k).replace(r"\ ", r"\s+") for k in HEADER_KEYS) +
    r")\s*:\s*(?P<value>[^\s:]+)", re.IGNORECASE)
# the first word of each key, lowercase: a line without any of them holds no header field
_HEADER_GATE = re.compile("|".join(sorted({k.lower().split()[0].split("-")[0].rstrip("*.") for k in HEADER_KEYS})))
_HEADER_LOOKUP = {re.sub(r"\s+", " ", k.lower()): v for k, v in HEADER_KEYS.items()}

TEST_NAME_RE = re.compile(
    r"(?<!\w)(?P<verb>RDMA_Write_imm|RDMA_Write|RDMA_Read|Send_imm|Send|Atomic)\s+"
    r"(?:(?P<atomic>CMP_AND_SWAP|FETCH_AND_ADD)\s+)?(?P<bidir>Bidirectional\s+)?(?:Post\s+List\s+)?"
    r"(?P<tst>BW|Latency)\s+(?:forwarding\s+)?(?:Multicast\s+)?Test\b", re.IGNORECASE)
# perftest's BASIC_ADDR_FMT " %s address: LID %#04x QPN %#06x PSN %#06x", then READ_FMT " OUT", RDMA_FMT " RKey ..
# VAddr", XRC_FMT/DC_FMT " SRQn" (src/perftest_communication.c ctx_print_pingpong_data()). Only LID is required after
# the role: a pasted line is often cut (after LID or QPN, a wrapped line) or redacted ("LID 0000 xxx", "QPN xxx"), and
# the GID line after it belongs to it all the same; a field that is not a number reads None (_hexint).
_ADDRESS_RE = re.compile(
    r"(?P<role>local|remote)\s+address\s*:\s*LID\s+(?P<lid>\S+)(?:\s+QPN\s+(?P<qpn>\S+))?(?:\s+PSN\s+(?P<psn>\S+))?"
    r"(?:\s+OUT\s+(?P<out>\S+))?(?:\s+RKey\s+(?P<rkey>\S+)(?:\s+VAddr\s+(?P<vaddr>\S+))?)?(?:\s+SRQn\s+(?P<srqn>\S+))?",
    re.IGNORECASE)
_GID_RE = re.compile(r"(?<![\w-])M?GID\s*:\s*(?P<gid>\d{1,3}(?::\d{1,3}){15})(?!\d)")
# perftest before its message rate column (OFED 1.5's, about 2012) ended the bandwidth titles at "BW average[MB/sec]"
_RESULT_HEADER_RE = re.compile(r"#bytes\s+(?:#sl\s+)?#iterations\s+(?P<cols>.*?(?:MsgRate\[Mpps\]|\[usec\]|\[cycles\]|"
                               r"tps\s+average|CPU_Util\[%\]|BW\s+average\[[^\]]*\])"
                               r"(?:\s+(?:\S+\[[^\]]*\]|CPU_Util\[%\]))*)",
                               re.IGNORECASE)
_UNIT_RE = re.compile(r"\[(MB/sec|MiB/sec|Gb/sec|usec|cycles)\]", re.IGNORECASE)
_BANNER_RE = re.compile(r"Waiting\s+for\s+client\s+(?:rdma_cm\s+QP\s+)?to\s+connect", re.IGNORECASE)
_BOX_RE = re.compile(r"^[\s\-=*_#~]*$")
_NUMBER = r"(?:-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|-?nan|-?inf)"
_NUMBERS_RE = re.compile(r"^\s*\d+(?:\s+" + _NUMBER + r"){2,}\s*$", re.IGNORECASE)
# Two integers alone: a bandwidth row cut after #bytes and #iterations (runs.py decides whether it is one)
_CUT_ROW_RE = re.compile(r"^\s*\d+\s+\d+\s*$")
_TRAILING_NUMBERS_RE = re.compile(r"(?<!\S)(\d+(?:\s+" + _NUMBER + r"){2,})\s*$", re.IGNORECASE)
_DASHES_RE = re.compile(r"-{20,}|\*{20,}")
_SIDE_WORDS = re.compile(r"[A-Za-z][\w.-]*|\d[\w.:-]*")
_SIDE_FILLER = frozenset("side log logs output out host node machine terminal console on the a b stdout stderr "
                         "run shell window tab pane box cmd command result results".split())

# Where something perftest prints begins: a line is cut there when it holds several things.
_ANCHOR_PARTS = (r"-{20,}", r"\*{12,}", r"\*\s*Waiting\s+for\s+client", r"(?:local|remote)\s+address\s*:",
                 r"(?<![\w-])M?GID\s*:\s*\d", r"#bytes\s", TEST_NAME_RE.pattern, r"Dual-port\s*:", TOOL_RE.pattern)
_ANCHOR_RE = re.compile("|".join(_ANCHOR_PARTS), re.IGNORECASE)
# Each part alone, and text every match of it holds (in the line, or in the line lowercased): a line where only one
# part can match is searched for that part alone, which finds the same (an IGNORECASE alternation is slow).
_ANCHOR_ALONE = tuple(re.compile(part, re.IGNORECASE) for part in _ANCHOR_PARTS)
_TOOLS_LOWER = tuple(tool.lower() for tool in TOOLS)
_ANCHOR_NEEDS = (
    lambda line, low: "-" * 20 in line, lambda line, low: "*" * 12 in line,
    lambda line, low: "waiting" in low and "*" in line, lambda line, low: "address" in low,
    lambda line, low: "gid" in low, lambda line, low: "#bytes" in low, lambda line, low: "test" in low,
    lambda line, low: "dual-port" in low, lambda line, low: any(tool in low for tool in _TOOLS_LOWER))


def anchor_starts(line: str) -> List[int]:
    """Where something perftest prints begins in the line (_ANCHOR_RE's matches)."""
    low = line.lower()
    possible = [i for i, needs in enumerate(_ANCHOR_NEEDS) if needs(line, low)]
    if not possible:
        return []
    anchor = _ANCHOR_ALONE[possible[0]] if len(possible) == 1 else _ANCHOR_RE
    return [m.start() for m in anchor.finditer(line)]


# Words of everything structural perftest prints (header keys, address and table titles, banners, tools)
# and of side labels: with the catalogue's keywords they decide whether a line can matter at all.
STRUCTURAL_WORDS = frozenset(
    {w for key in HEADER_KEYS for w in key.lower().replace("*", " ").replace(".", " ").replace("-", " ").split()}
    | {"local", "remote", "address", "gid", "mgid", "bytes", "iterations", "test", "bw", "latency", "waiting",
       "client", "server", "rdma_write", "rdma_write_imm", "rdma_read", "send", "send_imm", "atomic", "dual",
       "port", "version"}
    | set(TOOLS))

_BACKGROUND_RE = re.compile(r"^\s*(?:\d?>\S*\s*)*&(?!&)")     # "cmd &", "cmd > out 2>&1 &"
# The shell's job-control report ("[1]+  Done   ib_write_bw -d mlx5_1"): not a new command.
_JOB_RE = re.compile(r"^\s*\[\d+\][+-]?\s+(?:Done|Exit\s+\d+|Terminated|Killed|Stopped|Running|Segmentation fault|"
                     r"Aborted)\b", re.IGNORECASE)

# The structural patterns, for the prefilter (logparse/prefilter.py): a line none of them (nor a catalogue message)
# matches holds nothing this module reads but a result row.
ANCHOR_RE, HEADER_RE, BANNER_RE, ADDRESS_RE, GID_RE, RESULT_HEADER_RE = (
    _ANCHOR_RE, _HEADER_RE, _BANNER_RE, _ADDRESS_RE, _GID_RE, _RESULT_HEADER_RE)
SIDE_WORDS_RE = r"server|client"            # side_label() reads no line without one of them
NUMBERS_RE = _NUMBERS_RE
CUT_ROW_RE = _CUT_ROW_RE


class Item(NamedTuple):
    """One thing a line holds. A named tuple: built for every interesting line, and a frozen dataclass
    costs 5x more to build."""
    kind: str       # command | side_label | banner | box | test_name | header | address | gid |
                    # result_header | numbers | cut_row | message | text
    data: Any
    column: int = 0


def _address_item(m: "re.Match[str]", column: int) -> "Item":
    d = m.groupdict()
    return Item("address", {"role": d["role"].lower(), "lid": _hexint(d["lid"]), "qpn": _hexint(d["qpn"]),
                            "psn": _hexint(d["psn"]), "out_reads": _hexint(d["out"]), "rkey": _hexint(d["rkey"]),
                            "vaddr": _hexint(d["vaddr"])}, column)


def _hexint(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        return int(text, 16)
    except ValueError:
        return None


@lru_cache(maxsize=4096)        # a host's GIDs repeat in every run; ipaddress is slow
def perftest_gid(decimal_bytes: str) -> Optional[str]:
    """perftest prints a GID as 16 decimal bytes ('...:255:255:192:00:02:01'): -> '::ffff:192.0.2.1'."""
    parts = decimal_bytes.split(":")
    if len(parts) != 16:
        return None
    values = [int(p) for p in parts]
    if any(v > 255 for v in values):
        return None
    return canonical_gid(ipaddress.IPv6Address(bytes(values)))


def _spans(line: str, match: catalog.Match, verified: bool) -> Optional[tuple]:
    """A catalogue match as positions in its line (its pattern, its span, its fields' spans; None for the fields of a
    pattern that tells digits apart, `verified`: they are taken from its match in each line)."""
    for found in match.pattern.regex.finditer(line):
        if found.start() == match.start and found.end() == match.end:
            groups = None if verified else tuple(
                (name, found.start(name), found.end(name)) for name, value in found.groupdict().items()
                if value is not None)
            return match.pattern, match.start, match.end, groups
    return None


def _match(line: str, spans: tuple, fresh: Dict[Tuple[int, int], "re.Match[str]"]) -> catalog.Match:
    pattern, start, end, groups = spans
    if groups is None:
        return catalog.matched(pattern, fresh[id(pattern), start])      # (its span: the plan's, verified)
    return catalog.Match(pattern, start, end, line[start:end], {name: line[a:b] for name, a, b in groups})


class _Checks(NamedTuple):
    """What a line of a known shape must show for its shape's plan to read it (LineClassifier._plan)."""
    # (start, end, text) of each word with digits that decides something (a keyword, a header key): the same text
    pinned: Tuple[Tuple[int, int, str], ...]
    # (index, pattern, spans) of each pattern that tells digits apart and matched: the same spans exactly
    verify: Tuple[Tuple[int, catalog.Pattern, Tuple[Tuple[int, int], ...]], ...]
    # (index, pattern) of each that tells digits apart and found nothing: nothing again
    recheck: Tuple[Tuple[int, catalog.Pattern], ...]


_NOTHING_FRESH: Dict[Tuple[int, int], "re.Match[str]"] = {}
_ASCII_WORD = re.compile(r"[A-Za-z0-9_]+")     # a word as catalog.line_words splits an ASCII line


def _replayable(line: str, checks: _Checks, allowed: Optional[AbstractSet[int]]
                ) -> Optional[Dict[Tuple[int, int], "re.Match[str]"]]:
    """None when the line does not read as its shape's plan says; else the matches of the patterns that tell digits
    apart, by (id of the pattern, start), for the fields they bind in this line."""
    for start, end, word in checks.pinned:
        if line[start:end] != word:
            return None
    for i, p in checks.recheck:
        if (allowed is None or i in allowed) and p.regex.search(line):
            return None
    if not checks.verify:
        return _NOTHING_FRESH
    fresh = {}
    for i, p, spans in checks.verify:
        if allowed is not None and i not in allowed:
            return None          # (the prefilter rules out a pattern only where it cannot match: not expected)
        found = [m for m in p.regex.finditer(line) if m.end() > m.start()]
        if tuple((m.start(), m.end()) for m in found) != spans:
            return None
        for m in found:
            fresh[id(p), m.start()] = m
    return fresh


def _single_message(plan: tuple) -> Optional[tuple]:
    """(pattern, start, codes, checks) of a plan that reads each line of its shape as one message and plain text:
    where in the line the fields that make the message's kind are (kept.CODE_FIELDS), or None when they are taken
    from the line's own match of the pattern (one that tells digits apart: _Checks.verify), and the plan's _Checks.
    None for any other plan, and for a message that sets a setting (an env field: streams._Source._route)."""
    if plan is _UNSAFE or plan[0] != "items" or plan[2]:
        return None
    messages = [part for part in plan[1] if part[0] == "message"]
    if len(messages) != 1:
        return None
    pattern, start, _end, groups = messages[0][1]
    if groups is None:
        return pattern, start, None, plan[-1]
    if any(name == "env" for name, _a, _b in groups):
        return None
    return pattern, start, tuple(group for group in groups if group[0] in CODE_NAMES), plan[-1]


def _lacks_needle(low: str, needles: Tuple[str, ...]) -> bool:
    """Whether `low` (a lowercase ASCII line) lacks one of a pattern's needles that holds no digit."""
    return any(n not in low for n in needles if not _has_digit(n))


def canonical_gid(address: "ipaddress.IPv6Address") -> str:
    """IPv6 text, with an IPv4-mapped GID (RoCE v2 over IPv4) written ::ffff:a.b.c.d on every Python."""
    mapped = address.ipv4_mapped
    return f"::ffff:{mapped}" if mapped else str(address)


def side_label(text: str) -> Optional[str]:
    """'===== SERVER =====', '[client]', 'Server side (node1):' -> 'server' / 'client'."""
    if len(text) > 80:
        return None
    words = _SIDE_WORDS.findall(text)
    sides = {w.lower() for w in words} & {"server", "client"}
    if len(sides) != 1:
        return None
    for w in words:
        lw = w.lower()
        if lw in ("server", "client") or lw in _SIDE_FILLER or any(c.isdigit() for c in lw) or "." in lw:
            continue
        if len(words) <= 3 and len(lw) <= 12:
            continue                     # 'Server node1', 'client (gpu-b)'
        return None
    return sides.pop()


def _numbers(stripped: str) -> Optional[Tuple[Item, ...]]:
    """A line of numbers only: a result row, or a bandwidth row cut after #bytes and #iterations."""
    if _NUMBERS_RE.match(stripped):
        return (Item("numbers", tuple(stripped.split())),)
    if _CUT_ROW_RE.match(stripped):
        return (Item("cut_row", tuple(stripped.split())),)
    return None


# Lines of one shape: the same text but for the digits it holds (a log's lines repeat with other numbers: pids,
# addresses, counters, sizes). The classifier reuses what it found in one line of a shape for the next when that is
# certain (see LineClassifier._plan).
_SHAPE = str.maketrans("123456789", "000000000")
_SHAPE_BYTES = bytes.maketrans(b"123456789", b"000000000")


def line_shape(line: str) -> bytes:
    """A line's shape, made from its UTF-8 bytes, where it takes a twentieth of the time: an ASCII digit's byte is
    never part of another character's, so two lines have one shape as bytes exactly when they have one as text."""
    return line.encode("utf-8", "surrogatepass").translate(_SHAPE_BYTES)


def _has_digit(word: str) -> bool:
    return word.translate(_SHAPE) != word or "0" in word


@lru_cache(maxsize=1)
def _anchors_blind() -> bool:
    return catalog.digit_blind(_ANCHOR_RE.pattern)


# words with a digit that decide something (a header key, a catalogue keyword), as their shape: a line holding a word of
# that shape is classified on its own
_DIGIT_WORDS = frozenset(w.translate(_SHAPE) for w in STRUCTURAL_WORDS if _has_digit(w))
_UNSAFE = ("unsafe",)


class LineClassifier:
    """Classifies lines; results are cached because perftest logs repeat the same lines a lot, and so is how a line of
    each shape (its digits aside) was read."""

    CACHE_LIMIT = 4096     # lines (with what they hold: a few hundred bytes to a few kB each)
    SHAPES_LIMIT = 20000   # shapes (how each reads: a few spans, a hundred bytes or so each)

    def __init__(self):
        self.catalog = catalog.load()
        self._cache: Dict[str, Tuple[Item, ...]] = {}
        self._shapes: Dict[bytes, tuple] = {}
        self._singles: Dict[bytes, Optional[tuple]] = {}    # what repeated_message reads in each shape
        self._digit_words = _DIGIT_WORDS | {w.translate(_SHAPE) for w in self.catalog.keywords if _has_digit(w)}
        self.flattened = 0

    def classify(self, line: str, allowed: Optional[AbstractSet[int]] = None) -> Tuple[Item, ...]:
        """What the line holds. `allowed`: the indexes of the only catalogue patterns that can match in it (the
        prefilter's answer), when known; the answer is the same without."""
        cached = self._cache.get(line)
        if cached is not None:
            return cached
        stripped = line.strip()
        if not stripped:
            return ()
        varying = self._varying(stripped)
        if varying is not None:
            return varying
        shape = line_shape(line)
        plan = self._shapes.get(shape)
        fresh = None if plan is None or plan is _UNSAFE else _replayable(line, plan[-1], allowed)
        if plan is None:
            items = self._read(line, stripped, allowed, shape)
        elif fresh is None:
            items = self._read(line, stripped, allowed, None)
        else:
            items = self._replay(line, plan, fresh)
            if plan[0] == "none" or (plan[0] == "items" and not plan[2]):
                # as cheap to read again as to look up: kept out of the cache (its memory); a flattened line is kept,
                # for the same line again counts as flattened once
                return items
        if len(self._cache) < self.CACHE_LIMIT:
            self._cache[line] = items
        return items

    def repeated_message(self, line: str, allowed: AbstractSet[int], wanted: Callable[[catalog.Pattern], bool]
                         ) -> Optional[Tuple[catalog.Pattern, Dict[str, str]]]:
        """The pattern of the one message the line holds, beside plain text, and the fields that make its kind (a
        code: kept.CODE_FIELDS), when its shape's plan says so with certainty, the message sets no setting and
        `wanted(pattern)` (asked before the line is checked against the plan); None when only classify can say. The
        message is not made: a line its run leaves out (streams._Source._repeat_left_out) costs only this."""
        shape = line_shape(line)
        single = self._singles.get(shape, _UNSAFE)
        if single is _UNSAFE:
            plan = self._shapes.get(shape)
            if plan is None:
                return None            # (not read yet: classify reads it and makes the plan)
            single = self._singles[shape] = _single_message(plan)
        if single is None or not wanted(single[0]):
            return None
        if self._varying(line.strip()) is not None:
            return None
        pattern, start, codes, checks = single
        fresh = _replayable(line, checks, allowed)
        if fresh is None:
            return None
        if codes is not None:
            return pattern, {name: line[a:b] for name, a, b in codes}
        fields = fresh[id(pattern), start].groupdict()
        if fields.get("env") is not None:
            return None
        return pattern, {name: fields[name] for name in CODE_FIELDS if fields.get(name) is not None}

    def _read(self, line: str, stripped: str, allowed: Optional[AbstractSet[int]], shape: Optional[bytes]):
        """The line read through; `shape`: its shape, when how it was read is to be kept for the shape."""
        words = catalog.line_words(line)
        matches: List[catalog.Match] = []
        if STRUCTURAL_WORDS.isdisjoint(words) and not _BOX_RE.match(stripped):
            # Only a catalogue message can make this line matter: a line of another program that shares
            # a word with one ("kernel", "port", "failed") is dropped here, before the structural searches.
            if not self.catalog.keywords.isdisjoint(words):
                matches = self.catalog.find(line, words, allowed)
            items = tuple(self._classify(line, words, matches)) if matches else ()
            structural = False
        else:
            matches = self.catalog.find(line, words, allowed)
            items = tuple(self._classify(line, words, matches))
            structural = True
        if shape is not None and len(self._shapes) < self.SHAPES_LIMIT:
            self._shapes[shape] = self._plan(line, words, matches, items, structural)
        return items

    def _plan(self, line: str, words, matches: List[catalog.Match], items: Tuple[Item, ...], structural: bool):
        """How every line of this one's shape reads, when that is certain: the places where the line is cut do not
        depend on its digits, the same words decide (a word with digits that decides is pinned: each line of the shape
        must hold the same), and the catalogue's matches are the same: a pattern that tells digits apart
        (catalog.digit_blind) is tried again on each line of the shape and must match where it matched here, and
        nowhere else (the last element of the plan: _Checks); any other is blind. The messages found are kept as their
        spans; the other pieces are read again, unless the line is only messages and plain text."""
        checks = self._checks(line, words) if _anchors_blind() else None
        if checks is None:
            return _UNSAFE
        verified = {id(p) for _, p, _ in checks.verify}
        spans = tuple(_spans(line, m, id(m.pattern) in verified) for m in matches)
        if any(s is None for s in spans):
            return _UNSAFE
        if not items:
            return ("none", checks) if not structural else ("read", spans, structural, checks)
        template = []
        for item in items:
            if item.kind == "message":
                template.append(("message", next(s for m, s in zip(matches, spans) if m is item.data), item.column))
            elif item.kind == "text" and not any(tool in item.data for tool in TOOLS):
                # plain text: no piece of perftest's structure (none of which tells digits apart) in it, and no tool
                # name (a command's options do; a name has no digit, so a line of this shape holds one only where
                # this one does)
                offset = line.find(item.data, item.column)
                template.append(("text", offset, offset + len(item.data), item.column))
            else:
                return ("read", spans, structural, checks)
        flattened = sum(1 for item in items if item.kind != "text") > 1
        return ("items", tuple(template), flattened, checks)

    def _checks(self, line: str, words) -> Optional[_Checks]:
        """What each line of this one's shape must show to read as it does (None: no line can be trusted to)."""
        pinned: Tuple[Tuple[int, int, str], ...] = ()
        if any(w.translate(_SHAPE) in self._digit_words for w in words if _has_digit(w)):
            if not line.isascii():
                return None      # (a non-ASCII letter's lowercase may be longer: the words' places are unsure)
            pinned = tuple((m.start(), m.end(), m.group()) for m in _ASCII_WORD.finditer(line)
                           if _has_digit(m.group()) and m.group().lower().translate(_SHAPE) in self._digit_words)
        verify, recheck = [], []
        # a needle without a digit that an ASCII line lacks, no line of its shape holds (they differ only in digits):
        # the pattern cannot match any of them, and is neither compiled nor searched again
        low = line.lower() if line.isascii() else None
        # (index, pattern): the prefilter names a line's possible patterns by index, and one it rules out for a line
        # need not be searched in it
        for i, p in self.catalog.numbered(words):
            if not p.digit_blind and not (low is not None and _lacks_needle(low, p.needles)):
                found = tuple((m.start(), m.end()) for m in p.regex.finditer(line) if m.end() > m.start())
                if found:
                    verify.append((i, p, found))
                else:
                    recheck.append((i, p))
        return _Checks(pinned, tuple(verify), tuple(recheck))

    def _replay(self, line: str, plan: tuple, fresh: Dict[Tuple[int, int], "re.Match[str]"]) -> Tuple[Item, ...]:
        kind = plan[0]
        if kind == "none":
            return ()
        if kind == "items":
            out = []
            for part in plan[1]:
                if part[0] == "message":
                    out.append(Item("message", _match(line, part[1], fresh), part[2]))
                else:
                    out.append(Item("text", line[part[1]:part[2]], part[3]))
            if plan[2]:
                self.flattened += 1
            return tuple(out)
        matches = [_match(line, spans, fresh) for spans in plan[1]]
        if not matches and not plan[2]:
            return ()
        return tuple(self._classify(line, None, matches))

    @classmethod
    def _varying(cls, stripped: str) -> Optional[Tuple[Item, ...]]:
        """A line of the kinds that vary from run to run (result rows, addresses, GIDs), recognised by its start
        without the catalogue: not worth caching."""
        first = stripped[0]
        if first.isdigit():
            return _numbers(stripped)
        if first in "lrLRgG":
            return cls._single_structural(stripped)
        return None

    @staticmethod
    def _single_structural(stripped: str) -> Optional[Tuple[Item, ...]]:
        """An address or GID line that holds nothing else."""
        m = _ADDRESS_RE.match(stripped)
        if m and m.end() == len(stripped):
            return (_address_item(m, 0),)
        m = _GID_RE.match(stripped)
        if m and m.end() == len(stripped):
            return (Item("gid", perftest_gid(m.group("gid")) or m.group("gid")),)
        return None

    def _classify(self, line: str, words, matches: Optional[List[catalog.Match]] = None,
                  allowed: Optional[AbstractSet[int]] = None) -> List[Item]:
        stripped = line.strip()
        if _BOX_RE.match(stripped):
            return [Item("box", None)] if _DASHES_RE.search(stripped) else []
        if _JOB_RE.match(stripped):
            return []
        if matches is None:
            matches = self.catalog.find(line, words, allowed)
        starts = {m.start for m in matches}
        starts.update(anchor_starts(line))
        starts.discard(0)
        if not starts and not matches:          # one piece, no message: most noise lines
            items = self._structural(line, 0, allow_text=True)
            if len(items) > 1:
                self.flattened += 1
            return items
        cuts = [0] + sorted(starts) + [len(line)]
        by_start = {m.start: m for m in matches}
        items: List[Item] = []
        for begin, end in zip(cuts, cuts[1:]):
            piece = line[begin:end]
            if not piece.strip():
                continue
            message = by_start.get(begin)
            if message is not None:
                items.append(Item("message", message, begin))
                items.extend(self._after_message(line[message.end:end], message.end))
            else:
                items.extend(self._structural(piece, begin, allow_text=True))
        if len([i for i in items if i.kind != "text"]) > 1:
            self.flattened += 1
        return items

    def _after_message(self, rest: str, column: int) -> List[Item]:
        """What the piece of a line holds after its message (`rest`, from `column` on)."""
        if not rest.strip():
            return []
        after = self._structural(rest, column, allow_text=False)
        if not after:
            # the rest of a sentence the pattern does not cover ("CPU Frequency is not max."), then the
            # result rows a flattened paste put after it
            rows = _TRAILING_NUMBERS_RE.search(rest)
            if rows:
                after = [Item("numbers", tuple(rows.group(1).split()), column + rows.start(1))]
        return after

    def _structural(self, piece: str, column: int, allow_text: bool) -> List[Item]:
        text = piece.strip()
        if _BOX_RE.match(text):
            return [Item("box", None, column)] if _DASHES_RE.search(text) else []
        # Each search below is gated by a word its pattern cannot match without: most lines that reach
        # here are noise around a catalogue keyword (a kernel log's "port", "device"), and the searches
        # were 80% of the time spent on them.
        low = text.lower()
        if "waiting" in low and _BANNER_RE.search(text):
            return [Item("banner", "rdma_cm" if "rdma_cm" in low else "tcp", column)]
        m = _ADDRESS_RE.search(text) if "address" in low else None
        if m:
            return [_address_item(m, column)]
        m = _GID_RE.search(text) if "gid" in low else None
        if m:
            return [Item("gid", perftest_gid(m.group("gid")) or m.group("gid"), column)]
        m = _RESULT_HEADER_RE.search(text) if "#bytes" in low else None
        if m:
            return _result_header(text, m, column)
        m = TEST_NAME_RE.search(text) if "test" in low else None
        if m:
            return [Item("test_name", {"verb": m.group("verb"), "tst": m.group("tst"),
                                       "atomic": m.group("atomic"), "bidirectional": bool(m.group("bidir")),
                                       "text": m.group(0)}, column)]
        header = _header_item(text, low, column)
        if header is not None:
            return [header]
        command = _command_item(text, column)
        if command is not None:
            return [command]
        return _rows_side_or_text(text, low, column, allow_text)


def _rows_side_or_text(text: str, low: str, column: int, allow_text: bool) -> List[Item]:
    """A piece with none of perftest's structure: result rows, a side label ("Server:"), else plain text."""
    if _NUMBERS_RE.match(text):
        return [Item("numbers", tuple(text.split()), column)]
    side = side_label(text) if ("server" in low or "client" in low) else None
    if side:
        return [Item("side_label", {"side": side, "label": text.strip(" =#*-[]<>|:_~")}, column)]
    return [Item("text", text, column)] if allow_text else []


def _header_item(text: str, low: str, column: int) -> Optional[Item]:
    """The `key : value` pairs of perftest's header box on the line (the keys it knows, by their canonical name)."""
    if ":" not in text or not _HEADER_GATE.search(low):
        return None
    if catalog.GLOG_HEAD.match(text):
        # another program's log line (brpc's "RDMA device: mlx5_0", "RDMA GID Index: 3"): perftest never logs so
        return None
    pairs = [(_HEADER_LOOKUP.get(re.sub(r"\s+", " ", h.group("key").lower())), h.group("value"))
             for h in _HEADER_RE.finditer(text)]
    return Item("header", tuple(p for p in pairs if p[0]), column) if pairs else None


def _result_header(text: str, m: re.Match, column: int) -> List[Item]:
    """A result table's titles (`m`), and the rows that follow them on the line of a flattened table."""
    unit = _UNIT_RE.search(m.group(0))
    kind = "bw" if "BW" in m.group(0) or "MsgRate" in m.group(0) else (
        "lat_dur" if re.search(r"tps\s+average", text, re.I) else "lat")
    items = [Item("result_header", {"kind": kind, "unit": unit.group(1) if unit else None,
                                    "per_port": "Port1" in m.group(0)}, column)]
    tail = text[m.end():].strip()
    if tail and _NUMBERS_RE.match(tail):     # a flattened table: the rows follow the titles
        items.append(Item("numbers", tuple(tail.split()), column + m.end()))
    return items


def _command_item(text: str, column: int) -> Optional[Item]:
    """A perftest command line, with the prompt before it and a trailing `&`."""
    command = parse_command(text) if ("ib_" in text or "raw_ethernet" in text) else None
    if command is None:
        return None
    tool, argv, options, host, end = command
    prefix = text[:TOOL_RE.search(text).start()]
    return Item("command", {"tool": tool, "argv": argv, "options": options, "host": host,
                            "text": text[TOOL_RE.search(text).start():end].strip(),
                            "prompt_side": side_label(prefix) if prefix.strip() else None,
                            "background": bool(_BACKGROUND_RE.search(text[end:]))}, column)
