"""Volcano capacity-plugin scenarios through the scheduler simulator, exact admissions."""

import pytest

from queues.backends.volcano.model import VolcanoQueue, VolcanoSimulator
from queues.schedmodel import NodePool, SimJob
from queues.specs import FlavorQuota, FlavorSpec, SpecError, TeamQueueSpec

GPU = "nvidia.com/gpu"
H100 = FlavorSpec(name="h100", gpu_resource=GPU, gpu_model="NVIDIA-H100-80GB-HBM3",
                  physical_gpus=16)
NODES = [NodePool(flavor="h100", nodes=2, units_per_node=8)]


def team(slug, nominal, borrowing=None, lending=None, cohort="research"):
    return TeamQueueSpec(slug=slug, display_name=slug.title(), cohort=cohort, quotas=(
        FlavorQuota(flavor="h100", gpu_resource=GPU, nominal_gpus=nominal,
                    borrowing_limit_gpus=borrowing, lending_limit_gpus=lending),))


def sim_of(*teams, nodes=NODES):
    return VolcanoSimulator.from_specs(flavors=[H100], teams=teams, node_pools=nodes)


def job(ns, name, gpus=8, workers=1, **kw):
    return SimJob(name=name, namespace=ns, workers=workers, gpus_per_worker=gpus, **kw)


def test_capability_allows_borrowing_up_to_the_limit():
    sim = sim_of(team("a", 8, borrowing=4), team("b", 8))
    assert sim.queues["a"].real_capability == {GPU: 12}
    sim.submit(job("a", "own", 8, duration=100))
    sim.submit(job("a", "borrow", 4, duration=100))
    sim.submit(job("a", "over", 4, duration=10))
    sim.advance(0)
    status = sim.podgroup_status("a/over")
    assert status["phase"] == "Pending"
    unschedulable = status["conditions"][0]
    assert (unschedulable["type"], unschedulable["reason"]) == (
        "Unschedulable", "NotEnoughResources")
    assert unschedulable["message"] == (
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; "
        "Pending: 1 Unschedulable. Origin reason is: queue resource quota insufficient: "
        "insufficient nvidia.com/gpu")
    assert sim.podgroup_status("a/own")["conditions"][0]["type"] == "Scheduled"
    result = sim.run()
    assert result.admissions() == [
        (0.0, "a/own", "h100"), (0.0, "a/borrow", "h100"), (100.0, "a/over", "h100")]


def test_guarantee_holds_gpus_back():
    # b lends at most 2 of its 8: guarantee 6, so a (capability 16) really gets 16 - 6 = 10
    sim = sim_of(team("a", 8, borrowing=8), team("b", 8, lending=2))
    assert sim.queues["b"].guarantee == {GPU: 6}
    assert sim.queues["a"].real_capability == {GPU: 10}
    sim.submit(job("a", "eight", 8, duration=100))
    sim.submit(job("a", "two", 2, duration=100))
    sim.submit(job("a", "more", 2, duration=10))
    sim.submit(job("b", "six", 6, submit_time=1, duration=10))
    result = sim.run()
    assert result.admissions() == [
        (0.0, "a/eight", "h100"), (0.0, "a/two", "h100"), (1.0, "b/six", "h100"),
        (100.0, "a/more", "h100")]
    assert not [e for e in result.events if e.kind == "preempted"]


def test_reclaim_what_is_above_deserved():
    sim = sim_of(team("a", 8, borrowing=8), team("b", 8))
    sim.submit(job("a", "first", 8, duration=100))
    sim.submit(job("a", "second", 8, duration=100))
    sim.submit(job("b", "owner", 8, submit_time=10, duration=50))
    result = sim.run()
    assert result.admissions() == [
        (0.0, "a/first", "h100"), (0.0, "a/second", "h100"), (10.0, "b/owner", "h100"),
        (60.0, "a/second", "h100")]
    [evicted] = [e for e in result.events if e.kind == "preempted"]
    assert (evicted.workload, evicted.reason, evicted.message, evicted.by) == (
        "a/second", "Evict", "reclaim", "b/owner")


