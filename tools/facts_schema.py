"""Writes rdmadoctor/schemas/facts.schema.json: the facts document's shape, typed field by field.

    python tools/facts_schema.py            # regenerate from every recorded facts file, then review the diff

The types are the ones the collectors write, read from every recorded facts document (fixtures/, tests/): each
field of a section's data and of the objects and lists below it, six levels deep (a field only ever seen as
null is not checked). Every field (not every list item) may also be null (a collector writes null for what it
could not read); fields and sections not seen are allowed (a newer rdmadoctor may add them: additive changes
keep `rdmadoctor-facts/1`). What it catches is a value of the wrong kind where the views expect a list, an
object, a number or a string.
"""
from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any, Dict, Set

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "rdmadoctor" / "schemas" / "facts.schema.json"
DEPTH = 6           # below a section's data: lists of objects of lists (devices[].ports[].gids[].gid)


def kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class Node:
    def __init__(self) -> None:
        self.kinds: Set[str] = set()
        self.fields: Dict[str, "Node"] = collections.defaultdict(Node)
        self.items: "Node | None" = None

    def add(self, value: Any, depth: int) -> None:
        self.kinds.add(kind(value))
        if depth <= 0:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                self.fields[k].add(v, depth - 1)
        elif isinstance(value, list):
            for v in value:
                if self.items is None:
                    self.items = Node()
                self.items.add(v, depth - 1)

    def schema(self, open_keys: bool = False, item: bool = False) -> Dict[str, Any]:
        if self.kinds <= {"null"}:
            return {}                   # only ever seen empty: its kind is not known, so it is not checked
        # a field may be null (not read); an item of a list is null only where one was seen
        kinds = sorted(self.kinds if item else self.kinds | {"null"})
        out: Dict[str, Any] = {"type": kinds if len(kinds) > 1 else kinds[0]}
        if "object" in self.kinds and self.fields and not open_keys:
            out["properties"] = {k: n.schema(open_keys=k in OPEN_MAPS) for k, n in sorted(self.fields.items())}
        if "array" in self.kinds and self.items is not None:
            out["items"] = self.items.schema(item=True)
        return out


# maps whose keys are names (modules, counters, tables, config options), not fields
OPEN_MAPS = {"rdma_modules", "config", "legacy_save", "nft_save", "nft_ruleset", "rdma_system", "sources",
             "tools", "deltas", "counters", "hw_counters", "deadlines", "counter_deltas"}


def documents():
    for path in sorted(list((ROOT / "fixtures").rglob("*.json")) + list((ROOT / "tests").rglob("*.json"))):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        stack = [doc]
        while stack:
            d = stack.pop()
            if isinstance(d, dict):
                if d.get("schema") == "rdmadoctor-facts/1" and isinstance(d.get("sections"), dict):
                    yield d
                stack.extend(v for v in d.values() if isinstance(v, (dict, list)))
            elif isinstance(d, list):
                stack.extend(v for v in d if isinstance(v, (dict, list)))


def main() -> None:
    sections: Dict[str, Node] = collections.defaultdict(Node)
    host = Node()
    count = 0
    for doc in documents():
        count += 1
        host.add(doc.get("host"), 1)
        for name, sec in doc["sections"].items():
            if isinstance(sec, dict) and isinstance(sec.get("data"), dict):
                data = dict(sec["data"])
                if name == "peer":
                    data.pop("facts", None)          # the peer's own facts document: this schema again
                sections[name].add(data, DEPTH)
    defs: Dict[str, Any] = {}
    for name, node in sorted(sections.items()):
        data = node.schema()
        data["type"] = "object"
        if name == "peer":
            data.setdefault("properties", {})["facts"] = {"anyOf": [{"type": "null"}, {"$ref": "#"}]}
        defs[f"data_{name}"] = data
    host_schema = host.schema()
    host_schema["type"] = "object"
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://rdmadoctor.invalid/schemas/facts.schema.json",
        "title": "rdmadoctor-facts/1",
        "description": "A host's facts as `rdmadoctor check --save` writes them and `--from` reads them "
                       "(rdmadoctor/collectors/__init__.py). Generated by tools/facts_schema.py from %d "
                       "recorded documents." % count,
        "type": "object",
        "required": ["schema", "host", "sections"],
        "properties": {
            "schema": {"const": "rdmadoctor-facts/1"},
            "host": host_schema,
            "sections": {
                "type": "object",
                "properties": {name: {"allOf": [{"$ref": "#/$defs/section"},
                                                {"properties": {"data": {"$ref": f"#/$defs/data_{name}"}}}]}
                               for name in sorted(sections)},
                "additionalProperties": {"$ref": "#/$defs/section"},
            },
            "seconds": {"type": ["number", "null"]},
        },
        "$defs": {
            "section": {
                "type": "object",
                "required": ["status"],
                "properties": {
                    "status": {"enum": ["ok", "partial", "unavailable"]},
                    "data": {"type": "object"},
                    "reason": {"type": ["string", "null"]},
                    "unreadable": {"type": ["array", "null"], "items": {
                        "type": "object", "properties": {"what": {"type": ["string", "null"]},
                                                         "why": {"type": ["string", "null"]}}}},
                    "seconds": {"type": ["number", "null"]},
                    "source": {"type": ["string", "null"]},
                },
                "if": {"properties": {"status": {"enum": ["ok", "partial"]}}},
                "then": {"required": ["data"]},
            },
            **defs,
        },
    }
    OUT.write_text(json.dumps(schema, indent=1) + "\n", encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {count} documents, {len(sections)} sections")


if __name__ == "__main__":
    main()
