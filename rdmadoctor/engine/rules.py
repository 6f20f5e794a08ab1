"""The rule table: rules/*.toml (and any --rules-dir), loaded and checked. A rule is data; nothing in it is
executed.

One rule is one unit, read in one place: what it matches (`when`), what it means (`why`), the fix, the
references, where it sits on a ladder (`rung`, and `probe_rung` for the --peer ladder), its scope (a facts rule
with `paste = true` judges the facts a pasted log shows, in explain, instead of check's), the findings it
explains, its text in the other languages (`[rule.zh]`) and its test cases (`[[rule.case]]`).
Every name a rule uses is checked when the table loads (engine/names.py): an unknown message, feature,
parameter, option, fact, cause slug, rung or template name is refused with the rule id and its file.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from rdmadoctor.model import RUNGS, SEVERITIES

# run, pair, input: the runs of a log (each run, each server/client pair, the whole input); facts: check's
# facts view; bench: a sweep's view
SCOPES = ("run", "pair", "input", "facts", "bench")
LOG_SCOPES = ("run", "pair", "input")
VIEW_SCOPES = ("facts", "bench")
KINDS = ("cause", "symptom")
CONFIDENCES = ("high", "medium", "low")
LANGUAGES = ("zh",)
TRANSLATED = ("title", "why", "fix", "next_steps")
_REQUIRED = ("id", "cause", "severity", "title", "scope", "when", "why")
_ALLOWED = set(_REQUIRED) | {"fix", "confidence", "kind", "explains", "candidates", "next_steps", "refs", "rung",
                             "probe_rung", "producer", "key", "fix_command", "each", "doc", "priority", "fallback",
                             "case", "paste", "cite",
                             *LANGUAGES}
SNIPPETS_FILE = "_snippets.toml"


class RuleError(Exception):
    """The rule table is malformed or names something unknown; the message names the file and the rule."""


@dataclass(frozen=True)
class Rule:
    id: str
    cause: str
    severity: str
    title: str
    scope: str
    when: Dict[str, Any]
    why: str
    fix: Tuple[str, ...] = ()
    confidence: str = "medium"
    kind: str = "cause"
    explains: Tuple[str, ...] = ()
    candidates: Tuple[str, ...] = ()
    next_steps: Tuple[str, ...] = ()
    refs: Tuple[str, ...] = ()
    rung: Optional[str] = None
    probe_rung: Optional[str] = None  # the --peer ladder's rung this rule speaks about: it belongs to that ladder
    producer: Optional[str] = None    # log scopes: only the runs of this producer (perftest, nccl, ucx, ...)
    key: Optional[str] = None
    fix_command: Optional[Dict[str, Any]] = None
    each: Optional[str] = None
    doc: str = ""
    priority: int = 0                 # breaks ties between equally ranked causes: higher first
    fallback: bool = False            # tried last, on the messages no other finding cites
    paste: bool = False               # a facts rule for the facts a pasted log shows (explain), not check's
    cite: Optional[Dict[str, Any]] = None   # a condition that only adds evidence: cited when it holds, never required
    # its text in the other languages and its test cases (`zh`, `case`), by rule id
    extras: "Extras" = field(default=None, compare=False, repr=False)  # type: ignore[assignment]
    file: str = field(default="", compare=False)
    directory: str = field(default="", compare=False)

    @property
    def case(self) -> Tuple[Dict[str, Any], ...]:
        """Its test cases."""
        return self.extras.of(self.id).get("case", ()) if self.extras is not None else ()

    @property
    def zh(self) -> Optional[Dict[str, Any]]:
        """Its text in Chinese."""
        return self.extras.of(self.id).get("zh") if self.extras is not None else None

    def text(self, name: str, lang: Optional[str] = None) -> Any:
        """A translated field (title, why, fix, next_steps) in `lang`, falling back to English."""
        translated = getattr(self, lang, None) if lang in LANGUAGES else None
        if translated and translated.get(name):
            value = translated[name]
            return tuple(value) if isinstance(value, list) else value
        return getattr(self, name)


class Extras:
    """What of the rules only some readers want, by rule id: their text in the other languages (a report in one) and
    their test cases (`rules check`, the tests): more than half of the table's bytes. A table read from the cache holds
    one Extras with none of them, shared by its rules, that reads them from their own cache file when first asked
    (`reader`, set by _load: it is not pickled)."""

    __slots__ = ("values", "reader")

    def __init__(self, values: Optional[Dict[str, Dict[str, Any]]] = None):
        self.values = values
        self.reader: Optional[Callable[[], Dict[str, Dict[str, Any]]]] = None

    def of(self, rule_id: str) -> Dict[str, Any]:
        if self.values is None:
            if self.reader is None:
                raise RuntimeError("the rule table's translations and cases were left in the cache, with no reader")
            self.values = self.reader()
        return self.values.get(rule_id, {})

    def __getstate__(self) -> Dict[str, Dict[str, Any]]:
        return {}       # kept apart: the cached table's rules share an Extras that reads them when asked

    def __setstate__(self, state: Dict[str, Dict[str, Any]]) -> None:
        self.values, self.reader = None, None


@dataclass(frozen=True)
class Table:
    """The rules of one load, in order, with the log snippets their cases insert."""
    rules: Tuple[Rule, ...]
    snippets: Dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __iter__(self):
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __getitem__(self, index):
        return self.rules[index]

    def of_scope(self, *scopes: str) -> Tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.scope in scopes)

    def by_id(self) -> Dict[str, Rule]:
        return {r.id: r for r in self.rules}


def readable(template: str) -> str:
    """A rule's text without its template syntax, for listings: "{server.num_qps}" -> "<number of QPs>"."""
    from rdmadoctor.engine.template import FIELD
    from rdmadoctor.views import params

    def one(m) -> str:
        head, *rest = m.group(1).split(".")
        name = rest[-1] if rest else head
        if name in params.PARAMETERS:
            return f"<{params.label(name)}>"
        if name in ("label", "name") and head == "item":
            return "<item>"
        return f"<{name.replace('_', ' ')}>"
    return FIELD.sub(one, template)


