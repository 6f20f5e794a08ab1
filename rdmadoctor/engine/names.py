"""The rule loader's name check: every name a rule uses must exist, or the table does not load.

The vocabularies are the code's own: message ids and their fields (the catalogues in knowledge/messages),
features (views/features.py), parameters (views/params.py), perftest options (knowledge/perftest.py), the
facts view's names (views/vocabulary.py), cause slugs (knowledge/causes.toml), rungs (model.py and the probe
ladder's). Each error names the rule, its file and the unknown name, with what is known nearby.
"""
from __future__ import annotations

from dataclasses import fields as dataclass_fields
from typing import Any, Dict, Iterable, List, Optional, Set

from rdmadoctor.engine.rules import LANGUAGES, LOG_SCOPES, TRANSLATED, Rule
from rdmadoctor.engine.template import FIELD, FILTERS, RUN_NAMES
from rdmadoctor.knowledge import causes as cause_table
from rdmadoctor.knowledge.perftest import LONG
from rdmadoctor.logparse import catalog as message_catalog
from rdmadoctor.logparse.producers import SETTING_PREFIXES
from rdmadoctor.model import Run
from rdmadoctor.views import features, params, vocabulary
from rdmadoctor.views.probeview import RUNG_NAMES

CONDITION_KEYS = {"all", "any", "not", "message", "fields", "of", "differ", "param", "op", "value", "versus",
                  "option", "feature", "exists", "side", "fact", "item", "kind", "setting"}
OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "not in", "known", "unknown")
WHICH = ("run", "other", "server", "client", "any", "input")
MESSAGE_NAMES = {"id", "kind", "text", "line", "source", "fields"}
PARAM_NAMES = {"name", "label", "option", "server", "client"}
RUN_ATTRIBUTES = {f.name for f in dataclass_fields(Run)} | set(RUN_NAMES)
# the names a template may start with, per scope
HEADS = {
    "run": {"run", "other", "server", "client", "message", "param", "setting", "fact", "facts", "ctx", "fix_command"},
    "pair": {"server", "client", "message", "param", "setting", "fact", "facts", "ctx", "fix_command"},
    "input": {"server", "client", "message", "param", "setting", "fact", "facts", "ctx", "fix_command"},
    "facts": {"facts", "fact", "item", "ctx", "message"},
    "bench": {"facts", "fact", "item", "ctx"},
}
CTX_NAMES = {"link_rate"}


