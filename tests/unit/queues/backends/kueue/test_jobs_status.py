"""interpret_kueue: every phase and every explanation, from literal Kueue objects."""

import datetime as dt

import pytest

from queues.backends.kueue.jobs import index_workloads, interpret_kueue, workload_for_job
from queues.jobs import PHASES, REASONS, merge_times, preemption_loop

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
UID = "11111111-2222-3333-4444-555555555555"


def t(minutes: int) -> str:
    """RFC 3339 time ``minutes`` after 11:00 (before NOW)."""
    return (NOW - dt.timedelta(hours=1) + dt.timedelta(minutes=minutes)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def at(minutes: int) -> dt.datetime:
    return NOW - dt.timedelta(hours=1) + dt.timedelta(minutes=minutes)


def job(kind="Job", status=None, conditions=()):
    body = {
        "apiVersion": "batch/v1" if kind == "Job" else "jobset.x-k8s.io/v1alpha2",
        "kind": kind,
        "metadata": {"name": "train", "namespace": "vision", "uid": UID,
                     "creationTimestamp": t(0)},
        "spec": {"suspend": True},
        "status": dict(status or {}),
    }
    if conditions:
        body["status"]["conditions"] = list(conditions)
    return body


def cond(type_, status, reason="", message="", minute=1):
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": t(minute)}


def workload(*conditions, admission=None, active=True, stats=None):
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-train-abcde", "namespace": "vision",
                     "creationTimestamp": t(0),
                     "ownerReferences": [{"kind": "Job", "name": "train", "uid": UID}]},
        "spec": {"queueName": "vision", "active": active},
        "status": {"conditions": list(conditions)},
    }
    if admission:
        wl["status"]["admission"] = admission
    if stats:
        wl["status"]["schedulingStats"] = {"evictions": stats}
    return wl


