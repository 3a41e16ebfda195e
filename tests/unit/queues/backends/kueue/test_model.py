"""Kueue scenarios through the scheduler simulator, with exact expected admissions."""

import random

import pytest

from queues.backends.kueue.model import KueueSimulator
from queues.schedmodel import NodePool, SimJob
from queues.specs import CohortSpec, FlavorQuota, SpecError, TeamQueueSpec

GPU = "nvidia.com/gpu"


def team(slug, *quotas, cohort="research", **kw):
    """A team whose quotas are (flavor, nominal, borrowing_limit, lending_limit)."""
    return TeamQueueSpec(
        slug=slug, display_name=slug.title(), cohort=cohort,
        quotas=tuple(
            FlavorQuota(flavor=f, gpu_resource=GPU, nominal_gpus=n,
                        borrowing_limit_gpus=b, lending_limit_gpus=lend)
            for f, n, b, lend in quotas
        ),
        **kw,
    )


def job(ns, name, gpus=8, workers=1, **kw):
    return SimJob(name=name, namespace=ns, workers=workers, gpus_per_worker=gpus, **kw)


def events_of(result, key, kind=None):
    return [e for e in result.events if e.workload == key and (kind is None or e.kind == kind)]


def test_borrowing_within_the_borrowing_limit():
    sim = KueueSimulator([team("a", ("h100", 8, 4, None)), team("b", ("h100", 8, None, None))])
    sim.submit(job("a", "own", 8, duration=100))
    sim.submit(job("a", "borrow", 4, duration=100))
    sim.submit(job("a", "over", 4, duration=10))
    sim.advance(0)
    assert sim.available("a", "h100") == 0  # 8 own + 4 borrowed = nominal + borrowingLimit
    assert sim.available("b", "h100") == 4  # b's unused nominal is still its own
    status = sim.workload_status("a/over")
    reserved = next(c for c in status["conditions"] if c["type"] == "QuotaReserved")
    assert (reserved["status"], reserved["reason"]) == ("False", "WaitingForQuota")
    assert reserved["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for "
        "nvidia.com/gpu in flavor h100, 4 more needed")
    result = sim.run()
    assert result.admissions() == [
        (0.0, "a/own", "h100"), (0.0, "a/borrow", "h100"), (100.0, "a/over", "h100")]
    assert [(u.time, u.gpus, u.borrowed) for u in result.usage if u.queue == "a"] == [
        (0.0, 12, 4), (100.0, 4, 0), (110.0, 0, 0)]
    assert sum(r.evictions for r in result.workloads.values()) == 0


def test_lending_limit_holds_gpus_back():
    # a lends at most 2 of its 8 GPUs; b (nominal 4) may borrow without limit
    sim = KueueSimulator([team("a", ("h100", 8, None, 2)), team("b", ("h100", 4, None, None))])
    sim.submit(job("b", "six", 6, duration=50))
    sim.submit(job("b", "two-more", 2, duration=10))
    sim.submit(job("a", "six", 6, submit_time=5, duration=10))
    sim.advance(5)
    assert sim.available("b", "h100") == 0  # a still has 6 idle GPUs, but lends only 2
    assert events_of(sim.result(), "b/two-more", "pending")[-1].message.endswith(
        "in flavor h100, 2 more needed")
    result = sim.run()
    # a gets its 6 kept-back GPUs at once, without preempting b
    assert result.admissions() == [
        (0.0, "b/six", "h100"), (5.0, "a/six", "h100"), (50.0, "b/two-more", "h100")]
    assert not [e for e in result.events if e.kind == "preempted"]


def test_cohort_shared_pool_is_added_to_the_pool():
    pool = CohortSpec(name="research", shared_pool=(
        FlavorQuota(flavor="h100", gpu_resource=GPU, nominal_gpus=8),))
    sim = KueueSimulator([team("a", ("h100", 0, None, None))], [pool])
    sim.submit(job("a", "pool", 8, duration=10))
    sim.submit(job("a", "more", 1, duration=10))
    result = sim.run()
    assert result.admissions() == [(0.0, "a/pool", "h100"), (10.0, "a/more", "h100")]


