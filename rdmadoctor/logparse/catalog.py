"""The message catalogue: recognises every line perftest (and libibverbs/librdmacm) can print.

Two sources, one form (both in rdmadoctor/knowledge/messages/):
  <producer>.toml       curated entries: ids, typed fields and side hints (perftest.toml: perftest,
                        libibverbs and librdmacm as perftest shows them);
  perftest_strings.tsv  every message string of perftest 6.29, compiled from its C format, so that an
                        error no curated entry covers is still recognised (with its file and function).
A line may hold several messages (a chat or a blog flattened them into one line): `find` returns all
of them, in order, without overlaps; curated entries win over generated ones, longer over shorter, and a
producer's catch-all (`fallback = true`: any line of its error form) loses to all of them.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import AbstractSet, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from rdmadoctor.logparse.decorations import ISO_TIME, SYSLOG_TIME

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MESSAGES = Path(__file__).resolve().parent.parent / "knowledge" / "messages"

_PLACEHOLDER = re.compile(r"\{(\w+)(?::(\w+))?\}")
_TYPES = {
    None: r"\S+",
    "word": r"\S+",
    "int": r"-?\d+",
    "hex": r"(?:0x)?[0-9a-fA-F]+",
    "num": r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?",
    "text": r".+?",
    "rest": r".*",
}
_LEADING_TEXT = r"\S+(?:[ \t]+\S+){0,5}?"   # a leading {x:text}: a few words, not the whole flattened line
_WORD = re.compile(r"[a-z0-9_]+")
# a syslog/journal program head at a line's start, with its time (the times decorations.py knows) and host when the
# input's decorations did not take them off (a single line, a mixed paste), and perftest's own programs, whose
# lines keep their generated strings under such a head
_PROGRAM_HEAD = re.compile(r"[ \t]{0,8}(?:(?:" + SYSLOG_TIME.decode() + "|" + ISO_TIME.decode() + r") [\w.-]{1,64} )?"
                           r"([A-Za-z_][\w.@-]{0,63})\[\d{1,9}\]: ")
# glog's line head ("<I|W|E|F><mmdd> <hh:mm:ss.uuuuuu> <thread id> <file>:<line>] ", google/glog LogMessage::Init(),
# kept by brpc's butil, which may add a bthread id after the thread id): C++ services log through it, perftest never
# does, so nothing after it is perftest's (brpc's "RDMA device: mlx5_bond_0" is not perftest's header box)
GLOG_HEAD = re.compile(r"[ \t]{0,8}[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+(?: \d+)? [^\s\]]{1,256}:\d+\] ")
_PERFTEST_PROGRAM = re.compile(r"ib_(?:send|write|read|atomic)_(?:bw|lat)|raw_ethernet_\w+", re.IGNORECASE)
_STOPWORDS = frozenset("the and for with from not was has but are can any all this that than into".split())


@dataclass(frozen=True)
class Pattern:
    id: str
    kind: str                        # error | warning | notice
    phase: str
    source: str                      # the regular expression, compiled on first use
    keyword: str                     # a word every matching line contains (prefilter)
    literal_length: int              # how much fixed text it matches: longer wins an overlap
    curated: bool
    side: Optional[str] = None
    gen: Optional[str] = None
    origin: Optional[str] = None     # "perftest_resources.c:destroy_ctx" for generated entries
    producer: str = "perftest"       # the catalogue it comes from (knowledge/messages/<producer>.toml)
    result: bool = False             # the line reports a measurement: the run completed (`result = true`)
    digit_blind: bool = False        # matches the same spans in lines that differ only in their digits (digit_blind())
    needles: Tuple[str, ...] = ()    # text (lowercase ASCII) every line it matches holds (needles())
    fallback: bool = False           # a producer's catch-all (any "NCCL WARN" line): loses every overlap

    @cached_property
    def regex(self) -> "re.Pattern[str]":
        # compiled lazily: most of the ~1000 patterns never meet a line with their keyword
        return re.compile(self.source, re.IGNORECASE)


_DIGITS = range(48, 58)
# which character categories hold every digit (True) or none (False)
_CATEGORY_DIGITS = {"CATEGORY_DIGIT": True, "CATEGORY_NOT_DIGIT": False, "CATEGORY_WORD": True,
                    "CATEGORY_NOT_WORD": False, "CATEGORY_SPACE": False, "CATEGORY_NOT_SPACE": True,
                    "CATEGORY_LINEBREAK": False, "CATEGORY_NOT_LINEBREAK": True}


def digit_blind(source: str, flags: int = re.IGNORECASE) -> bool:
    """True when nothing in the pattern tells one digit from another (no digit written in it, no class that holds some
    digits but not all, no back-reference): the regular expression engine then takes the same steps on two texts that
    differ only in their digits. False when unsure."""
    try:
        return _blind(_sre_parse(source, flags))
    except Exception:       # noqa: BLE001 - a parser of another Python: assume the pattern sees digits
        return False


def _sre_parse(source: str, flags: int):
    """Python's own parse of a regular expression (re._parser since 3.11, sre_parse before)."""
    import importlib
    try:
        parser = importlib.import_module("re._parser")
    except ImportError:                         # pragma: no cover - Python 3.9 and 3.10
        parser = importlib.import_module("sre_parse")
    return parser.parse(source, flags)