def test_guarantee_is_never_reclaimed():
    # a is above its deserved share (8 > max(4, guarantee 6)) but reclaiming a 4-GPU job
    # would take it below its guarantee of 6
    sim = VolcanoSimulator([
        VolcanoQueue(name="a", deserved={GPU: 4}, guarantee={GPU: 6}),
        VolcanoQueue(name="b", deserved={GPU: 12}),
    ], NODES)
    assert sim.queues["b"].real_capability == {GPU: 10}  # 16 GPUs - a's guarantee
    sim.submit(job("a", "x", 4, duration=50))
    sim.submit(job("a", "y", 4, duration=100))
    sim.submit(job("b", "fill", 8, duration=100))
    sim.submit(job("b", "more", 2, submit_time=1, duration=10))
    result = sim.run()
    # the allocate action serves the queue with the lowest share first: b before a's second
    assert result.admissions() == [
        (0.0, "a/x", "h100"), (0.0, "b/fill", "h100"), (0.0, "a/y", "h100"),
        (50.0, "b/more", "h100")]
    assert not [e for e in result.events if e.kind == "preempted"]


def test_gang_waits_whole_until_min_available_fits():
    sim = sim_of(team("a", 16, cohort=None))
    sim.submit(job("a", "small", 6, duration=40))                  # h100-0: 2 GPUs left
    sim.submit(job("a", "gang", 5, workers=2, submit_time=1, duration=10))
    sim.submit(job("a", "elastic", 8, workers=3, min_available=1, submit_time=50, duration=5))
    sim.advance(1)
    assert sim.workloads["a/gang"].placements == ()
    assert sim.podgroup_status("a/gang")["conditions"][0]["message"] == (
        "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; "
        "Pending: 2 Unschedulable. Origin reason is: 0/2 nodes are unavailable: 2 Insufficient "
        "nvidia.com/gpu.")
    assert sim.podgroup_status("a/gang")["phase"] == "Inqueue"
    sim.advance(50)
    assert [p.node for p in sim.workloads["a/elastic"].placements] == ["h100-0", "h100-1"]
    result = sim.run()
    assert result.admissions() == [
        (0.0, "a/small", "h100"), (40.0, "a/gang", "h100"), (50.0, "a/elastic", "h100")]
    assert sim.podgroup_status("a/gang")["phase"] == "Completed"


def test_higher_priority_preempts_within_its_queue():
    sim = sim_of(team("a", 8, cohort=None), nodes=[NodePool(flavor="h100", nodes=1,
                                                           units_per_node=8)])
    sim.submit(job("a", "low", 8, priority=100, duration=100))
    sim.submit(job("a", "high", 8, priority=1000, submit_time=5, duration=10))
    result = sim.run()
    assert result.admissions() == [
        (0.0, "a/low", "h100"), (5.0, "a/high", "h100"), (15.0, "a/low", "h100")]
    [evicted] = [e for e in result.events if e.kind == "preempted"]
    assert (evicted.workload, evicted.message, evicted.by) == ("a/low", "preempt", "a/high")
    assert result.workloads["a/low"].finished == 115.0


def test_job_larger_than_any_admission_is_never_admitted():
    sim = sim_of(team("a", 8, borrowing=8), team("b", 8))
    sim.submit(job("a", "huge", 8, workers=3, duration=10))          # 24 > capability 16
    sim.submit(job("a", "mig", 1, gpu_resource="nvidia.com/mig-1g.10gb", duration=10))
    sim.submit(job("a", "fits", 8, submit_time=1, duration=10))
    result = sim.run()
    assert result.admissions() == [(1.0, "a/fits", "h100")]
    assert sim.podgroup_status("a/huge")["phase"] == "Pending"
    assert sim.podgroup_status("a/mig")["conditions"][0]["message"].endswith(
        "Origin reason is: queue resource quota insufficient: insufficient "
        "nvidia.com/mig-1g.10gb")


def test_same_input_same_output():
    def once():
        sim = sim_of(team("a", 8, borrowing=8), team("b", 8, lending=4))
        sim.submit_all(
            job("ab"[i % 2], f"j{i}", [1, 2, 4, 8][i % 4], workers=1 + i % 2,
                priority=[0, 100][i % 3 == 0], submit_time=i * 0.7, duration=5 + (i * 7) % 30)
            for i in range(120))
        return sim.run()
    first, second = once(), once()
    assert first.fingerprint() == second.fingerprint()
    assert all(r.state == "Finished" for r in first.workloads.values())


def test_bad_queue_manifest_names_the_field():
    with pytest.raises(SpecError) as error:
        VolcanoSimulator([{"metadata": {"name": "a"}, "spec": {"deserved": {GPU: "1.5"}}}], NODES)
    assert error.value.field == "spec.deserved.nvidia.com/gpu"
    with pytest.raises(SpecError) as error:
        VolcanoSimulator([{"metadata": {"name": "a"}, "spec": {"parent": "nope"}}], NODES)
    assert error.value.field == "spec.parent"
