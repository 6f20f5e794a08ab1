"""JSON from outside (a facts file, a saved result, a peer agent's answer, a bench answer), read at the
boundary: parsed with a nesting bound and checked against the schema shipped in the package
(rdmadoctor/schemas/NAME.schema.json), so that the code behind the boundary only ever sees documents of the
shape it was written for. Whatever is wrong becomes one JsonInputError with a one-line message that says
where ("sections.devices: true is not of type 'object'").

The schemas are versioned with the documents they describe (`rdmadoctor-facts/1`, `rdmadoctor/1`,
`rdmadoctor-bench/1`, the agent's protocol 2); the tests check every document rdmadoctor writes against them.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from rdmadoctor.runtime.text import printable

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
MAX_DEPTH = 64          # nesting levels a document may have (ours have at most ~12)


class JsonInputError(ValueError):
    """A JSON document from outside that is not what it should be; str() is one line."""


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when `value` nests deeper than `limit` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def loads(text: Any, what: str = "input") -> Any:
    """Parse JSON text (str or bytes); JsonInputError for anything that is not JSON or nests too deep."""
    try:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8")
        value = json.loads(text)
    except UnicodeDecodeError:
        raise JsonInputError(f"{what}: not UTF-8 text") from None
    except RecursionError:
        raise JsonInputError(f"{what}: JSON nested too deeply") from None
    except ValueError as exc:
        raise JsonInputError(f"{what}: not JSON ({printable(exc, False)})") from None
    if depth_exceeds(value):
        raise JsonInputError(f"{what}: JSON nested deeper than {MAX_DEPTH} levels")
    return value


def read(path: Any, what: Optional[str] = None, limit: int = 256 << 20) -> Any:
    """Read and parse a JSON file; OSError (EIO, ENOENT, ...) becomes JsonInputError too."""
    name = what or str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise JsonInputError(f"{name}: cannot read ({exc.strerror or exc})") from None
    if len(raw) > limit:
        raise JsonInputError(f"{name}: larger than {limit >> 20} MiB")
    return loads(raw, name)


@lru_cache(maxsize=None)
def schema(name: str) -> Dict[str, Any]:
    with open(SCHEMAS / f"{name}.schema.json", encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=None)
def _validator(name: str, part: Optional[str] = None) -> Any:
    import jsonschema

    store = {}
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        doc = schema(path.name[:-len(".schema.json")])
        store[doc["$id"]] = doc
    doc = schema(name)
    if part is not None:                      # one definition of the schema: {"$ref": "<its $id>#/$defs/part"}
        doc = {"$schema": doc["$schema"], "$ref": f"{doc['$id']}#/$defs/{part}"}
    cls = jsonschema.validators.validator_for(schema(name))
    try:                      # jsonschema >= 4.18
        from referencing import Registry, Resource
    except ImportError:       # older ones (Debian bookworm's 4.10) resolve through a RefResolver
        return cls(doc, resolver=jsonschema.RefResolver.from_schema(doc, store=store))
    registry = Registry().with_resources([(uri, Resource.from_contents(d)) for uri, d in store.items()])
    if part is not None:
        doc = dict(doc, **{"$id": f"urn:rdmadoctor:part:{name}:{part}"})
    return cls(doc, registry=registry)


def prepare(name: str, *parts: Optional[str]) -> None:
    """Builds the validators of schema `name` (its definitions `parts`, or the whole schema) ahead of use: the
    first validation otherwise pays for importing jsonschema and building the validator, seconds on a slow host,
    which must not fall inside a deadline someone else keeps (the agent's authentication window)."""
    from jsonschema.exceptions import best_match  # noqa: F401 - imported now so that errors() finds it loaded
    for part in parts or (None,):
        _validator(name, part)


def _where(path: List[Any]) -> str:
    return ".".join(str(p) for p in path) or "the top level"


def errors(document: Any, name: str, limit: int = 3, part: Optional[str] = None) -> List[str]:
    """What is wrong with `document` against schema `name` (or its definition `part`), at most `limit`
    messages, the most relevant first."""
    from jsonschema.exceptions import best_match
    found = list(_validator(name, part).iter_errors(document))
    if not found:
        return []
    first = best_match(found)
    out = []
    for err in [first] + [e for e in found if e is not first][:limit - 1]:
        message = err.message if len(err.message) <= 160 else err.message[:157] + "..."
        out.append(f"{_where(list(err.absolute_path))}: {printable(message, False)}")
    return out


def validate(document: Any, name: str, what: str = "input", part: Optional[str] = None) -> Any:
    """`document` itself when it matches schema `name` (or its definition `part`), else JsonInputError
    naming the first problem."""
    problems = errors(document, name, limit=1, part=part)
    if problems:
        title = schema(name).get("title", name) + (f" ({part})" if part else "")
        raise JsonInputError(f"{what}: does not match {title}: {problems[0]}")
    return document
