"""The pure parts of the portal's metrics: histogram buckets and reconcile outcomes."""

from portal.metrics.signals import reconcile_outcome
from portal.metrics.store import BUCKETS, _histogram


def test_stored_buckets_become_cumulative_ending_with_inf():
    # One observation at 0.05 s (first bucket, le is inclusive), two at 3 s, one at 1000 s.
    raw = {b"0": b"1", str(BUCKETS.index(5.0)).encode(): b"2",
           str(len(BUCKETS)).encode(): b"1", b"sum": b"1006.05", b"count": b"4"}
    hist = _histogram(raw)
    buckets = dict(hist.buckets)
    assert buckets["0.05"] == 1 and buckets["2.5"] == 1
    assert buckets["5.0"] == 3 and buckets["300.0"] == 3
    assert buckets["+Inf"] == 4 == hist.count
    assert hist.sum == 1006.05
    assert [le for le, _ in hist.buckets][-1] == "+Inf"
    counts = [n for _, n in hist.buckets]
    assert counts == sorted(counts)


def test_reconcile_outcome_reads_the_task_result():
    assert reconcile_outcome("SUCCESS", {"cluster_id": 1, "writes": 5, "failed": 0}) == ("ok", 5, 0)
    assert reconcile_outcome("SUCCESS", {"writes": 3, "failed": 2}) == ("failed_objects", 3, 2)
    assert reconcile_outcome("SUCCESS", {"cluster_id": 1, "skipped": "busy"}) == ("skipped", 0, 0)
    assert reconcile_outcome("SUCCESS", {"cluster_id": 1, "skipped": True}) == ("skipped", 0, 0)
    assert reconcile_outcome("RETRY", None) == ("retry", 0, 0)
    assert reconcile_outcome("FAILURE", ValueError("x")) == ("error", 0, 0)