ADMISSION = {"clusterQueue": "vision", "podSetAssignments": [{
    "name": "main", "count": 2,
    "flavors": {"cpu": "h100", "memory": "h100", "nvidia.com/gpu": "h100"},
    "resourceUsage": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"}}]}
ADMITTED = (cond("QuotaReserved", "True", "QuotaReserved",
                 "Quota reserved in ClusterQueue vision", 5),
            cond("Admitted", "True", "Admitted", "The workload is admitted", 5))
PREEMPT_MSG = ("Preempted to accommodate a workload (UID: wl-9, JobUID: job-9) due to Fair "
               "Sharing within the cohort; preemptor path: /research/nlp; preemptee path: "
               "/research/vision")


def event(reason, message, minute, type_="Warning", name="train"):
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.{minute}"},
            "involvedObject": {"kind": "Job", "name": name}, "reason": reason,
            "message": message, "type": type_, "lastTimestamp": t(minute)}


def explain(**kwargs):
    kwargs.setdefault("now", NOW)
    return interpret_kueue(**kwargs)


# --- Queued: each of Kueue's reasons ------------------------------------------------

PENDING = [
    ("WaitingForQuota",
     "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
     "in flavor h100, 16 more needed",
     "WaitingForQuota", "16 more nvidia.com/gpu on flavor h100"),
    ("Pending",  # Kueue before the granular reasons
     "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
     "h100, 4 more needed, insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more "
     "needed",
     "WaitingForQuota", "It needs 8 more nvidia.com/gpu on flavor h100 than"),
    ("ExceedsMaxQuota",
     "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
     "h100, previously considered podsets requests (0) + current podset request (32) > maximum "
     "capacity (16)",
     "ExceedsMaximum",
     "needs 32 nvidia.com/gpu on flavor h100, but the queue can be admitted at most 16"),
    ("Pending",
     "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor "
     "h100, request > maximum capacity (32 > 16)",
     "ExceedsMaximum",
     "needs 32 nvidia.com/gpu on flavor h100, but the queue can be admitted at most 16"),
    ("NoMatchingFlavor", "couldn't assign flavors to pod set main: flavor a100 not found",
     "NoMatchingFlavor", "flavor a100 not found"),
    ("Pending",
     "couldn't assign flavors to pod set main: untolerated taint {nvidia.com/gpu present "
     "NoSchedule} in flavor h100",
     "NoMatchingFlavor", "None of the queue's GPU flavors can run this job"),
    ("Suspended", "ClusterQueue vision is inactive", "QueueInactive",
     "ClusterQueue vision is inactive"),
    ("Pending", "ClusterQueue vision is inactive", "QueueInactive", "Platform staff"),
    ("Suspended", "LocalQueue vision is stopped", "QueueInactive", "LocalQueue vision is stopped"),
    ("Misconfigured", "LocalQueue vision doesn't exist", "QueueNotFound",
     "The team's queue vision does not exist"),
    ("WaitingForPreemptedWorkloads",
     "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
     "flavor h100, 8 more needed. Pending the preemption of 2 workload(s)",
     "PendingPreemption", "Kueue is preempting 2 workloads to make room"),
    ("Pending", "Pending the preemption of 1 workload(s)", "PendingPreemption",
     "preempting 1 workload to make room"),
    ("PendingEvaluation", "", "PendingEvaluation", "waiting for Kueue to consider"),
    ("Pending", "something Kueue says that the portal does not know", "Inadmissible",
     "something Kueue says that the portal does not know"),
]


@pytest.mark.parametrize(("reason", "message", "code", "text"), PENDING,
                         ids=[f"{p[2]}-{i}" for i, p in enumerate(PENDING)])
def test_queued_explanations(reason, message, code, text):
    status = explain(job=job(), workload=workload(cond("QuotaReserved", "False", reason,
                                                       message)), queue_position=3)
    assert (status.phase, status.reason) == ("Queued", code)
    assert text in status.message
    assert status.queue_position == 3
    assert "3 jobs ahead of it in the team's queue" in status.message
    assert status.admitted_flavor is None and status.admitted_at is None


def test_waiting_for_quota_is_never_said_of_an_exceeding_job():
    status = explain(job=job(), workload=workload(cond(
        "QuotaReserved", "False", "ExceedsMaxQuota", PENDING[2][1])))
    assert "Waiting for quota" not in status.message
    assert "can never start" in status.message


def test_queue_position_words():
    wl = workload(cond("QuotaReserved", "False", "WaitingForQuota", PENDING[0][1]))
    assert "It is next in the team's queue." in explain(job=job(), workload=wl,
                                                        queue_position=0).message
    assert "1 job ahead of it" in explain(job=job(), workload=wl, queue_position=1).message
    no_position = explain(job=job(), workload=wl)
    assert no_position.queue_position is None and "ahead" not in no_position.message


def test_no_condition_yet_is_pending_evaluation():
    status = explain(job=job(), workload=workload())
    assert (status.phase, status.reason) == ("Queued", "PendingEvaluation")


def test_quota_reserved_without_admission_waits_for_checks():
    status = explain(job=job(), workload=workload(ADMITTED[0], cond(
        "Admitted", "False", "UnsatisfiedAdmissionChecks", "", 5)))
    assert (status.phase, status.reason) == ("Queued", "AdmissionChecksPending")


# --- Submitted -------------------------------------------------------------------------


def test_submitted_before_the_job_exists_and_before_kueue_sees_it():
    assert (explain(job=None, workload=None).phase, explain(job=None, workload=None).reason) \
        == ("Submitted", "NotOnCluster")
    status = explain(job=job(), workload=None)
    assert (status.phase, status.reason) == ("Submitted", "WaitingForKueue")
    assert status.submitted_at == at(0)


# --- Admitted / Running ------------------------------------------------------------------


def test_admitted_but_pods_not_started():
    status = explain(job=job(), workload=workload(*ADMITTED, admission=ADMISSION))
    assert (status.phase, status.reason) == ("Admitted", "Admitted")
    assert status.admitted_flavor == "h100" and status.cluster_queue == "vision"
    assert status.admitted_at == at(5)
    assert "on flavor h100" in status.message


def test_admitted_job_refused_by_the_namespace_quota_is_explained_as_such():
    refused = ('Error creating: pods "train-0-x7k2p" is forbidden: exceeded quota: gpu-quota, '
               "requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=4, "
               "limited: requests.nvidia.com/gpu=4")
    status = explain(job=job(), workload=workload(*ADMITTED, admission=ADMISSION),
                     events=[event("FailedCreate", refused, 6)])
    assert (status.phase, status.reason) == ("Admitted", "NamespaceQuotaExceeded")
    assert "ResourceQuota refuses its pods" in status.message
    assert "exceeded quota: gpu-quota" in status.message
    assert "waiting for quota" not in status.message.lower().replace(
        "not waiting for queue quota", "")


def test_a_refusal_before_the_current_admission_does_not_count():
    refused = 'Error creating: pods "a" is forbidden: exceeded quota: gpu-quota'
    status = explain(job=job(), workload=workload(*ADMITTED, admission=ADMISSION),
                     events=[event("FailedCreate", refused, 2)])
    assert status.reason == "Admitted"


def test_other_pod_creation_failures():
    status = explain(job=job(), workload=workload(*ADMITTED, admission=ADMISSION),
                     events=[event("FailedCreate", "Error creating: serviceaccount missing", 7)])
    assert (status.phase, status.reason) == ("Admitted", "PodsFailedToCreate")
    assert "serviceaccount missing" in status.message


def test_running_from_active_pods_or_pods_ready():
    running = explain(job=job(status={"active": 2, "startTime": t(6)}),
                      workload=workload(*ADMITTED, admission=ADMISSION))
    assert (running.phase, running.reason) == ("Running", "Running")
    assert running.started_at == at(6)
    assert running.message == "Running on flavor h100."
    ready = explain(job=job("JobSet"), workload=workload(
        *ADMITTED, cond("PodsReady", "True", "PodsReady", "", 8), admission=ADMISSION))
    assert ready.phase == "Running" and ready.started_at == at(8)
    jobset = explain(job=job("JobSet", status={"replicatedJobsStatus": [
        {"name": "workers", "active": 1}]}), workload=workload(*ADMITTED, admission=ADMISSION))
    assert jobset.phase == "Running"


# --- preemption ----------------------------------------------------------------------------


def test_preempted_and_requeued():
    wl = workload(
        cond("Evicted", "True", "Preempted", PREEMPT_MSG, 20),
        cond("Preempted", "True", "InCohortFairSharing", PREEMPT_MSG, 20),
        cond("QuotaReserved", "False", "Pending", PREEMPT_MSG, 20),
        cond("Admitted", "False", "NoReservation", "", 20),
        cond("Requeued", "True", "Preempted", PREEMPT_MSG, 20),
        stats=[{"reason": "Preempted", "underlyingCause": "InCohortFairSharing", "count": 2}],
    )
    status = explain(job=job(), workload=wl, queue_position=0,
                     events=[event("Preempted", PREEMPT_MSG, 20, "Normal", "job-train-abcde")])
    assert (status.phase, status.reason) == ("Queued", "Preempted")
    assert status.preemptions == 2
    assert status.preemptor == "job-9"
    assert status.preemption_times == (at(20),)
    assert "due to Fair Sharing within the cohort" in status.message
    assert "It is next" in status.message
    assert status.preemption_loop is False


def test_readmitted_after_preemption_keeps_the_count():
    wl = workload(
        *ADMITTED[:1], cond("Admitted", "True", "Admitted", "", 30),
        cond("Evicted", "False", "QuotaReserved", "Previously: " + PREEMPT_MSG, 30),
        cond("Preempted", "False", "QuotaReserved", "Previously: " + PREEMPT_MSG, 30),
        admission=ADMISSION,
        stats=[{"reason": "Preempted", "underlyingCause": "InClusterQueue", "count": 1}],
    )
    status = explain(job=job(status={"active": 2}), workload=wl)
    assert status.phase == "Running"
    assert status.preemptions == 1
    assert status.preemptor == "job-9"


def test_preemption_loop_from_stored_and_visible_times():
    wl = workload(cond("Evicted", "True", "Preempted", PREEMPT_MSG, 50),
                  cond("Preempted", "True", "InClusterQueue", PREEMPT_MSG, 50))
    status = explain(job=job(), workload=wl, known_preemption_times=[at(10), at(30)])
    assert status.preemptions == 3
    assert status.preemption_times == (at(10), at(30), at(50))
    assert status.preemption_loop is True
    assert "preempted 3 times within the last hour" in status.message
    spread = explain(job=job(), workload=wl,
                     known_preemption_times=[at(-30), at(30)])  # 11:30 the day before... no: 10:30
    assert spread.preemptions == 3 and spread.preemption_loop is False


@pytest.mark.parametrize(
    ("minutes", "expected"),
    [
        ((), False),
        ((10, 20), False),
        ((10, 20, 59), True),
        ((-1, 20, 59), False),  # one of them 61 minutes before NOW
        ((0, 0, 30), False),  # duplicate instants count once
        ((0, 1, 2, 3), True),
    ],
)
def test_preemption_loop(minutes, expected):
    assert preemption_loop([at(m) for m in minutes], NOW) is expected


def test_signals_of_one_preemption_a_moment_apart_count_once():
    wl = workload(cond("Evicted", "True", "Preempted", PREEMPT_MSG, 20),
                  cond("Preempted", "True", "InClusterQueue", PREEMPT_MSG, 20))
    late_event = event("Preempted", PREEMPT_MSG, 20, "Normal", "job-train-abcde")
    late_event["lastTimestamp"] = (at(20) + dt.timedelta(seconds=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    status = explain(job=job(), workload=wl, events=[late_event],
                     known_preemption_times=[at(20) + dt.timedelta(seconds=2)])
    assert status.preemptions == 1
    assert status.preemption_times == (at(20),)
    assert merge_times([at(1), at(1) + dt.timedelta(seconds=5), at(2)],
                       tolerance_seconds=10) == (at(1), at(2))


def test_preemption_loop_threshold_and_window_are_parameters():
    times = [at(50), at(55)]
    assert preemption_loop(times, NOW, threshold=2) is True
    assert preemption_loop(times, NOW, window_seconds=60, threshold=2) is False
    assert merge_times([at(1), at(1)], [at(0)]) == (at(0), at(1))


def test_evicted_for_another_reason():
    wl = workload(cond("Evicted", "True", "PodsReadyTimeout",
                       "Exceeded the PodsReady timeout vision/job-train-abcde", 25))
    status = explain(job=job(), workload=wl)
    assert (status.phase, status.reason) == ("Queued", "Evicted")
    assert "PodsReadyTimeout" in status.message and status.preemptions == 0


# --- final phases ----------------------------------------------------------------------------


def test_succeeded_from_the_job_the_jobset_or_the_workload():
    done = job(status={"succeeded": 2, "completionTime": t(40)},
               conditions=[cond("Complete", "True", "CompletionsReached", "", 40)])
    status = explain(job=done, workload=workload(*ADMITTED, admission=ADMISSION))
    assert (status.phase, status.reason, status.finished_at) == ("Succeeded", "Succeeded", at(40))
    assert status.is_final
    jobset = job("JobSet", conditions=[cond("Completed", "True", "AllJobsCompleted", "", 41)])
    assert explain(job=jobset, workload=None).phase == "Succeeded"
    finished = workload(*ADMITTED, cond("Finished", "True", "Succeeded", "done", 42))
    assert explain(job=job(), workload=finished).finished_at == at(42)


def test_failed_and_max_runtime():
    failed = job(conditions=[cond("Failed", "True", "BackoffLimitExceeded",
                                  "Job has reached the specified backoff limit", 40)])
    status = explain(job=failed, workload=workload(*ADMITTED))
    assert (status.phase, status.reason) == ("Failed", "Failed")
    assert "backoff limit" in status.message
    deadline = job(conditions=[cond("Failed", "True", "DeadlineExceeded", "", 45)])
    status = explain(job=deadline, workload=workload(*ADMITTED))
    assert (status.phase, status.reason, status.finished_at) == (
        "Failed", "MaxRuntimeExceeded", at(45))
    wl_failed = workload(cond("Finished", "True", "Failed", "pods failed", 46))
    assert explain(job=job(), workload=wl_failed).reason == "Failed"


def test_cancelled():
    gone = explain(job=None, workload=None, cancelled=True)
    assert (gone.phase, gone.reason, gone.finished_at) == ("Cancelled", "Cancelled", NOW)
    deactivated = explain(job=job(), workload=workload(*ADMITTED, active=False), cancelled=True)
    assert deactivated.phase == "Cancelled"
    done = job(conditions=[cond("Complete", "True", "", "", 40)])
    assert explain(job=done, workload=None, cancelled=True).phase == "Succeeded"
    still_running = explain(job=job(status={"active": 1}),
                            workload=workload(*ADMITTED, admission=ADMISSION), cancelled=True)
    assert still_running.phase == "Running"  # until the Workload is deactivated


def test_deactivated_by_kueue_is_a_failure():
    wl = workload(cond("Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded",
                       "The workload is deactivated due to exceeding the maximum number of "
                       "re-queuing retries", 50), active=False)
    status = explain(job=job(), workload=wl)
    assert (status.phase, status.reason) == ("Failed", "Deactivated")
    assert "re-queuing retries" in status.message


def test_every_phase_and_reason_is_documented():
    seen_phases = {"Submitted", "Queued", "Admitted", "Running", "Succeeded", "Failed",
                   "Cancelled"}
    assert set(PHASES) == seen_phases
    for code, text in REASONS.items():
        assert text.startswith("[") and text[1:].split("]")[0] in PHASES, code


# --- timeline -------------------------------------------------------------------------------


def test_timeline_merges_conditions_and_events_in_time_order():
    wl = workload(*ADMITTED)
    j = job(status={"active": 2}, conditions=[cond("Suspended", "False", "JobResumed", "", 6)])
    status = explain(job=j, workload=wl, events=[
        event("Started", "Started pod", 7, "Normal"), event("Created", "Created", 3, "Normal")])
    times = [e["time"] for e in status.timeline]
    assert times == sorted(times)
    assert [(e["source"], e["type"], e["reason"]) for e in status.timeline] == [
        ("Event", "Normal", "Created"),
        ("Workload", "Admitted", "Admitted"),
        ("Workload", "QuotaReserved", "QuotaReserved"),
        ("Job", "Suspended", "JobResumed"),
        ("Event", "Normal", "Started"),
    ]
    assert status.timeline[1] == {"source": "Workload", "type": "Admitted", "status": "True",
                                  "reason": "Admitted", "message": "The workload is admitted",
                                  "time": t(5)}


def test_odd_input_does_not_raise():
    status = explain(job={"kind": "Job"}, workload={"status": {"conditions": [
        {"type": "Admitted"}, "junk"]}}, events=["junk", {"reason": "X"}])
    assert status.phase == "Queued"


# --- finding the Workload -------------------------------------------------------------------


def test_workload_for_job():
    mine = workload()
    other = workload()
    other["metadata"] = {"name": "job-train-fffff", "ownerReferences": [{"uid": "other"}]}
    by_label = {"metadata": {"name": "x", "labels": {"kueue.x-k8s.io/job-uid": UID},
                             "creationTimestamp": t(9)}}
    assert workload_for_job([other, mine], job()) is mine
    assert workload_for_job([other, mine, by_label], job()) is by_label  # newest
    assert workload_for_job([other], job()) is None
    no_uid = job()
    del no_uid["metadata"]["uid"]
    assert workload_for_job([other], no_uid) is other
    assert workload_for_job([mine], {"kind": "JobSet", "metadata": {"name": "train"}}) is None


def test_index_workloads_finds_what_workload_for_job_finds():
    mine = workload()
    other = workload()
    other["metadata"] = {"name": "job-eval-fffff", "ownerReferences": [{"uid": "other"}],
                         "creationTimestamp": t(1)}
    by_label = {"metadata": {"name": "x", "labels": {"kueue.x-k8s.io/job-uid": UID},
                             "creationTimestamp": t(9)}}
    index = index_workloads([other, mine, by_label, {"metadata": {}}, {}])
    assert set(index) == {UID, "other"}
    assert index[UID] is by_label  # newest of the two for the uid
    assert index["other"] is other
    for listing in ([other, mine], [other, mine, by_label], [mine, by_label, other]):
        assert index_workloads(listing).get(UID) is workload_for_job(listing, job())
    assert index_workloads([]) == {}
