"""Fills a rule's text with the user's own values: "{server.num_qps}", "{message.host}", "{run.bw_gbps|gbps}".

Names resolve against the rule's bindings (run, server, client, other, message, param, item, facts, ctx); on a
run, a name is first a parameter (views/params.py), then a feature (views/features.py), then an attribute.
Filters: pct, gbps, bytes, join, upper, lower, option (negotiated field -> option), words (each word
shell-quoted: an nft chain "inet filter input"), errno (-110 -> ETIMEDOUT), strerror (-110 -> Connection timed
out), default:<text>.

Commands: render(..., shell=True) is for the text inside a fix's backticks (a command the user will paste):
every value is shell-quoted (shlex.quote: "mlx5_1;id" becomes 'mlx5_1;id'), so the command runs exactly the
words it shows whatever a log or a facts file held. A default text is the rule's own and stays as written;
`fix_command` and `command_text` are built quoted already.
"""
from __future__ import annotations

import errno
import math
import os
import re
import shlex
from typing import Any, Callable, Dict

from rdmadoctor.knowledge.perftest import NEGOTIATED_FIELDS
from rdmadoctor.views import params
from rdmadoctor.model import Run
from rdmadoctor.runtime.text import Quoted, shell_words  # noqa: F401 - rules' commands are built quoted

FIELD = re.compile(r"\{([A-Za-z_][\w.]*)((?:\|[\w]+(?::[^}|]*)?)*)\}")
MISSING = "?"
RUN_NAMES = ("command_text",)      # names a run answers besides its parameters, features and attributes


class Missing(Exception):
    pass




def _attr(obj: Any, name: str, ctx: Dict[str, Any]) -> Any:
    if isinstance(obj, Run):
        # imported on first use: check reads no run, and need not import the views of runs (about 17 ms)
        from rdmadoctor.views import features
        # perftest's parameters are a perftest run's; another producer's run answers with its attributes
        if name in params.PARAMETERS and obj.producer == "perftest":
            value = params.read(obj, name)
            if value is None:
                raise Missing(name)
            return value.value
        if name in features.FEATURES:
            return features.feature(obj, name, ctx)
        if name == "command_text":          # the command line it parsed, as a shell would need it
            return shell_words(obj.command.argv) if obj.command else None
    if isinstance(obj, dict):
        if name in obj:
            return obj[name]
        raise Missing(name)
    if hasattr(obj, name):
        return getattr(obj, name)
    if hasattr(obj, "fields") and isinstance(obj.fields, dict) and name in obj.fields:
        return obj.fields[name]
    raise Missing(name)


def resolve(path: str, bindings: Dict[str, Any], ctx: Dict[str, Any]) -> Any:
    head, *rest = path.split(".")
    if head not in bindings or bindings[head] is None:
        raise Missing(head)
    value = bindings[head]
    for name in rest:
        if value is None:
            raise Missing(name)
        value = _attr(value, name, ctx)
    return value


def _bytes(n: Any) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _errno_text(value: Any, name: str) -> str:
    try:
        number = abs(int(str(value).strip(), 0))
    except ValueError:
        return str(value)
    if name == "errno":
        return errno.errorcode.get(number, f"errno {number}")
    return os.strerror(number)


# what each filter of a field ({path|name}) makes of the value
_FILTERS: Dict[str, Callable[[Any], Any]] = {
    "pct": lambda value: f"{float(value) * 100:.0f}%",
    "gbps": lambda value: f"{float(value):.1f} Gb/s",
    "bytes": _bytes,
    "join": lambda value: ", ".join(str(v) for v in value),
    "upper": lambda value: str(value).upper(),
    "lower": lambda value: str(value).lower(),
    "default": lambda value: value,         # its argument stands in for a missing value (render)
    # a negotiated field name (X09) -> the option that sets it
    "option": lambda value: NEGOTIATED_FIELDS.get(str(value), str(value)),
    "words": lambda value: shell_words(str(value).split()),
    # -110 or 110 -> ETIMEDOUT / "Connection timed out" (Linux numbering)
    "errno": lambda value: _errno_text(value, "errno"),
    "strerror": lambda value: _errno_text(value, "strerror"),
}
FILTERS = tuple(_FILTERS)


def _apply(value: Any, name: str, arg: str) -> Any:
    apply = _FILTERS.get(name)
    if apply is None:
        raise ValueError(f"unknown template filter {name}")
    return apply(value)


def render(template: str, bindings: Dict[str, Any], ctx: Dict[str, Any], shell: bool = False) -> str:
    def one(m: "re.Match[str]") -> str:
        path, filters = m.group(1), [f for f in m.group(2).split("|") if f]
        default = next((f.split(":", 1)[1] for f in filters if f.startswith("default:")), None)
        try:
            value = resolve(path, bindings, ctx)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                raise Missing(path)
            for f in filters:
                name, _, arg = f.partition(":")
                value = _apply(value, name, arg)
            if isinstance(value, bool):
                return "on" if value else "off"
            if shell and not isinstance(value, Quoted):
                return shlex.quote(str(value))
            return str(value)
        except Missing:
            return default if default is not None else MISSING
    return FIELD.sub(one, template)