def rules_dir() -> Path:
    """The installed copy inside the package, else the repository's rules/ (a source checkout)."""
    packaged = Path(__file__).resolve().parent.parent / "_rules"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent.parent / "rules"


def _shape_errors(entry: Dict[str, Any], where: str) -> List[str]:
    errors = _key_errors(entry) + _kind_errors(entry) + _translation_errors(entry)
    for i, case in enumerate(entry.get("case", [])):
        if not isinstance(case, dict) or not (case.get("fires") or case.get("quiet")):
            errors.append(f"case {i + 1}: needs 'fires' or 'quiet'")
    return [f"{where}: {e}" for e in errors]


def _key_errors(entry: Dict[str, Any]) -> List[str]:
    """Keys missing or unknown, and values outside their vocabularies."""
    errors = []
    missing = [k for k in _REQUIRED if k not in entry]
    if missing:
        errors.append(f"missing {missing}")
    unknown = set(entry) - _ALLOWED
    if unknown:
        errors.append(f"unknown key(s) {sorted(unknown)}")
    checks = (("severity", SEVERITIES, None), ("scope", SCOPES, None), ("kind", KINDS, "cause"),
              ("confidence", CONFIDENCES, "medium"), ("rung", RUNGS, None))
    for key, allowed, default in checks:
        value = entry.get(key, default)
        if value is not None and value not in allowed:
            errors.append(f"{key} must be one of {allowed}, not {value!r}")
    return errors


def _kind_errors(entry: Dict[str, Any]) -> List[str]:
    """A symptom lists candidates and next steps and names no cause; a cause gives a fix."""
    errors = []
    kind = entry.get("kind", "cause")
    if kind == "symptom" and not (entry.get("candidates") and entry.get("next_steps")):
        errors.append("a symptom rule must list its candidate causes and what to collect next")
    if kind == "symptom" and entry.get("cause") != "unknown":
        errors.append("a symptom names no cause (cause = \"unknown\"): it lists candidates")
    if kind == "cause" and not entry.get("fix"):
        errors.append("a cause rule must give a fix")
    return errors