def needles(source: str, flags: int = re.IGNORECASE) -> Tuple[str, ...]:
    """The longest runs of plain ASCII text (lowercase, 3 characters or more, at most 3 of them) that every match of
    the pattern holds: its literal text outside optional parts, alternatives and assertions. A line (ASCII,
    lowercased) without one of them cannot match, and the pattern is not even compiled for it."""
    runs: List[str] = []
    try:
        _literal_runs(_sre_parse(source, flags), runs)
    except Exception:       # noqa: BLE001 - a parser of another Python: no needles, the pattern is always tried
        return ()
    # ties by text: the same three on every start, whatever the set's order
    found = sorted({r for r in runs if len(r) >= 3}, key=lambda r: (-len(r), r))
    return tuple(found[:3])


def _literal_runs(tree, runs: List[str]) -> None:
    run: List[str] = []

    def close() -> None:
        if run:
            runs.append("".join(run).lower())
            run.clear()

    for op, av in tree:
        name = str(op)
        if name == "LITERAL" and av < 128:
            run.append(chr(av))
            continue
        close()
        if name == "SUBPATTERN":
            _literal_runs(av[-1], runs)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") and av[0] >= 1:
            _literal_runs(av[2], runs)
        elif name == "ATOMIC_GROUP":
            _literal_runs(av, runs)
    close()


def _blind(tree) -> bool:
    for op, av in tree:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL"):
            blind = av not in _DIGITS
        elif name == "IN":
            blind = _class_blind(av)
        elif name == "SUBPATTERN":
            blind = _blind(av[-1])
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            blind = _blind(av[2])
        elif name == "BRANCH":
            blind = all(_blind(branch) for branch in av[1])
        elif name in ("ASSERT", "ASSERT_NOT"):
            blind = _blind(av[1])
        elif name == "ATOMIC_GROUP":
            blind = _blind(av)
        else:
            blind = name in ("ANY", "AT")          # a back-reference, a conditional group: not blind
        if not blind:
            return False
    return True


def _class_blind(items) -> bool:
    held = set()
    for op, av in items:
        name = str(op)
        if name == "LITERAL" and av in _DIGITS:
            held.add(av)
        elif name == "RANGE":
            held.update(d for d in _DIGITS if av[0] <= d <= av[1])
        elif name == "CATEGORY":
            every = _CATEGORY_DIGITS.get(str(av))
            if every is None:
                return False
            if every:
                held.update(_DIGITS)
        elif name not in ("LITERAL", "NEGATE"):
            return False
    return len(held) in (0, len(_DIGITS))


@dataclass
class Match:
    pattern: Pattern
    start: int
    end: int
    text: str
    fields: Dict[str, str] = field(default_factory=dict)


def matched(pattern: Pattern, found: "re.Match[str]") -> Match:
    """A pattern's match in a line, as the catalogue gives it: its span, its text and the fields it bound."""
    return Match(pattern, found.start(), found.end(), found.group(0),
                 {k: v for k, v in found.groupdict().items() if v is not None})