def test_reclaim_when_the_lender_needs_its_quota():
    sim = KueueSimulator([team("a", ("h100", 8, None, None)), team("b", ("h100", 0, None, None))])
    sim.submit(job("b", "borrower", 8, duration=100))
    sim.submit(job("a", "owner", 8, submit_time=10, duration=20))
    result = sim.run()
    assert result.admissions() == [
        (0.0, "b/borrower", "h100"), (10.0, "a/owner", "h100"), (30.0, "b/borrower", "h100")]
    [pending] = events_of(result, "a/owner", "pending")
    assert (pending.reason, pending.message) == (
        "WaitingForPreemptedWorkloads",
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor h100, 8 more needed. Pending the preemption of 1 workload(s)")
    [preempted] = events_of(result, "b/borrower", "preempted")
    assert (preempted.time, preempted.reason, preempted.by) == (
        10.0, "InCohortReclamation", "a/owner")
    assert preempted.message.startswith("Preempted to accommodate a workload (UID: ")
    assert preempted.message.endswith(
        "due to reclamation within the cohort; preemptor path: /research/a; "
        "preemptee path: /research/b")
    record = result.workloads["b/borrower"]
    assert (record.evictions, record.finished) == (1, 130.0)  # restarted from zero at 30
    assert record.conditions["Preempted"]["reason"] == "InCohortReclamation"
    assert record.conditions["Evicted"]["status"] == "False"  # admitted again since


def test_reclaim_never_policy_keeps_the_borrower():
    sim = KueueSimulator([team("a", ("h100", 8, None, None), reclaim_within_cohort="Never"),
                          team("b", ("h100", 0, None, None))])
    sim.submit(job("b", "borrower", 8, duration=100))
    sim.submit(job("a", "owner", 8, submit_time=10, duration=20))
    assert sim.run().admissions() == [(0.0, "b/borrower", "h100"), (100.0, "a/owner", "h100")]


def test_gang_that_does_not_fit_waits_whole():
    nodes = [NodePool(flavor="h100", nodes=2, units_per_node=8)]
    sim = KueueSimulator([team("a", ("h100", 16, None, None), cohort=None)], node_pools=nodes)
    sim.submit(job("a", "small", 3, workers=2, duration=40))  # both pods on h100-0 (2 left)
    sim.submit(job("a", "gang", 5, workers=2, submit_time=1, duration=10))
    sim.submit(job("a", "late", 8, workers=1, submit_time=2, duration=5))
    sim.advance(2)
    gang = sim.workloads["a/gang"]
    # quota has 10 of the 10 GPUs it needs, but only one node has room for a 5-GPU pod
    assert gang.state == "Pending" and gang.placements == ()
    assert gang.conditions["QuotaReserved"]["message"] == (
        "couldn't assign flavors to pod set main: insufficient free nvidia.com/gpu on the "
        "nodes of flavor h100 for 2 pod(s) of 5")
    # BestEffortFIFO: the gang that does not fit does not block a later job that does
    assert sim.workloads["a/late"].state == "Admitted"
    result = sim.run()
    assert result.admissions() == [
        (0.0, "a/small", "h100"), (2.0, "a/late", "h100"), (40.0, "a/gang", "h100")]
    assert [e.kind for e in result.events if e.workload == "a/gang"] == [
        "queued", "pending", "admitted", "finished"]
    assert [(p.node, p.units) for p in result.workloads["a/gang"].placements] == []
    started = sim.result().workloads["a/gang"]
    assert started.state == "Finished"


def test_gang_pods_are_placed_together():
    nodes = [NodePool(flavor="h100", nodes=2, units_per_node=8)]
    sim = KueueSimulator([team("a", ("h100", 16, None, None), cohort=None)], node_pools=nodes)
    sim.submit(job("a", "gang", 5, workers=2, duration=10))
    sim.advance(0)
    placements = sim.workloads["a/gang"].placements
    assert [(p.node, p.units) for p in placements] == [
        ("h100-0", (0, 1, 2, 3, 4)), ("h100-1", (0, 1, 2, 3, 4))]
    assert all(p.pod.startswith("gang-") for p in placements)


def test_higher_priority_preempts_within_its_cluster_queue():
    sim = KueueSimulator([team("a", ("h100", 8, None, None), cohort=None)])
    sim.submit(job("a", "low", 8, priority=100, duration=100))
    sim.submit(job("a", "high", 8, priority=1000, submit_time=5, duration=10))
    sim.submit(job("a", "same", 8, priority=100, submit_time=6, duration=10))
    result = sim.run()
    assert result.admissions() == [
        (0.0, "a/low", "h100"), (5.0, "a/high", "h100"), (15.0, "a/low", "h100"),
        (115.0, "a/same", "h100")]
    [preempted] = events_of(result, "a/low", "preempted")
    assert (preempted.reason, preempted.by) == ("InClusterQueue", "a/high")
    assert "due to prioritization in the ClusterQueue; preemptor path: /a; preemptee path: /a" \
        in preempted.message
    assert result.workloads["a/low"].conditions["Evicted"]["reason"] == "QuotaReserved"


def test_job_larger_than_any_admission_is_never_admitted():
    nodes = [NodePool(flavor="h100", nodes=4, units_per_node=8)]
    sim = KueueSimulator(
        [team("a", ("h100", 8, 4, None)), team("b", ("h100", 8, None, None))], node_pools=nodes)
    sim.submit(job("a", "huge", 8, workers=2, duration=10))       # 16 > 8 + borrowing 4
    sim.submit(job("a", "wide", 16, workers=1, duration=10))      # one pod > any node
    sim.submit(job("a", "fits", 4, workers=2, submit_time=1, duration=10))
    result = sim.run()
    assert result.admissions() == [(1.0, "a/fits", "h100")]
    huge = result.workloads["a/huge"]
    assert huge.state == "Pending"
    assert huge.conditions["QuotaReserved"]["reason"] == "ExceedsMaxQuota"
    assert huge.conditions["QuotaReserved"]["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in "
        "flavor h100, previously considered podsets requests (0) + current podset request "
        "(16) > maximum capacity (12)")
    assert result.workloads["a/wide"].conditions["QuotaReserved"]["message"] == (
        "couldn't assign flavors to pod set main: no node of flavor h100 has 16 nvidia.com/gpu "
        "for one pod (largest: 8)")


def test_flavors_are_tried_in_the_cluster_queues_order():
    sim = KueueSimulator([team("a", ("h100", 8, None, None), ("a100", 8, None, None),
                               cohort=None)])
    sim.submit(job("a", "first", 8, duration=10))
    sim.submit(job("a", "second", 8, duration=10))
    sim.submit(job("a", "pinned", 8, flavor="h100", duration=10))
    result = sim.run()
    assert result.admissions() == [
        (0.0, "a/first", "h100"), (0.0, "a/second", "a100"), (10.0, "a/pinned", "h100")]
    pending = events_of(result, "a/pinned", "pending")[0]
    assert pending.message == (
        "couldn't assign flavors to pod set main: flavor a100 doesn't match node affinity, "
        "insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed")


def test_cancel_frees_gpus_and_drops_pending():
    sim = KueueSimulator([team("a", ("h100", 8, None, None), cohort=None)])
    sim.submit(job("a", "running", 8, duration=100))
    sim.submit(job("a", "waiting", 8, duration=10))
    sim.submit(job("a", "future", 8, submit_time=50, duration=10))
    sim.advance(5)
    sim.cancel("a/running")
    sim.cancel("a/future")
    result = sim.run()
    assert result.admissions() == [(0.0, "a/running", "h100"), (5.0, "a/waiting", "h100")]
    assert result.workloads["a/future"].state == "Cancelled"


def test_bad_input_names_the_field():
    sim = KueueSimulator([team("a", ("h100", 8, None, None), cohort=None)])
    with pytest.raises(SpecError) as error:
        sim.submit(job("zz", "x"))
    assert error.value.field == "queue"
    sim.submit(job("a", "x"))
    with pytest.raises(SpecError) as error:
        sim.submit(job("a", "x"))
    assert error.value.field == "name"
    with pytest.raises(SpecError) as error:
        SimJob(name="x", namespace="a", duration=0)
    assert error.value.field == "duration"
    with pytest.raises(SpecError) as error:
        KueueSimulator([team("a", ("h100", 8, None, None)), team("a", ("h100", 8, None, None))])
    assert error.value.field == "teams[1].slug"
    sim.advance(10)
    with pytest.raises(ValueError, match="back in time"):
        sim.advance(5)


def _random_workload(seed):
    rng = random.Random(seed)
    teams = [team("a", ("h100", 8, 8, None), ("a100", 4, None, 2)),
             team("b", ("h100", 8, None, 4)), team("c", ("a100", 4, 4, None), cohort="other")]
    jobs = [
        job(rng.choice("abc"), f"j{i}", rng.choice([1, 2, 4]), workers=rng.choice([1, 2]),
            priority=rng.choice([0, 100, 1000]), submit_time=round(rng.uniform(0, 100), 1),
            duration=round(rng.uniform(1, 60), 1))
        for i in range(300)
    ]
    return teams, jobs


def test_same_input_same_output():
    runs = []
    for _ in range(2):
        teams, jobs = _random_workload(7)
        sim = KueueSimulator(teams)
        sim.submit_all(jobs)
        runs.append(sim.run())
    assert runs[0].fingerprint() == runs[1].fingerprint()
    assert runs[0].events == runs[1].events
    # every job finishes, except those larger than their queue could ever hold
    states = {(r.state, r.conditions["QuotaReserved"]["reason"] if r.state == "Pending" else "")
              for r in runs[0].workloads.values()}
    assert states == {("Finished", ""), ("Pending", "ExceedsMaxQuota")}
    assert sum(r.evictions for r in runs[0].workloads.values()) > 0
    teams, jobs = _random_workload(8)
    other = KueueSimulator(teams)
    other.submit_all(jobs)
    assert other.run().fingerprint() != runs[0].fingerprint()


def test_real_time_stepping_matches_a_batch_run():
    teams, jobs = _random_workload(3)
    batch = KueueSimulator(teams)
    batch.submit_all(jobs)
    expected = batch.run().events
    stepped = KueueSimulator(teams)
    stepped.submit_all(jobs)
    t = 0.0
    while stepped.next_event_time() is not None:
        t += 0.25
        stepped.advance(t)
    assert tuple(stepped.events) == expected