def _translation_errors(entry: Dict[str, Any]) -> List[str]:
    """A translation holds only the translated fields, with as many fixes and next steps as the rule."""
    errors = []
    for lang in LANGUAGES:
        translated = entry.get(lang)
        if translated is None:
            continue
        if not isinstance(translated, dict) or set(translated) - set(TRANSLATED):
            errors.append(f"[{lang}] holds only {TRANSLATED}")
            continue
        for name in ("fix", "next_steps"):
            if name in translated and len(translated[name]) != len(entry.get(name, [])):
                errors.append(f"[{lang}].{name} has {len(translated[name])} items, "
                              f"the rule {len(entry.get(name, []))}")
    return errors


def _rule_from(entry: Dict[str, Any], file: str, directory: str) -> Rule:
    tuple_keys = ("fix", "explains", "candidates", "next_steps", "refs", "case")
    values: Dict[str, Any] = {k: tuple(entry[k]) if k in tuple_keys else entry[k] for k in entry}
    extras = {name: values.pop(name) for name in ("case", *LANGUAGES) if name in values}
    return Rule(file=file, directory=directory, extras=Extras({values["id"]: extras}), **values)


def _read(path: Path) -> Dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"{path}: {exc}") from None
    except OSError as exc:
        raise RuleError(f"{path}: {exc.strerror or exc}") from None


def read_dir(directory: Path, label: Optional[str] = None,
             groups: Optional[Dict[str, Tuple[str, ...]]] = None,
             conditions: Optional[Dict[str, Dict[str, Any]]] = None) -> Tuple[List[Rule], Dict[str, str], List[str]]:
    """(rules, snippets, shape errors) of one directory's *.toml files; its `[groups]` go into `groups`, its
    `[conditions]` into `conditions`."""
    if not directory.is_dir():
        raise RuleError(f"{directory}: not a directory of rule files")
    rules: List[Rule] = []
    errors: List[str] = []
    snippets: Dict[str, str] = {}
    for path in sorted(directory.glob("*.toml")):
        data = _read(path)
        snippets.update({k: str(v) for k, v in (data.get("snippets") or {}).items()})
        errors += _named(data, path.name, {} if groups is None else groups, {} if conditions is None else conditions)
        if path.name.startswith("_"):
            continue
        name = path.name if label is None else str(path)
        for entry in data.get("rule", []):
            where = f"{name}: rule {entry.get('id', '?')}"
            problems = _shape_errors(entry, where)
            errors += problems
            if not problems:
                rules.append(_rule_from(entry, name, str(directory)))
    return rules, snippets, errors


def _named(data: Dict[str, Any], file: str, groups: Dict[str, Tuple[str, ...]],
           conditions: Dict[str, Dict[str, Any]]) -> List[str]:
    """A file's `[groups]` into `groups` (as "@name") and its `[conditions]` into `conditions`; the errors."""
    errors = []
    for name, members in (data.get("groups") or {}).items():
        if not (isinstance(members, list) and members and all(isinstance(m, str) for m in members)):
            errors.append(f"{file}: group {name} must list rule ids")
        else:
            groups[f"@{name}"] = tuple(members)
    for name, condition in (data.get("conditions") or {}).items():
        if not (isinstance(condition, dict) and condition):
            errors.append(f"{file}: condition {name} must be a condition table")
        else:
            conditions[name] = condition
    return errors


def _expand_groups(rules: List[Rule], groups: Dict[str, Tuple[str, ...]], errors: List[str]) -> List[Rule]:
    """`explains = ["@nccl-error-codes", ...]` names the rules of a group (`[groups]` in rules/_groups.toml): each
    rule a group lists, in its place, once."""
    out = []
    for rule in rules:
        if not any(target.startswith("@") for target in rule.explains):
            out.append(rule)
            continue
        expanded: List[str] = []
        for target in rule.explains:
            if target.startswith("@") and target not in groups:
                errors.append(f"{rule.file}: rule {rule.id}: explains unknown group {target}")
            for member in groups.get(target, (target,)):
                if member not in expanded:
                    expanded.append(member)
        out.append(replace(rule, explains=tuple(expanded)))
    return out