def _literal_regex(literal: str) -> str:
    """Literal text, tolerant of how pastes mangle it: any blanks between words, optional apostrophes,
    and an optional blank around punctuation."""
    out = []
    for token in re.findall(r"\s+|[A-Za-z0-9_]+|.", literal):
        if token.isspace():
            out.append(r"\s*")
        elif token == "'":
            out.append(r"['’]?")
        elif token[0].isalnum() or token[0] == "_":
            out.append(re.escape(token))
        else:
            out.append(re.escape(token))
    source = "".join(out)
    # between two words a blank is required; elsewhere optional
    return re.sub(r"(?<=[A-Za-z0-9_])\\s\*(?=[A-Za-z0-9_])", r"\\s+", source)


def compile_template(template: str) -> str:
    parts, pos = [], 0
    template = template.strip()
    for ph in _PLACEHOLDER.finditer(template):
        parts.append(_literal_regex(template[pos:ph.start()]))
        name, kind = ph.group(1), ph.group(2)
        body = _LEADING_TEXT if (kind == "text" and ph.start() == 0) else _TYPES[kind]
        if kind in (None, "word") and template[ph.end():ph.end() + 1] in ("'", '"', "\u2019"):
            body = r"[^\s'\u2019\"]+"          # '{driver}': the token stops at its closing quote
        parts.append(f"(?P<{name}>{body})")
        pos = ph.end()
    parts.append(_literal_regex(template[pos:]))
    return "".join(parts)


_C_CONVERSION = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L)?([diouxXeEfgGcspn%])"
                           r"|\"\s*PRI[uxd]64\s*\"")


def compile_c_format(literal: str) -> List[str]:
    """A C string literal (as written in perftest's source) -> one regex per printed line."""
    body = literal.strip()
    if body.startswith('"') and body.endswith('"'):
        body = body[1:-1]
    body = (body.replace('\\"', '"').replace("\\t", " ").replace("\\x1b", "\x1b")
            .replace('" "', ""))
    body = re.sub(r"\x1b\[[0-9;]*m", "", body)
    regexes = [_line_regex(line) for line in body.split("\\n") if line.strip()]
    return [r for r in regexes if r is not None]


_CONVERSION_REGEX = {"%": "%", **dict.fromkeys("diu", r"-?\d+"), **dict.fromkeys("oxX", r"(?:0x)?[0-9a-fA-F]+"),
                     **dict.fromkeys("eEfgG", r"-?[\d.]+(?:[eE][-+]?\d+)?|-?nan|-?inf"), "c": "."}


def _line_regex(line: str) -> Optional[str]:
    """One printed line's format -> its regex; None when it has too little fixed text to recognise."""
    parts, pos = [], 0
    for conv in _C_CONVERSION.finditer(line):
        parts.append(_literal_regex(line[pos:conv.start()]))
        kind = conv.group(1) or "u"
        # s, p, n: the first string of a line is one word, later ones are lazy
        parts.append(_CONVERSION_REGEX.get(kind) or (r".+?" if pos > 0 else r"\S+"))
        pos = conv.end()
    parts.append(_literal_regex(line[pos:]))
    literal_text = _C_CONVERSION.sub("", line).strip()
    if len(re.sub(r"[^A-Za-z]", "", literal_text)) < 6:
        return None  # "%s\n", "dlerror: %s": too little fixed text to recognise anything
    if not _C_CONVERSION.search(line) and re.fullmatch(r"[A-Za-z]+", literal_text):
        # a line of one word ("Skipping" of write_bw.c) is perftest's only alone on its line: inside another
        # program's line ("Skipping unavailable device: mlx5_0") it is that program's word
        return rf"^\s*{re.escape(literal_text)}\s*$"
    return "".join(parts)


def _keyword_of(regex_source: str) -> str:
    """The longest plain word of a pattern: lines without it cannot match."""
    cleaned = re.sub(r"\(\?P<\w+>", "(", regex_source)
    cleaned = re.sub(r"\\[A-Za-z]", " ", cleaned)
    words = [w for w in _WORD.findall(cleaned.lower()) if len(w) >= 3 and w not in _STOPWORDS and not w.isdigit()]
    if not words:
        return ""
    return max(words, key=len)


def _literal_length(regex_source: str) -> int:
    cleaned = re.sub(r"\(\?P<\w+>[^)]*\)", "", regex_source)
    return len(re.findall(r"[A-Za-z0-9]", re.sub(r"\\[A-Za-z]", "", cleaned)))


