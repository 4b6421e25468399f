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


# --------------------------------------------------------------------------
# The audit of leadership intervals (check_audit) on synthetic agent logs

import json  # noqa: E402
import time  # noqa: E402

from zkharness import (audit_samples_outside, check_audit, parse_audit,  # noqa: E402
                       parse_traces)


def T(msg, level="debug"):
    return "2026-12-01T10:00:00.000Z zkelectd %s: %s" % (level, msg)


def J(msg, level="debug"):
    return json.dumps({"ts": "2026-12-01T10:00:00.000Z", "level": level, "msg": msg})


def START(agent, n):
    return "==== harness: start #%d of %s ====" % (n, agent)


def term(epoch, at_us, until_ms, leases=(), end_us=None, fmt=T):
    out = [fmt("role follower -> leader (claimed, epoch %d = 0x%x)" % (epoch, epoch), "info"),
           fmt("audit: lead epoch=%d at=%d until=%d" % (epoch, at_us, until_ms))]
    out += [fmt("audit: lease epoch=%d until=%d" % (epoch, u)) for u in leases]
    if end_us is not None:
        out.append(fmt("audit: end epoch=%d at=%d reason=stopping" % (epoch, end_us)))
    return out


def test_audit_clean_handover_is_accepted_and_gap_measured():
    a = [START("a", 1)] + term(5, 1_000_000, 1_400, [1_700, 2_000], end_us=1_900_000)
    b = [START("b", 1), T("audit: something else")] + term(9, 1_950_000, 2_300, [2_600])
    problems, fig = check_audit({"a": a, "b": b})
    assert problems == []
    assert fig["terms"] == 2 and fig["handovers"] == 1 and fig["open_terms"] == 1
    assert abs(fig["min_gap_ms"] - 50.0) < 1e-9      # 1.95 s - min(1.9 s, 2.0 s)


def test_audit_end_is_capped_by_the_lease():
    # the end line comes after the lease ran out: the interval ends at `until`
    iv, _, pr = parse_audit(term(5, 1_000_000, 1_300, [], end_us=5_000_000), "a")
    assert pr == [] and len(iv) == 1 and iv[0].end == 1_300_000


def test_audit_overlap_is_flagged():
    a = term(5, 1_000_000, 1_400, [1_700], end_us=1_800_000)
    b = term(9, 1_650_000, 2_300)              # starts before a's lease (1.7 s) ran out
    problems, fig = check_audit({"a": a, "b": b})
    assert any("two leaders at once" in p for p in problems), problems
    assert fig["min_gap_ms"] < 0


def test_audit_kill9_leaves_a_term_that_ends_at_its_last_until():
    # a is killed (no end line) and restarted under the same id (same log)
    a = [START("a", 1)] + term(5, 1_000_000, 1_400, [1_700]) + \
        [START("a", 2)] + term(12, 3_000_000, 3_500, [], end_us=3_200_000)
    ok = term(9, 1_700_001, 2_300, [], end_us=2_200_000)
    bad = term(9, 1_699_999, 2_300, [], end_us=2_200_000)
    problems, fig = check_audit({"a": a, "b": ok})
    assert problems == [], problems
    assert fig["open_terms"] == 1 and abs(fig["min_gap_ms"] - 0.001) < 1e-9
    problems, _ = check_audit({"a": a, "b": bad})
    assert any("two leaders at once" in p for p in problems), problems


def test_audit_agent_that_led_without_audit_lines_fails_loudly():
    # an agent build that does not log audit lines: the check must not pass
    a = [START("a", 1), T("role follower -> leader (claimed, epoch 5 = 0x5)", "info")]
    problems, _ = check_audit({"a": a, "b": [START("b", 1)]})
    assert len(problems) == 1 and "no 'audit: lead' line" in problems[0], problems


def test_audit_term_without_its_lead_line_is_flagged():
    a = term(5, 1_000_000, 1_400, [], end_us=1_100_000) + \
        [T("role follower -> leader (claimed, epoch 7 = 0x7)", "info")]
    problems, _ = check_audit({"a": a})
    assert any("epoch(s) 7" in p for p in problems), problems


def test_audit_epochs_going_back_are_flagged():
    a = term(9, 1_000_000, 1_400, [], end_us=1_100_000)
    b = term(5, 1_200_000, 1_600, [], end_us=1_300_000)
    problems, _ = check_audit({"a": a, "b": b})
    assert any("epochs do not increase" in p for p in problems), problems


def test_audit_contradictory_lines_are_flagged():
    a = term(5, 1_000_000, 1_400) + [T("audit: lease epoch=6 until=2000"),
                                     T("audit: end epoch=6 at=1100000 reason=x")]
    problems, _ = check_audit({"a": a})
    assert len(problems) == 2, problems


def test_audit_json_log_format():
    a = term(5, 1_000_000, 1_400, [1_700], end_us=1_800_000, fmt=J)
    iv, led, pr = parse_audit(a, "a")
    assert pr == [] and led == [5]
    assert [(i.epoch, i.start, i.end, i.leases) for i in iv] == [(5, 1_000_000, 1_700_000, 1)]


def test_audit_samples_outside_their_term_are_flagged():
    off = time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()
    iv, _, _ = parse_audit(term(5, 10_000_000, 10_500, [], end_us=10_400_000), "a")

    def at(us):
        return us / 1e6 - off
    inside = S("a", at(10_100_000), at(10_101_000), 5)
    after = S("a", at(10_450_000), at(10_451_000), 5)
    other_epoch = S("a", at(10_100_000), at(10_101_000), 6)
    assert audit_samples_outside(iv, [inside]) == []
    assert len(audit_samples_outside(iv, [after, other_epoch])) == 2


def test_trace_lines_are_parsed_in_text_and_json():
    lines = [START("a", 1), T("trace: stop at=100"), J("trace: told at=150"),
             T("trace: release-sent at=170", "info"), "hook output: trace: x at=1",
             T("tracer: stop at=1"), T("trace: release-done at=abc"),
             T("trace: confirm-done at=400 extra")]
    assert parse_traces(lines) == [("stop", 100), ("told", 150), ("release-sent", 170),
                                   ("confirm-done", 400)]