def _expand_conditions(rules: List[Rule], conditions: Dict[str, Dict[str, Any]], errors: List[str]) -> List[Rule]:
    """`{ use = "nccl-modify-qp-timeout" }` in a rule's `when` or `cite` stands for the condition of that name
    (`[conditions]` in rules/_conditions.toml), written in its place: the rule reads as if the condition were
    written out, so its first message condition still binds `message`."""
    def expand(node: Any, where: str, using: Tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [expand(n, where, using) for n in node]
        if not isinstance(node, dict):
            return node
        if "use" not in node:
            return {k: expand(v, where, using) if k in ("any", "all", "not") else v for k, v in node.items()}
        name = node["use"]
        if set(node) != {"use"} or not isinstance(name, str):
            errors.append(f"{where}: a `use` condition names one condition and nothing else: {node!r}")
        elif name not in conditions:
            errors.append(f"{where}: uses unknown condition {name!r} (known: {', '.join(sorted(conditions))})")
        elif name in using:
            errors.append(f"{where}: condition {name!r} uses itself ({' -> '.join(using + (name,))})")
        else:
            return expand(conditions[name], where, using + (name,))
        return node

    out = []
    for rule in rules:
        where = f"{rule.file}: rule {rule.id}"
        when = expand(rule.when, where, ())
        cite = expand(rule.cite, where, ()) if rule.cite is not None else None
        out.append(rule if (when, cite) == (rule.when, rule.cite) else replace(rule, when=when, cite=cite))
    return out


def build(directories: Sequence[Path], check_names: bool = True) -> Table:
    rules: List[Rule] = []
    snippets: Dict[str, str] = {}
    groups: Dict[str, Tuple[str, ...]] = {}
    conditions: Dict[str, Dict[str, Any]] = {}
    errors: List[str] = []
    seen: Dict[str, str] = {}
    for i, directory in enumerate(directories):
        found, snips, problems = read_dir(Path(directory), label=None if i == 0 else str(directory), groups=groups,
                                          conditions=conditions)
        errors += problems
        snippets.update(snips)
        for rule in found:
            if rule.id in seen:
                errors.append(f"{rule.file}: rule {rule.id} already defined in {seen[rule.id]}")
                continue
            seen[rule.id] = rule.file
            rules.append(rule)
    rules = _expand_groups(rules, groups, errors)
    rules = _expand_conditions(rules, conditions, errors)
    if not rules and not errors:
        errors.append(f"no rules in {', '.join(str(d) for d in directories)}")
    if check_names and not errors:
        from rdmadoctor.engine import names
        errors += names.check(rules)
    if errors:
        raise RuleError("\n".join(errors))
    return Table(tuple(rules), snippets)


def _extras_of(table: Table) -> Dict[str, Dict[str, Any]]:
    return {rule.id: rule.extras.of(rule.id) for rule in table.rules if rule.extras is not None}


@lru_cache(maxsize=8)
def _load(directories: Tuple[str, ...]) -> Table:
    """Built once per change of the rule files (or of the code and catalogues that check them): runtime/cache.py."""
    from rdmadoctor.runtime import cache
    dirs = [rules_dir(), *map(Path, directories)]
    package = Path(__file__).resolve().parent.parent
    files = [p for d in dirs for p in Path(d).glob("*.toml")] + list(package.rglob("*.py")) + \
        list((package / "knowledge" / "messages").iterdir())
    built: List[Table] = []

    def whole() -> Table:
        if not built:
            built.append(build(dirs))
        return built[0]

    def extras() -> Dict[str, Dict[str, Any]]:
        # a second file of the same key: built with the table, so that a later run finds it
        return cache.cached("rule-extras", files, lambda: _extras_of(whole()))

    def without_extras() -> Table:
        extras()
        shared = Extras()
        return replace(whole(), rules=tuple(replace(rule, extras=shared) for rule in whole().rules))

    table = cache.cached("rules", files, without_extras)
    if built:
        return whole()          # (built in this process: its rules hold their extras)
    shared = table.rules[0].extras if table.rules else None
    if shared is not None:
        shared.reader = extras
    return table


def load(extra: Iterable[str] = ()) -> Table:
    """The package's rule table plus the rules of each --rules-dir, checked."""
    return _load(tuple(str(Path(d).resolve()) for d in extra))