class Catalog:
    def __init__(self, patterns: List[Pattern]):
        self.patterns = patterns
        self.by_keyword: Dict[str, List[Pattern]] = {}
        self.unkeyed: List[Pattern] = []
        # the same, as indexes into `patterns` (what the prefilter reports a line's possible matches by)
        self._numbered_by_keyword: Dict[str, List[Tuple[int, Pattern]]] = {}
        self._numbered_unkeyed: List[Tuple[int, Pattern]] = []
        for i, p in enumerate(patterns):
            if p.keyword:
                self.by_keyword.setdefault(p.keyword, []).append(p)
                self._numbered_by_keyword.setdefault(p.keyword, []).append((i, p))
            else:
                self.unkeyed.append(p)
                self._numbered_unkeyed.append((i, p))
        self.keywords = frozenset(self.by_keyword)
        # the ids of messages that report a measurement (a completed run's evidence)
        self.result_ids = frozenset(p.id for p in patterns if p.result)
        self._ids_of: Dict[str, frozenset] = {}
        self._order: Optional[Dict[int, int]] = None

    def order(self, pattern: Pattern) -> int:
        """The pattern's place in the catalogue: what settles a tie between two matches (find())."""
        if self._order is None:
            self._order = {id(p): i for i, p in enumerate(self.patterns)}
        return self._order[id(pattern)]

    def ids_of(self, producer: str) -> frozenset:
        """The ids of one producer's messages."""
        if producer not in self._ids_of:
            self._ids_of[producer] = frozenset(p.id for p in self.patterns if p.producer == producer)
        return self._ids_of[producer]

    def candidates(self, words: Iterable[str], allowed: Optional[AbstractSet[int]] = None) -> List[Pattern]:
        """The patterns that can match a line of these words; `allowed`: the indexes of the only patterns that can
        (the prefilter's answer for the line), when known."""
        if allowed is not None:
            return [p for i, p in self.numbered(words) if i in allowed]
        found = list(self.unkeyed)
        # the set intersection runs in C: most lines share no word, or one, with the keywords
        for word in self.keywords.intersection(words):
            found.extend(self.by_keyword[word])
        return found

    def numbered(self, words: Iterable[str]) -> List[Tuple[int, Pattern]]:
        """candidates(), each with its index into `patterns`."""
        found = list(self._numbered_unkeyed)
        for word in self.keywords.intersection(words):
            found.extend(self._numbered_by_keyword[word])
        return found

    def find(self, line: str, words: Optional[Iterable[str]] = None,
             allowed: Optional[AbstractSet[int]] = None) -> List[Match]:
        """Every message in `line`, left to right, without overlaps. `words`: line_words(line), if known; `allowed`:
        see candidates()."""
        matches: List[Match] = []
        low = line.lower() if line.isascii() else None
        for pattern in self.candidates(words if words is not None else line_words(line), allowed):
            if low is not None and pattern.needles and not all(n in low for n in pattern.needles):
                continue
            for found in pattern.regex.finditer(line):
                if found.end() > found.start():
                    matches.append(matched(pattern, found))
        if not all(m.pattern.curated for m in matches):
            matches = _without_generated_in_heads(line, matches)
        if len(matches) <= 1:
            return matches
        # a catch-all last, curated before generated, more fixed text first, then perftest's catalogue before the
        # others, then leftmost, then the catalogue's order: candidates() come in the order of a set of words, which
        # changes from one process to the next, so a tie must not be left to it
        order = self.order
        matches.sort(key=lambda m: (m.pattern.fallback, not m.pattern.curated, -m.pattern.literal_length,
                                    m.pattern.producer != "perftest", m.start, m.pattern.id, order(m.pattern)))
        chosen: List[Match] = []
        for m in matches:
            if all(m.end <= c.start or m.start >= c.end for c in chosen):
                chosen.append(m)
        chosen.sort(key=lambda m: m.start)
        return chosen


