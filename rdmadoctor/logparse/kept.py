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

All the inputs together keep MAX_INPUT_RUNS runs (InputRuns), so that memory is bounded for any number of files, not
only for any size of one. Past them, a run that shows what no kept run shows (its producer, tool, side, whether it
printed results, its command's options, its messages' ids and its errors' codes) takes the place of the last copy of
what kept runs show most often, and a run that failed takes the place of a kept run without an error that others
repeat. So a thousand nodes' flush errors do not hide the one node whose completion failed with another status, nor
the one stalled run among thousands that passed. A server or client run let go is held a while and kept after all
when its partner is; otherwise it leaves its partner without a pair, and every other pair as it was (`Run.pair`: the
i-th server meets the i-th client of the whole input, not of the runs kept, where the addresses the two printed do not
pair them otherwise). An input none of whose runs is kept
gives back the room its lines took for excerpts (nothing will quote them), and past the first MAX_LISTED_INPUTS
inputs it is counted, not listed. When the kept runs hold more than MAX_INPUT_MESSAGES messages together, what each
run may keep is halved (not below MIN_RUN_MESSAGES) and every kept run trimmed to it as a full run gives messages up
(`trim`): a thousand ranks' logs of four hundred INFO lines each keep each rank's kinds, not four hundred thousand
lines.
"""
from __future__ import annotations

from collections import Counter
from heapq import heapify, heappop, heappush
from operator import itemgetter
from typing import Any, Dict, Hashable, List, Mapping, Optional, Tuple

from rdmadoctor.model import Message, Run

MAX_RUNS = 256          # runs kept per source
MAX_MESSAGES = 400      # messages kept per run
MAX_INPUT_RUNS = 2048   # runs kept by all the inputs together (a run costs about 5 kB)
MAX_LISTED_INPUTS = 4096    # inputs listed whether or not a run of theirs is kept; past them, only those whose is
MAX_INPUT_MESSAGES = 1 << 14     # messages kept by all the inputs' runs together (a message costs about 1 kB)
MIN_RUN_MESSAGES = MAX_INPUT_MESSAGES // MAX_INPUT_RUNS    # what a run keeps at least, when the inputs keep many runs
# the fields that carry a code: a status, an errno, a return value, an event; not an address, a size or a count
CODE_FIELDS = ("status", "status_name", "ucs_status", "errno", "code", "ret", "err", "error", "event",
               "async_event", "event_status", "syndrome", "vendor_err")
_SEVERITY = {"notice": 0, "warning": 1, "error": 2}
_LEAST_WORTH = itemgetter(0, 1)       # of (severity, -copies, kind): the least severe, then the most copies


CODE_NAMES = frozenset(CODE_FIELDS)


def kind_of(message: Message) -> Tuple[Hashable, ...]:
    """(severity, id, codes): a kind, which sorts as the kinds to give up first (the least severe)."""
    return kind_key(message.kind, message.id, message.fields)


def kind_key(kind: str, message_id: str, fields: Mapping[str, Any]) -> Tuple[Hashable, ...]:
    """kind_of a message of that kind, id and fields, before it is made."""
    if CODE_NAMES.isdisjoint(fields):
        return (_SEVERITY.get(kind, 2), message_id)       # most messages carry no code (an INFO line)
    codes = [(name, fields[name]) for name in CODE_FIELDS if name in fields]
    return (_SEVERITY.get(kind, 2), message_id, *codes)


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
        if self.admits(run, message.kind, message.id, message.fields):
            run.messages.append(message)

    def admits(self, run: Run, kind: str, message_id: str, fields: Mapping[str, Any]) -> bool:
        """Whether the run keeps a message of that kind, id and fields; the caller then appends it, made only now
        (once a run of a long log is full, most of its messages are left out). A full run keeps it in the place of a
        copy of another kind, given up here; else the message is counted as left out."""
        if len(run.messages) < MAX_MESSAGES:
            return True
        if id(run) not in self._full:
            self._full[id(run)] = _Held(run)
        newcomer = kind_key(kind, message_id, fields)
        if self.left_out(run, newcomer):
            return False
        held = self._full[id(run)]
        run.messages_dropped += 1
        copies = held.copies
        messages = run.messages
        victim = min(((k[0], -n, k) for k, n in copies.items() if n > 1), key=_LEAST_WORTH)[2]
        for i in range(len(messages) - 1, -1, -1):
            if kind_of(messages[i]) == victim:
                del messages[i]
                break
        copies[victim] -= 1
        if copies[victim] == 1:
            held.repeated -= 1
        copies[newcomer] = 1
        return True

    def full(self, run: Run) -> bool:
        """The run holds MAX_MESSAGES messages, and is held as full (admits was asked once it was)."""
        return id(run) in self._full and len(run.messages) >= MAX_MESSAGES

    def left_out(self, run: Run, key: Tuple[Hashable, ...]) -> bool:
        """True, the message counted as left out, when the run is full and keeps no new kind for it: it holds a copy
        of this kind (`key`: kind_key), or every message it keeps is the only one of its kind. False, with nothing
        changed, when admits must decide (a run with room, or one not yet held as full)."""
        if not self.full(run):
            return False
        held = self._full[id(run)]
        if held.repeated and key not in held.copies:
            return False
        run.messages_dropped += 1
        return True

    def forget(self, run: Run) -> None:
        """A run that will get no more messages, or is not kept."""
        self._full.pop(id(run), None)

    def clear(self) -> None:
        self._full.clear()


def shown_by(run: Run) -> Tuple[Hashable, ...]:
    """What a run shows, as far as rules tell runs apart: its producer, tool and side, whether it printed results,
    the options its command line gives, and the ids of its messages (an error's with its codes). A stalled run (no
    results, no error) shows something a healthy one does not."""
    return (run.producer, run.tool, run.side, bool(run.results),
            frozenset(run.command.options) if run.command is not None else None,
            frozenset(kind_of(m) if m.kind == "error" else m.id for m in run.messages))


def trim(run: Run, limit: int) -> None:
    """At most `limit` of a run's messages, given up as KeptMessages gives them up: the last copies of the kind with
    the most copies, the least severe first; then, when the run holds more kinds than `limit`, the least severe and
    the latest kinds."""
    messages = run.messages
    if len(messages) <= limit:
        return
    kinds = [kind_of(m) for m in messages]
    copies = Counter(kinds)
    first = {k: i for i, k in reversed(list(enumerate(kinds)))}
    excess = len(messages) - limit
    heap = [(k[0], -n, first[k], k) for k, n in copies.items() if n > 1]     # first[k]: a tie never compares kinds
    heapify(heap)
    while excess and heap:
        _, _, order, kind = heappop(heap)
        copies[kind] -= 1
        excess -= 1
        if copies[kind] > 1:
            heappush(heap, (kind[0], -copies[kind], order, kind))
    for kind in sorted(copies, key=lambda k: (k[0], -first[k]))[:excess]:
        copies[kind] = 0
    kept = []
    for message, kind in zip(messages, kinds):
        if copies[kind]:
            kept.append(message)
            copies[kind] -= 1
    run.messages_dropped += len(messages) - len(kept)
    messages[:] = kept


_Place = Tuple[str, str, int]      # (producer, side, place among the input's runs of that producer and side)
_OTHER_SIDE = {"server": "client", "client": "server"}
RECENT_SIDES = 64       # server and client runs let go that are held a while, should their partner be kept


class InputRuns:
    """The runs of every input read so far, bounded by `limit` (MAX_INPUT_RUNS); `dropped` counts the runs let go.

    Once `limit` runs are kept, a newcomer that shows what no kept run shows (`shown_by`), or whose server or client
    partner is kept, takes the place of the last copy of what kept runs show most often (the least severe first,
    a run without a kept partner before one with); a failed newcomer whose failure is kept already takes the place of
    the last kept run without an error whose showing is repeated. Anything else is let go; a server or client let go
    is held among the last RECENT_SIDES, and kept after all when its partner is."""

    def __init__(self, limit: int = MAX_INPUT_RUNS):
        self.limit = limit
        self.runs: List[Run] = []
        self.dropped = 0
        self.messages = 0                           # the kept runs' messages
        self.per_run = MAX_MESSAGES                 # what a kept run may keep
        self._shown: Dict[Tuple[Hashable, ...], List[Run]] = {}     # what kept runs show -> those runs, in order
        self._severity: Dict[Tuple[Hashable, ...], int] = {}        # the worst message kind it includes
        self._of: Dict[int, Tuple[Hashable, ...]] = {}              # id() of a kept run -> what it shows
        self._healthy: List[Run] = []               # kept runs without an error, in order (some let go since)
        self._places: Dict[Tuple[str, str], int] = {}   # (producer, side) -> the server or client runs seen
        self._place: Dict[int, _Place] = {}         # id() of a kept server or client run -> its place
        self._at: Dict[_Place, Run] = {}            # and back
        self._recent: Dict[_Place, Tuple[Run, Tuple[Hashable, ...], int]] = {}     # let go lately, oldest first

    def add(self, run: Run) -> bool:
        """`run`, after every run of the inputs read before it. Whether it is kept."""
        shown = shown_by(run)
        severity = max((_SEVERITY.get(m.kind, 2) for m in run.messages), default=-1)
        place: Optional[_Place] = None
        partner: Optional[_Place] = None
        if run.side in _OTHER_SIDE:
            number = self._places.get((run.producer, run.side), 0)
            self._places[(run.producer, run.side)] = number + 1
            place, partner = (run.producer, run.side, number), (run.producer, _OTHER_SIDE[run.side], number)
        if len(self.runs) >= self.limit:
            victim = self._victim(shown, severity == 2, partner in self._at)
            if victim is None:
                self.dropped += 1
                if place is not None:
                    self._hold(place, run, shown, severity)
                return False
            self._let_go(victim)
        self._keep(run, shown, severity, place)
        held = self._recent.pop(partner, None) if partner is not None else None
        if held is not None:
            # its partner was let go a moment ago: kept after all, so that the pair is examined
            victim = self._victim(held[1], False, True)
            if victim is not None and victim is not run:
                self._let_go(victim)
                self._keep(held[0], held[1], held[2], partner)
                self.dropped -= 1
        return True

    def _keep(self, run: Run, shown: Tuple[Hashable, ...], severity: int, place: Optional[_Place]) -> None:
        trim(run, self.per_run)
        self.runs.append(run)
        self.messages += len(run.messages)
        self._shown.setdefault(shown, []).append(run)
        self._severity[shown] = severity
        self._of[id(run)] = shown
        if place is not None:
            self._place[id(run)] = place
            self._at[place] = run
        if severity < 2:
            self._healthy.append(run)
        while self.messages > MAX_INPUT_MESSAGES and self.per_run > MIN_RUN_MESSAGES:
            self.per_run = max(MIN_RUN_MESSAGES, self.per_run // 2)
            for kept in self.runs:
                trim(kept, self.per_run)
            self.messages = sum(len(kept.messages) for kept in self.runs)

    def _hold(self, place: _Place, run: Run, shown: Tuple[Hashable, ...], severity: int) -> None:
        self._recent[place] = (run, shown, severity)
        if len(self._recent) > RECENT_SIDES:
            del self._recent[next(iter(self._recent))]

    def _paired(self, run: Run) -> bool:
        place = self._place.get(id(run))
        return place is not None and (place[0], _OTHER_SIDE[place[1]], place[2]) in self._at

    def _victim(self, shown: Tuple[Hashable, ...], failed: bool, partner_kept: bool) -> Optional[Run]:
        if shown not in self._shown or partner_kept:
            repeated = [(self._severity[s], -len(runs), n, s) for n, (s, runs) in enumerate(self._shown.items())
                        if len(runs) > 1]
            if repeated:
                copies = self._shown[min(repeated)[3]]
                return next((r for r in reversed(copies) if not self._paired(r)), copies[-1])
            return None
        if not failed:
            return None
        while self._healthy:
            healthy = self._healthy.pop()
            if id(healthy) in self._of and len(self._shown[self._of[id(healthy)]]) > 1:
                return healthy
        return None

    def _let_go(self, run: Run) -> None:
        del self.runs[next(i for i in range(len(self.runs) - 1, -1, -1) if self.runs[i] is run)]
        shown = self._of.pop(id(run))
        place = self._place.pop(id(run), None)
        if place is not None:
            del self._at[place]
        copies = self._shown[shown]
        del copies[next(i for i in range(len(copies) - 1, -1, -1) if copies[i] is run)]
        if not copies:
            del self._shown[shown], self._severity[shown]
        self.messages -= len(run.messages)
        self.dropped += 1

    def place_pairs(self) -> None:
        """When runs were let go, each kept server and client run is told its place among all the input's runs of
        its producer and side (Run.pair): a pair whose one side was let go is no pair, and the pairs after it stay."""
        if self.dropped:
            for run in self.runs:
                place = self._place.get(id(run))
                run.pair = place[2] if place is not None else None
