"""What a source keeps when it prints more than it can: its first MAX_RUNS runs, each run's messages.

A source keeps MAX_RUNS runs; a later run that failed takes the place of the last kept run without an error
(runs.RunBuilder for perftest's runs, producers.ProducerRuns for the others').

A job's log repeats: every rank prints the same INFO lines, every queue pair the same flush error. A run keeps its
first MAX_MESSAGES messages; after them, a message of a kind the run has not kept yet still goes in, in the place
of the last kept copy of the kind the run holds most copies of (notices before warnings, warnings before errors).
So the decisive error that a thousand ranks' INFO lines precede is kept, and so is a status 12 that follows
hundreds of status 5 flush errors. Only a run whose 400 kept messages are 400 kinds, one copy each, turns a new kind
away. What is not kept is counted in `Run.messages_dropped`.

A kind is a message's catalogue id and its codes (the fields that say what went wrong, not where): two completions
with error 12 from two peers are one kind, error 12 and error 5 are two.
"""
from __future__ import annotations

from collections import Counter
from operator import itemgetter
from typing import Dict, Hashable, Tuple

from rdmadoctor.model import Message, Run

MAX_RUNS = 256          # runs kept per source
MAX_MESSAGES = 400      # messages kept per run
# the fields that carry a code: a status, an errno, a return value, an event; not an address, a size or a count
CODE_FIELDS = ("status", "status_name", "ucs_status", "errno", "code", "ret", "err", "error", "event",
               "async_event", "event_status", "syndrome", "vendor_err")
_SEVERITY = {"notice": 0, "warning": 1, "error": 2}
_LEAST_WORTH = itemgetter(0, 1)       # of (severity, -copies, kind): the least severe, then the most copies


def kind_of(message: Message) -> Tuple[Hashable, ...]:
    """(severity, id, codes): a kind, which sorts as the kinds to give up first (the least severe)."""
    fields = message.fields
    codes = [(name, fields[name]) for name in CODE_FIELDS if name in fields]
    return (_SEVERITY.get(message.kind, 2), message.id, *codes)


class _Held:
    """What is held about a full run: how many copies of each kind it keeps, and how many kinds have more than one."""
    __slots__ = ("run", "copies", "repeated")

    def __init__(self, run: Run):
        self.run = run              # (held, so that its id is not another run's while it is here)
        self.copies = Counter(map(kind_of, run.messages))
        self.repeated = sum(1 for n in self.copies.values() if n > 1)


class KeptMessages:
    """The messages of a builder's runs, bounded per run. What it holds about a run is made when the run first fills
    up, and held until `forget`."""

    def __init__(self):
        self._full: Dict[int, _Held] = {}     # id(run) -> what is held about it

    def add(self, run: Run, message: Message) -> None:
        messages = run.messages
        if len(messages) < MAX_MESSAGES:
            messages.append(message)
            return
        held = self._full.get(id(run))
        if held is None:
            held = self._full[id(run)] = _Held(run)
        run.messages_dropped += 1
        if not held.repeated:
            return      # every kept message is the only one of its kind: the newcomer is the one left out
        copies = held.copies
        kind = kind_of(message)
        if kind in copies:
            return
        victim = min(((k[0], -n, k) for k, n in copies.items() if n > 1), key=_LEAST_WORTH)[2]
        for i in range(len(messages) - 1, -1, -1):
            if kind_of(messages[i]) == victim:
                del messages[i]
                break
        copies[victim] -= 1
        if copies[victim] == 1:
            held.repeated -= 1
        copies[kind] = 1
        messages.append(message)

    def forget(self, run: Run) -> None:
        """A run that will get no more messages, or is not kept."""
        self._full.pop(id(run), None)

    def clear(self) -> None:
        self._full.clear()