def _without_generated_in_heads(line: str, matches: List[Match]) -> List[Match]:
    """A catch-all matches a producer's own line head ("UCX ERROR", "NCCL WARN"), so the text after it is that
    producer's words: a generated perftest string found inside ("failed to open %s" in UCC's "failed to open ipc mem
    handle") is not perftest talking. A program's syslog/journal head ("rdma-ndd[23474]: ", "ibacm[1796]: ") says the
    same of the whole line when the program is not perftest: rdma-ndd's "Failed to open <sysfs path>" is not perftest's
    "Failed to open %s"; so does glog's head (GLOG_HEAD), which perftest never prints. Curated entries still win over
    the catch-all as find() orders them."""
    heads = [(m.start, m.end) for m in matches if m.pattern.fallback]
    program = _PROGRAM_HEAD.match(line)
    if program and not _PERFTEST_PROGRAM.fullmatch(program.group(1)):
        heads.append((program.start(1) - 1, len(line) + 1))
    glog = GLOG_HEAD.match(line)
    if glog:
        heads.append((glog.end() - 1, len(line) + 1))
    if not heads:
        return matches
    return [m for m in matches if m.pattern.curated or not any(start < m.start < end for start, end in heads)]


# Everything but [a-z0-9_] separates words (str.translate is C-fast; the prefilter runs on every line).
_SEPARATORS = {c: " " for c in range(128) if not (chr(c).isalnum() or chr(c) == "_")}


def line_words(line: str) -> set:
    """The lowercase words of a line, as the catalogue's keywords are written."""
    return set(line.lower().translate(_SEPARATORS).split())


_EXCHANGE_FUNCTIONS = ("ethernet_read", "ethernet_write", "ctx_hand_shake", "ctx_xchg", "exchange", "check_",
                       "rdma_read", "rdma_write")
# (function name prefixes, phase) for the files that do not decide the phase themselves
_FUNCTION_PHASES = ((("run_iter", "perform_warm", "check_alive", "run_"), "run"),
                    (("destroy", "ctx_close"), "close"),
                    (("ctx_find_dev", "ctx_open_device", "set_process_affinity", "run_on_node"), "device"))


def _phase_of(file: str, function: str) -> str:
    if "memory" in file or "loader" in file:
        return "resources"
    if file.startswith("raw_ethernet"):
        return "raw"
    if file == "perftest_parameters.c":
        return "negotiate" if function.startswith(("negotiate", "compare")) else "parse"
    if file == "perftest_communication.c":
        return "exchange" if function.startswith(_EXCHANGE_FUNCTIONS) else "connect"
    for prefixes, phase in _FUNCTION_PHASES:
        if function.startswith(prefixes):
            return phase
    return {"ctx_connect": "qp", "main": "run"}.get(function, "resources")


_ERROR_WORDS = re.compile(r"fail|error|couldn|could not|unable|cannot|can not|can't|invalid|not supported|"
                          r"isn't supported|not found|bad |must |should |exceed|mismatch|not available|"
                          r"doesn't|does not|wrong|too |not possible|only|illegal|no such|unsupported", re.I)


def _kind_of(literal: str) -> str:
    if re.search(r"warn", literal, re.I):
        return "warning"
    return "error" if _ERROR_WORDS.search(literal) else "notice"


def catalogue_files() -> List[Path]:
    """perftest's first (its entries win a tie with another catalogue's), then the others by name."""
    others = sorted(p for p in MESSAGES.glob("*.toml") if p.name != "perftest.toml")
    return [MESSAGES / "perftest.toml", *others]


def _curated() -> List[Pattern]:
    patterns = []
    for path in catalogue_files():
        patterns += _entries(path)
    return patterns


