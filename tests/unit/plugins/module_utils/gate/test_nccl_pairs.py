"""Pair plans and the isolation of bad nodes from pair results."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.raygate.cluster.plugins.module_utils.gate import nccl_pairs as pairs


def names(n):
    return ["h%d" % i for i in range(n)]


def simulate(pair, bad):
    """The model the isolation relies on: a pair fails when it holds a bad node."""
    return {"hosts": list(pair), "passed": not (set(pair) & bad)}


def settle(hosts, bad, known_good=(), max_phases=None):
    """Run the rounds, then retest as isolate() asks; returns (last isolate result, retest phases)."""
    tests = [simulate(pair, bad) for plan in pairs.rounds(hosts) for pair in plan]
    phases = 0
    while True:
        result = pairs.isolate(tests, known_good, hosts)
        if not result["retests"] or (max_phases is not None and phases >= max_phases):
            return result, phases
        phases += 1
        tests += [simulate(pair, bad) for pair in result["retests"]]


# ---------------------------------------------------------------------------- rounds


@pytest.mark.parametrize("n", range(2, 10))
def test_rounds_cover_every_node_with_disjoint_pairs(n):
    hosts = names(n)
    plan = pairs.rounds(hosts)
    assert len(plan) == (1 if n == 2 else 2)
    for round_ in plan:
        flat = [h for pair in round_ for h in pair]
        assert len(flat) == len(set(flat)), round_
        assert all(a != b for a, b in round_)
    tested = {h for round_ in plan for pair in round_ for h in pair}
    assert tested == set(hosts)
    all_pairs = [frozenset(pair) for round_ in plan for pair in round_]
    assert len(all_pairs) == len(set(all_pairs)), "a pair is tested twice"


@pytest.mark.parametrize("n", range(3, 10))
def test_rounds_give_a_second_partner_to_all_but_the_odd_ends(n):
    plan = pairs.rounds(names(n))
    partners = {}
    for round_ in plan:
        for a, b in round_:
            partners.setdefault(a, set()).add(b)
            partners.setdefault(b, set()).add(a)
    single = sorted(h for h, p in partners.items() if len(p) == 1)
    assert single == ([] if n % 2 == 0 else ["h0", "h%d" % (n - 1)])
    assert all(len(p) <= 2 for p in partners.values())


def test_rounds_of_four_follow_the_ring_shift():
    assert pairs.rounds(["a", "b", "c", "d"]) == [[("a", "b"), ("c", "d")], [("b", "c"), ("d", "a")]]
    assert pairs.rounds(["a", "b", "c"]) == [[("a", "b")], [("b", "c")]]
    assert pairs.rounds(["a", "b"]) == [[("a", "b")]]


@pytest.mark.parametrize("hosts", [[], ["a"], ["a", "b", "a"]])
def test_rounds_refuse_too_few_or_repeated_hosts(hosts):
    with pytest.raises(ValueError):
        pairs.rounds(hosts)


# ---------------------------------------------------------------------------- isolate


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=3, max_value=9).flatmap(
        lambda n: st.tuples(st.just(n), st.sets(st.integers(min_value=0, max_value=n - 1), max_size=n - 2))
    )
)
def test_isolate_with_retests_finds_exactly_the_bad_nodes(case):
    n, bad_idx = case
    hosts = names(n)
    bad = {hosts[i] for i in bad_idx}
    result, phases = settle(hosts, bad)
    assert set(result["bad"]) == bad
    assert set(result["good"]) == set(hosts) - bad
    assert result["unresolved"] == []
    assert phases <= n - 1


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=2, max_value=9).flatmap(
        lambda n: st.tuples(st.just(n), st.sets(st.integers(min_value=0, max_value=n - 1)))
    )
)
def test_isolate_never_blames_a_good_node_or_clears_a_bad_one(case):
    # Sound at every step, whatever the number of bad nodes (all of them included).
    n, bad_idx = case
    hosts = names(n)
    bad = {hosts[i] for i in bad_idx}
    tests = [simulate(pair, bad) for plan in pairs.rounds(hosts) for pair in plan]
    for step in range(n + 1):
        result = pairs.isolate(tests, (), hosts)
        assert set(result["bad"]) <= bad
        assert not set(result["good"]) & bad
        if not result["retests"]:
            break
        assert step < n, "retests never stop"
        tests += [simulate(pair, bad) for pair in result["retests"]]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=2, max_value=9).flatmap(
        lambda n: st.tuples(st.just(n), st.sets(st.integers(min_value=0, max_value=n - 1)))
    )
)
def test_a_known_good_partner_settles_everything_in_one_retest_phase(case):
    n, bad_idx = case
    hosts = names(n)
    bad = {hosts[i] for i in bad_idx}
    result, phases = settle(hosts, bad, known_good=["ref"])
    assert set(result["bad"]) == bad
    assert set(result["good"]) == set(hosts) - bad
    assert phases <= 1


@pytest.mark.parametrize("n", range(3, 13))
def test_the_default_two_retest_phases_settle_up_to_two_bad_nodes(n):
    hosts = names(n)
    for k in (0, 1, 2):
        if k > n - 2:
            continue
        for bad in itertools.combinations(hosts, k):
            result = settle(hosts, set(bad), max_phases=2)[0]
            assert set(result["bad"]) == set(bad), (n, bad, result)
            assert result["unresolved"] == []


def test_two_failing_hosts_without_reference_cannot_be_isolated():
    result = pairs.isolate([{"hosts": ["a", "b"], "passed": False}], (), ["a", "b"])
    assert result["unresolved"] == ["a", "b"]
    assert result["retests"] == [] and result["retest_kind"] is None
    assert result["nodes"]["a"]["reason"] == "failed with b, none of them proven good"


def test_two_failures_are_no_proof():
    # h2 sits between the bad h1 and h3 and fails twice; it is retested, not blamed.
    hosts = names(6)
    tests = [simulate(pair, {"h1", "h3"}) for plan in pairs.rounds(hosts) for pair in plan]
    result = pairs.isolate(tests, (), hosts)
    assert result["bad"] == ["h1", "h3"]
    assert result["unresolved"] == ["h2"]
    assert result["good"] == ["h0", "h4", "h5"]
    assert result["retests"] == [("h2", "h0")]
    assert result["retest_kind"] == "retest"


def test_no_pass_at_all_tries_pairs_never_tested_together():
    # a-b, c-d, b-c, d-a all failed (a and c are bad): only a-c and b-d are new.
    tests = [simulate(pair, {"a", "c"}) for plan in pairs.rounds(["a", "b", "c", "d"]) for pair in plan]
    result = pairs.isolate(tests, (), ["a", "b", "c", "d"])
    assert result["good"] == [] and result["retest_kind"] == "discovery"
    assert sorted(frozenset(p) for p in result["retests"]) == sorted([frozenset("ac"), frozenset("bd")])


def test_evidence_and_reasons():
    tests = [
        {"hosts": ["a", "b"], "passed": False},
        {"hosts": ["b", "c"], "passed": True},
        {"hosts": ["a", "ref"], "passed": False},
    ]
    result = pairs.isolate(tests, ["ref"], ["a", "b", "c"])
    a, b = result["nodes"]["a"], result["nodes"]["b"]
    assert a["verdict"] == "bad" and a["evidence"] == 2 and a["reason"] == "failed with ref, which is known good"
    assert a["partners"] == ["b", "ref"]
    assert b["verdict"] == "good" and b["evidence"] == 1 and b["reason"] == "passed with c; failed with a"
    assert result["retests"] == []


def test_a_known_good_host_in_the_list_stays_good_and_untested_hosts_are_named():
    tests = [{"hosts": ["a", "b"], "passed": False}]
    result = pairs.isolate(tests, ["a"], ["a", "b", "c"])
    assert result["nodes"]["a"]["verdict"] == "good"
    assert result["nodes"]["a"]["reason"] == "listed as known good"
    assert result["nodes"]["b"]["verdict"] == "bad"
    assert result["nodes"]["c"] == {"verdict": "untested", "reason": "not tested", "partners": [], "evidence": None}


def test_batches_keep_order_and_never_share_a_node():
    given_pairs = [("a", "g"), ("b", "g"), ("c", "d"), ("e", "g"), ("d", "f")]
    assert pairs.batches(given_pairs) == [[("a", "g"), ("c", "d")], [("b", "g"), ("d", "f")], [("e", "g")]]
    assert pairs.batches([]) == []


@settings(deadline=None)  # CI runs the units beside other checks: no wall-clock limit per example
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(10, 19)), max_size=20))
def test_batches_are_disjoint_and_cover_every_pair(given_pairs):
    out = pairs.batches(given_pairs)
    assert sorted(p for batch in out for p in batch) == sorted(given_pairs)
    for batch in out:
        hosts = [h for pair in batch for h in pair]
        assert len(hosts) == len(set(hosts))