class _Checker:
    def __init__(self, rules: List[Rule]):
        self.rules = rules
        self.ids = {r.id for r in rules}
        self.causes = set(cause_table.slugs())
        cat = message_catalog.load()
        self.message_fields = message_catalog.fields_by_id(cat)
        self.message_kinds = {p.kind for p in cat.patterns}
        self.producers = {p.stem for p in message_catalog.catalogue_files()}
        self.errors: List[str] = []

    def error(self, rule: Rule, text: str) -> None:
        self.errors.append(f"{rule.file}: rule {rule.id}: {text}")

    # -- the rule's own fields ---------------------------------------------------------------------------
    def rule(self, rule: Rule) -> None:
        self.references(rule)
        bench = rule.scope == "bench"
        item = self.each(rule, bench)
        self.condition(rule, rule.when, item, bench, "when")
        ids = self.message_ids(rule.when)
        if rule.cite is not None:
            self.condition(rule, rule.cite, item, bench, "cite")
        for name, text in self.texts(rule):
            self.template(rule, text, name, item, bench, ids)
        if rule.fix_command:
            self.fix_command(rule, item, bench, ids)

    def references(self, rule: Rule) -> None:
        """Causes, candidates, the rules it explains and its rung on the --peer ladder."""
        if rule.cause not in self.causes:
            self.error(rule, f"cause {rule.cause!r} is not in the cause vocabulary (knowledge/causes.toml)")
        for slug in rule.candidates:
            if slug not in self.causes:
                self.error(rule, f"candidate {slug!r} is not in the cause vocabulary")
        for target in rule.explains:
            if target not in self.ids:
                self.error(rule, f"explains unknown rule {target}")
        if rule.producer is not None and rule.producer not in self.producers:
            self.error(rule, f"producer {rule.producer!r} is not one of {sorted(self.producers)}")
        if rule.producer is not None and rule.scope not in LOG_SCOPES:
            self.error(rule, "producer applies to the log scopes (run, pair, input)")
        if rule.paste and rule.scope != "facts":
            self.error(rule, "paste applies to facts rules (scope facts): they then judge a paste's facts")
        if rule.probe_rung is not None and rule.probe_rung not in RUNG_NAMES.values():
            self.error(rule, f"probe_rung {rule.probe_rung!r} is not a rung of the --peer ladder "
                             f"({', '.join(RUNG_NAMES.values())})")

    def each(self, rule: Rule, bench: bool) -> Optional[Dict[str, Any]]:
        """The shape of the items `each` iterates, or None."""
        if rule.each is None:
            return None
        if rule.scope in LOG_SCOPES:
            self.error(rule, "'each' iterates the facts view: scopes facts and bench only")
        item, why = vocabulary.item_shape(rule.each, bench)
        if item is None:
            self.error(rule, f"each = {rule.each!r}: {why}")
        return item

    def fix_command(self, rule: Rule, item: Optional[Dict[str, Any]], bench: bool, ids: Set[str]) -> None:
        spec = rule.fix_command or {}
        for value in (spec.get("set") or {}).values():
            self.template(rule, str(value), "fix_command", item, bench, ids)
        for option in spec.get("remove") or []:
            if option not in LONG:
                self.error(rule, f"fix_command removes {option!r}, not a perftest option")
        for option in spec.get("set") or {}:
            if option not in LONG:
                self.error(rule, f"fix_command sets {option!r}, not a perftest option")

    @staticmethod
    def texts(rule: Rule) -> Iterable[tuple]:
        yield "title", rule.title
        yield "why", rule.why
        for i, text in enumerate(rule.fix):
            yield f"fix[{i}]", text
        for i, text in enumerate(rule.next_steps):
            yield f"next_steps[{i}]", text
        if rule.key:
            yield "key", rule.key
        for lang in LANGUAGES:
            for name in TRANSLATED:
                value = (getattr(rule, lang) or {}).get(name)
                for i, text in enumerate(value if isinstance(value, list) else [value] if value else []):
                    yield f"{lang}.{name}[{i}]", text

    # -- conditions ---------------------------------------------------------------------------------------
    def message_ids(self, cond: Any) -> Set[str]:
        found: Set[str] = set()
        if isinstance(cond, dict):
            ids = cond.get("message")
            if ids is not None:
                found.update(ids if isinstance(ids, list) else [ids])
            for key in ("all", "any"):
                for sub in cond.get(key) or []:
                    found |= self.message_ids(sub)
            if "not" in cond:
                found |= self.message_ids(cond["not"])
        return found

    def condition(self, rule: Rule, cond: Any, item: Optional[Dict[str, Any]], bench: bool, where: str) -> None:
        if not isinstance(cond, dict) or not cond:
            self.error(rule, f"{where}: a condition must be a non-empty table")
            return
        unknown = set(cond) - CONDITION_KEYS
        if unknown:
            self.error(rule, f"{where}: unknown condition key(s) {sorted(unknown)}")
        self.parts(rule, cond, item, bench, where)
        if "op" in cond and cond["op"] not in OPS:
            self.error(rule, f"{where}: op {cond['op']!r} is not one of {OPS}")
        for key in ("of", "versus", "exists"):
            if key in cond and cond[key] not in WHICH:
                self.error(rule, f"{where}: {key} = {cond[key]!r} is not one of {WHICH}")
        if "side" in cond and cond["side"] not in ("server", "client"):
            self.error(rule, f"{where}: side must be server or client")
        self.leaf(rule, cond, item, bench, where)

    def parts(self, rule: Rule, cond: Dict[str, Any], item: Optional[Dict[str, Any]], bench: bool,
              where: str) -> None:
        """The conditions inside all, any and not."""
        for key in ("all", "any"):
            if key not in cond:
                continue
            if not isinstance(cond[key], list) or not cond[key]:
                self.error(rule, f"{where}: '{key}' needs a non-empty list")
                continue
            for i, sub in enumerate(cond[key]):
                self.condition(rule, sub, item, bench, f"{where}.{key}[{i}]")
        if "not" in cond:
            self.condition(rule, cond["not"], item, bench, f"{where}.not")

    def leaf(self, rule: Rule, cond: Dict[str, Any], item: Optional[Dict[str, Any]], bench: bool,
             where: str) -> None:
        if "message" in cond:
            self.message(rule, cond, where)
        for key, known, noun, what in _NAMED:
            if key in cond and cond[key] not in known:
                self.error(rule, f"{where}: {noun} {cond[key]!r} is not {what}")
        if "setting" in cond and not str(cond["setting"]).startswith(SETTING_PREFIXES):
            self.error(rule, f"{where}: setting {cond['setting']!r} is not a setting rdmadoctor reads "
                             f"(names starting {', '.join(SETTING_PREFIXES)})")
        if "fact" in cond:
            shape, why = vocabulary.resolve(cond["fact"], bench)
            if shape is None:
                self.error(rule, f"{where}: fact {cond['fact']!r}: {why}")
        if "item" in cond:
            if item is None:
                self.error(rule, f"{where}: 'item' needs 'each'")
            elif not self.in_shape(item, cond["item"]):
                self.error(rule, f"{where}: item field {cond['item']!r} is not a name of {rule.each}'s items "
                                 f"({', '.join(sorted(item))})")

    def message(self, rule: Rule, cond: Dict[str, Any], where: str) -> None:
        """The message ids exist, and the fields asked for are bound by every one of them."""
        ids = cond["message"] if isinstance(cond["message"], list) else [cond["message"]]
        for mid in ids:
            if mid != "*" and mid not in self.message_fields:
                self.error(rule, f"{where}: message {mid!r} is not in any catalogue (knowledge/messages)")
        kind = cond.get("kind")
        if kind is not None and (not isinstance(kind, str) or kind not in self.message_kinds):
            self.error(rule, f"{where}: message kind {kind!r} is not one of {', '.join(sorted(self.message_kinds))}")
        if "*" in ids:
            return
        known = set().union(*(self.message_fields.get(m, set()) for m in ids))
        for name in cond.get("fields") or {}:
            if name not in known:
                self.error(rule, f"{where}: message field {name!r} is not bound by {ids} "
                                 f"(fields: {', '.join(sorted(known))})")

    @staticmethod
    def in_shape(shape: Dict[str, Any], path: str) -> bool:
        node: Any = shape
        for part in path.split("."):
            if isinstance(node, list) and part.isdigit():
                node = node[0]
            elif isinstance(node, dict) and (part in node or "*" in node):
                node = node.get(part, node.get("*"))
            else:
                return False
        return True

    # -- templates ----------------------------------------------------------------------------------------
    def template(self, rule: Rule, text: str, where: str, item: Optional[Dict[str, Any]], bench: bool,
                 message_ids: Set[str]) -> None:
        left = FIELD.sub("", text)
        if "{" in left or "}" in left:
            self.error(rule, f"{where}: a brace outside a {{name}} field (fields do not nest): {text.strip()[:80]!r}")
        for m in FIELD.finditer(text):
            path, filters = m.group(1), [f for f in m.group(2).split("|") if f]
            for f in filters:
                if f.split(":", 1)[0] not in FILTERS:
                    self.error(rule, f"{where}: unknown filter {f!r} in {{{path}}}")
            head, *rest = path.split(".")
            if head not in HEADS[rule.scope]:
                self.error(rule, f"{where}: {{{path}}}: '{head}' is not available in scope {rule.scope} "
                                 f"({', '.join(sorted(HEADS[rule.scope]))})")
                continue
            problem = self.template_path(rule, head, rest, item, bench, message_ids)
            if problem:
                self.error(rule, f"{where}: {{{path}}}: {problem}")

    def template_path(self, rule: Rule, head: str, rest: List[str], item: Optional[Dict[str, Any]], bench: bool,
                      message_ids: Set[str]) -> Optional[str]:
        """What is wrong with {head.rest...}, or None."""
        if not rest:
            return None if head in ("fix_command", "fact", "message", "param", "item", "setting") else \
                f"'{head}' needs a name after it"
        if head in ("run", "other", "server", "client"):
            return self.run_path(rest)
        if head == "message":
            return self.message_path(rest[0], message_ids)
        if head == "param":
            return None if rest[0] in PARAM_NAMES else f"'{rest[0]}' is not one of {sorted(PARAM_NAMES)}"
        if head == "setting":
            return None if rest[0] in ("name", "value") else f"'{rest[0]}' is not one of ['name', 'value']"
        if head == "facts":
            shape, why = vocabulary.resolve(".".join(rest), bench)
            return None if shape is not None else why
        if head == "item":
            if item is None:
                return "'item' needs 'each'"
            return None if self.in_shape(item, ".".join(rest)) else \
                f"'{'.'.join(rest)}' is not a name of {rule.each}'s items ({', '.join(sorted(item))})"
        if head == "ctx":
            return None if rest[0] in CTX_NAMES else f"'{rest[0]}' is not one of {sorted(CTX_NAMES)}"
        return None

    @staticmethod
    def run_path(rest: List[str]) -> Optional[str]:
        first = rest[0]
        if first in params.PARAMETERS or first in RUN_ATTRIBUTES:
            return None
        if first in features.FEATURES:
            inner = features.FIELDS_OF.get(first)
            if len(rest) > 1 and inner is not None and rest[1] not in inner:
                return f"'{rest[1]}' is not a name of feature {first} ({', '.join(inner)})"
            return None
        return f"'{first}' is neither a parameter, a feature nor an attribute of a run"

    def message_path(self, first: str, message_ids: Set[str]) -> Optional[str]:
        if "*" in message_ids or not message_ids:
            return None
        known = set(MESSAGE_NAMES)
        for mid in message_ids:
            fields = self.message_fields.get(mid, set())
            if first in MESSAGE_NAMES and first in fields:
                # the template would print the message's own attribute (its line in the log, its input), never
                # this field: the catalogue names the field otherwise
                return (f"'{first}' is a field of message {mid} and an attribute of every message, which the "
                        f"template reads instead; rename the field in the catalogue")
            known |= fields
        return None if first in known else \
            f"'{first}' is not a field of message(s) {sorted(message_ids)} ({', '.join(sorted(known))})"


# leaf keys whose value must be a known name: (key, the names, what the value is, where the names live)
_NAMED = (("differ", params.PARAMETERS, "parameter", "in views/params.py"),
          ("param", params.PARAMETERS, "parameter", "in views/params.py"),
          ("option", LONG, "option", "a perftest option"),
          ("feature", features.FEATURES, "feature", "in views/features.py"))


def check(rules: List[Rule]) -> List[str]:
    checker = _Checker(rules)
    for rule in rules:
        checker.rule(rule)
    return checker.errors

