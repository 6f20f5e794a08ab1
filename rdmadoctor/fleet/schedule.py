"""Which pairs `fleet probe` tests, in which rounds: no node is in two probes of one round, so no agent ever
serves two probes at once (its one rdma_cm listener would refuse the second, and two bursts would share its link
and both read low).

- all pairs, by the circle method (round-robin tournament): n-1 rounds of n/2 disjoint pairs for n even (n rounds,
  one node resting in each, for n odd); every pair exactly once.
- sampled: `rounds` of those rounds, evenly spread over the full cycle, so each node meets `rounds` partners far
  apart in the node order (nodes next to each other in the name order often share a switch); `seed` shuffles the
  order first, so successive runs cover other pairs.
- isolation retests: any list of pairs packed greedily into as few rounds as keep every node to one probe per round.

In a pair (a, b), a is the client (it runs `rdmadoctor check --peer b`) and b's agent serves the probe; the circle
method alternates the roles so each node is client in about half of its probes.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

Pair = Tuple[str, str]          # (client, agent)
ALL_PAIRS_UP_TO = 16            # nodes for which the default plan is every pair


def circle(nodes: Sequence[str]) -> List[List[Pair]]:
    """Every pair once, in rounds of disjoint pairs (Berger's circle method)."""
    order: List[Optional[str]] = list(nodes)
    if len(order) < 2:
        return []
    if len(order) % 2:
        order.append(None)                     # the node facing None rests this round
    n = len(order)
    fixed, rest = order[0], order[1:]
    rounds = []
    for r in range(n - 1):
        rotated = rest[r:] + rest[:r]
        line = [fixed] + rotated
        pairs = []
        for i in range(n // 2):
            x, y = line[i], line[n - 1 - i]
            if x is None or y is None:
                continue
            # a rotating node moves one place per round, so alternating on the place alternates its role;
            # the fixed node alternates by round
            client_first = (r % 2 == 0) if i == 0 else (i % 2 == 1)
            pairs.append((x, y) if client_first else (y, x))
        rounds.append(pairs)
    return rounds


@dataclass
class Plan:
    kind: str                                   # "all-pairs" | "sampled" | "isolation"
    rounds: List[List[Pair]] = field(default_factory=list)

    @property
    def pairs(self) -> int:
        return sum(len(r) for r in self.rounds)

    def check(self) -> None:
        """No node twice in one round (the invariant everything else relies on)."""
        for i, rnd in enumerate(self.rounds):
            seen: Dict[str, int] = {}
            for a, b in rnd:
                for node in (a, b):
                    seen[node] = seen.get(node, 0) + 1
            twice = sorted(n for n, k in seen.items() if k > 1)
            if twice:
                raise AssertionError(f"round {i + 1} gives {', '.join(twice)} two probes at once")

    def stats(self, round_seconds: float) -> Dict[str, object]:
        """What the plan costs: rounds, pairs, the bound on its length, and how long it keeps one agent busy."""
        served: Dict[str, int] = {}
        taking_part: Dict[str, int] = {}
        at_once = 0
        for rnd in self.rounds:
            in_round: Dict[str, int] = {}
            for a, b in rnd:
                served[b] = served.get(b, 0) + 1
                for node in (a, b):
                    taking_part[node] = taking_part.get(node, 0) + 1
                    in_round[node] = in_round.get(node, 0) + 1
            at_once = max([at_once, *in_round.values()])
        most_served = max(served.values(), default=0)
        return {
            "kind": self.kind, "rounds": len(self.rounds), "pairs": self.pairs,
            "round_seconds": round_seconds, "bound_seconds": round(len(self.rounds) * round_seconds, 3),
            "probes_per_agent_at_once": at_once,
            "most_probes_served_by_one_agent": most_served,
            "most_probes_per_node": max(taking_part.values(), default=0),
            # an agent serves at most one probe per round, each bounded by the round: this is the longest time
            # one agent's listener is in use over the whole plan
            "longest_agent_occupancy_seconds": round(most_served * round_seconds, 3),
        }


def plan(nodes: Sequence[str], rounds: Optional[int] = None, seed: Optional[int] = None) -> Plan:
    """The probe plan: every pair when `rounds` is None and there are at most ALL_PAIRS_UP_TO nodes (or when
    `rounds` covers the whole cycle); else `rounds` (default 8) evenly spread rounds of the cycle."""
    order = list(nodes)
    if seed is not None:
        random.Random(seed).shuffle(order)
    full = circle(order)
    if rounds is None and len(order) <= ALL_PAIRS_UP_TO:
        return Plan("all-pairs", full)
    want = rounds if rounds is not None else 8
    if want >= len(full):
        return Plan("all-pairs", full)
    picked = sorted({(k * len(full)) // want for k in range(max(1, want))})
    return Plan("sampled", _balanced([full[i] for i in picked]))


def _balanced(rounds: List[List[Pair]]) -> List[List[Pair]]:
    """Each pair turned so that the node that has served fewer probes so far is the agent: rounds picked out of
    the cycle lose its alternation of roles, and an agent that serves every probe would be busy longest."""
    served: Dict[str, int] = {}
    out = []
    for rnd in rounds:
        turned = []
        for a, b in rnd:
            if served.get(a, 0) < served.get(b, 0):
                a, b = b, a
            served[b] = served.get(b, 0) + 1
            turned.append((a, b))
        out.append(turned)
    return out


def pack(pairs: Iterable[Pair]) -> List[List[Pair]]:
    """Pairs into rounds, first fit: each pair goes into the first round where neither node is busy."""
    rounds: List[List[Pair]] = []
    busy: List[set] = []
    for a, b in pairs:
        for rnd, nodes in zip(rounds, busy):
            if a not in nodes and b not in nodes:
                rnd.append((a, b))
                nodes.update((a, b))
                break
        else:
            rounds.append([(a, b)])
            busy.append({a, b})
    return rounds
