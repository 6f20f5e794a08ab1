"""The probe schedule: no node in two probes of one round; every pair once in the full plan; the figures
docs/fleet.md quotes for 8, 64 and 1,000 nodes."""
from __future__ import annotations

import itertools

import pytest

from rdmadoctor.fleet import schedule

ROUND = 60.0


def names(n):
    return [f"node{i:04d}" for i in range(1, n + 1)]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8, 9, 16, 17, 64])
def test_full_plan_is_every_pair_once_and_disjoint_rounds(n):
    plan = schedule.Plan("all-pairs", schedule.circle(names(n)))
    plan.check()
    seen = [frozenset(p) for rnd in plan.rounds for p in rnd]
    assert len(seen) == len(set(seen)) == n * (n - 1) // 2
    assert len(plan.rounds) == (n - 1 if n % 2 == 0 else n)
    served = {}
    for _, b in (p for rnd in plan.rounds for p in rnd):
        served[b] = served.get(b, 0) + 1
    # roles alternate: no node is the agent in much more than half its probes
    assert max(served.values()) <= (n - 1) // 2 + 1


# (nodes, kind, rounds, pairs, most probes one agent serves, longest occupancy at 60 s per round)
FIGURES = [
    (8, "all-pairs", 7, 28, 4, 240.0),
    (64, "sampled", 8, 256, 5, 300.0),
    (1000, "sampled", 8, 4000, 5, 300.0),
]


@pytest.mark.parametrize("n,kind,rounds,pairs,served,occupancy", FIGURES)
def test_default_plan_figures(n, kind, rounds, pairs, served, occupancy):
    plan = schedule.plan(names(n))
    plan.check()
    st = plan.stats(ROUND)
    assert (st["kind"], st["rounds"], st["pairs"]) == (kind, rounds, pairs)
    assert st["probes_per_agent_at_once"] == 1
    assert st["most_probes_served_by_one_agent"] == served
    assert st["longest_agent_occupancy_seconds"] == occupancy
    assert st["bound_seconds"] == rounds * ROUND
    every = {node for rnd in plan.rounds for p in rnd for node in p}
    assert every == set(names(n))              # each node is probed, even sampled


@pytest.mark.parametrize("n,rounds,served", [(64, 63, 32), (1000, 999, 500)])
def test_full_round_robin_figures(n, rounds, served):
    plan = schedule.plan(names(n), rounds=100000)
    st = plan.stats(ROUND)
    assert (st["kind"], st["rounds"], st["pairs"]) == ("all-pairs", rounds, n * (n - 1) // 2)
    assert st["probes_per_agent_at_once"] == 1 and st["most_probes_served_by_one_agent"] == served


def test_seed_changes_the_sampled_pairs():
    a = schedule.plan(names(64), seed=1)
    b = schedule.plan(names(64), seed=2)
    assert {frozenset(p) for r in a.rounds for p in r} != {frozenset(p) for r in b.rounds for p in r}
    a.check()
    b.check()


def test_pack_keeps_every_node_to_one_probe_per_round():
    pairs = [("a", "g"), ("b", "g"), ("g", "c"), ("d", "e"), ("a", "e")]
    rounds = schedule.pack(pairs)
    schedule.Plan("isolation", rounds).check()
    assert sorted(itertools.chain.from_iterable(rounds)) == sorted(pairs)
    assert len(rounds) == 3                     # g is in three pairs


def test_check_catches_a_double_booking():
    with pytest.raises(AssertionError, match="node2 two probes"):
        schedule.Plan("x", [[("node1", "node2"), ("node3", "node2")]]).check()
