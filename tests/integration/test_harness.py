# SPDX-License-Identifier: MIT
"""Self-tests of the harness's single-leader checker on synthetic samples:
it must flag real overlaps and stale epochs, and never flag a clean handover."""

from zkharness import Sample, check_single_leader


def S(agent, t0, t1, epoch):
    return Sample(agent, t0, t1, True, True, epoch, "leader")


def test_clean_handover_is_accepted():
    samples = [S("a", 0.00, 0.01, 5), S("a", 0.02, 0.03, 5),
               S("b", 0.05, 0.06, 9), S("b", 0.07, 0.08, 9),
               S("a", 0.10, 0.11, 12)]          # a leads again, new term
    assert check_single_leader(samples) == []


def test_overlapping_windows_are_not_a_violation():
    # a's last true and b's first true overlap in time: unordered, not proof.
    samples = [S("a", 0.00, 0.05, 5), S("b", 0.04, 0.06, 9)]
    assert check_single_leader(samples) == []


def test_two_leaders_at_once_is_flagged():
    # b answers true while a holds one term on both sides of it.
    samples = [S("a", 0.00, 0.01, 5), S("b", 0.02, 0.03, 9), S("a", 0.04, 0.05, 5)]
    assert check_single_leader(samples)


def test_stale_epoch_after_successor_is_flagged():
    samples = [S("b", 0.00, 0.01, 9), S("a", 0.02, 0.03, 5)]
    assert check_single_leader(samples)


def test_same_epoch_two_agents_is_flagged():
    samples = [S("a", 0.00, 0.01, 5), S("b", 0.005, 0.02, 5)]
    assert check_single_leader(samples)


def test_leader_without_epoch_is_flagged():
    assert check_single_leader([S("a", 0.0, 0.1, None)])