def _entry_sources(path: Path) -> Iterator[Tuple[Dict[str, Any], List[Tuple[str, str]]]]:
    """Each entry of a catalogue file with the (regular expression, keyword) pairs it stands for: its texts compiled,
    or its regex once for each of its `keywords` (one message written the same way around each of a list of words: a
    completion status's name, a data type's), a `{keyword}` in it standing for that word as written; the keyword the
    prefilter looks for is the word in lowercase, as line_words() gives a line's words."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    for entry in data["message"]:
        if "regex" not in entry:
            yield entry, [(source, entry.get("keyword") or _keyword_of(source))
                          for source in (compile_template(t) for t in (entry.get("texts") or [entry["text"]]))]
            continue
        keywords = entry.get("keywords") or ([entry["keyword"]] if "keyword" in entry else [])
        if not keywords:
            raise ValueError(f"catalog entry {entry['id']}: a regex entry needs a keyword")
        yield entry, [(entry["regex"].replace("{keyword}", re.escape(k)), k.lower()) for k in keywords]


def examples_by_source() -> Dict[str, List[str]]:
    """The example lines of every curated pattern, by its regular expression (what prefilter checks its database
    against)."""
    out: Dict[str, List[str]] = {}
    for path in catalogue_files():
        for entry, sources in _entry_sources(path):
            for source, _keyword in sources:
                out.setdefault(source, []).extend(entry.get("examples", []))
    return out


def _entries(path: Path) -> List[Pattern]:
    producer = path.stem
    patterns = []
    for entry, sources in _entry_sources(path):
        for source, keyword in sources:
            patterns.append(Pattern(
                id=entry["id"], kind=entry["kind"], phase=entry.get("phase", ""),
                source=source, keyword=keyword,
                literal_length=_literal_length(source), curated=True, side=entry.get("side"),
                gen=entry.get("gen"), origin=entry.get("origin"), producer=producer,
                result=bool(entry.get("result")), digit_blind=digit_blind(source), needles=needles(source),
                fallback=bool(entry.get("fallback"))))
    return patterns


def _generated(curated: Sequence[Pattern] = ()) -> List[Pattern]:
    """perftest's strings as patterns, but a line of fixed text a curated pattern reads whole: the curated entry says
    where that text counts (perftest's " Cannot Allocate" alone on its line, not inside "Cannot allocate memory")."""
    patterns = []
    for line in (MESSAGES / "perftest_strings.tsv").read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        file, function, _stream, literal = line.split("\t", 3)
        if _read_by_curated(literal, curated):
            continue
        for source in compile_c_format(literal):
            patterns.append(Pattern(
                id=f"A:{file}:{function}", kind=_kind_of(literal), phase=_phase_of(file, function),
                source=source, keyword=_keyword_of(source), literal_length=_literal_length(source),
                curated=False, origin=f"{file}:{function}", digit_blind=digit_blind(source), needles=needles(source)))
    return patterns


def _read_by_curated(literal: str, curated: Sequence[Pattern]) -> bool:
    """A literal without conversions whose every printed line a curated pattern matches whole."""
    body = literal.strip()
    if not (body.startswith('"') and body.endswith('"')) or "%" in body or "\\" in body.replace("\\n", ""):
        return False
    lines = [line.strip() for line in body[1:-1].split("\\n") if line.strip()]
    return bool(lines) and all(_read_whole(line, curated) for line in lines)


def _read_whole(line: str, curated: Sequence[Pattern]) -> bool:
    words = line_words(line)            # (a pattern meets only the lines that hold its keyword)
    return any(p.regex.fullmatch(line) or p.regex.fullmatch(" " + line) for p in curated if p.keyword in words)


# Fields every recognised message carries besides its pattern's own (logparse/runs.py adds them).
COMMON_FIELDS = ("origin", "phase", "gen")


def fields_by_id(catalog: "Catalog") -> Dict[str, set]:
    """Each message id -> the fields its patterns can bind (for the rule loader's name check)."""
    out: Dict[str, set] = {}
    for p in catalog.patterns:
        out.setdefault(p.id, set(COMMON_FIELDS)).update(re.findall(r"\(\?P<(\w+)>", p.source))
    return out


@lru_cache(maxsize=1)
def load() -> Catalog:
    """Every catalogue's patterns, built once per change of the catalogue files (runtime/cache.py)."""
    from rdmadoctor.runtime import cache
    files = [*catalogue_files(), MESSAGES / "perftest_strings.tsv", Path(__file__)]
    def build() -> list:
        curated = _curated()
        return [_fields(p) for p in curated + _generated(curated)]
    fields = cache.cached("catalog", files, build)
    return Catalog([Pattern(*f) for f in fields])


def _fields(p: Pattern) -> tuple:
    return (p.id, p.kind, p.phase, p.source, p.keyword, p.literal_length, p.curated, p.side, p.gen, p.origin,
            p.producer, p.result, p.digit_blind, p.needles, p.fallback)


def split_points(matches: List[Match]) -> List[Tuple[int, Optional[int]]]:
    """Spans of a line between message starts (used to unflatten a joined paste); the last runs to the end."""
    starts = sorted({m.start for m in matches})
    ends: List[Optional[int]] = [*starts[1:], None]
    return list(zip(starts, ends))
