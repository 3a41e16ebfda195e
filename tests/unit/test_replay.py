"""portal.replay without a portal: the job body of a trace job, p95, the per-team summary."""

import io

from portal.replay import Submission, job_payload, p95, summarize, team_slug, write_summary
from queues.traces import TraceJob


def trace_job(job_id="31567", vc="7f04ca", gpus=12, duration=2240193.5, submit=0.0):
    return TraceJob(job_id=job_id, vc=vc, submit_time=submit, gpus=gpus,
                    duration_seconds=duration, outcome="failed")


def test_job_payload_gang_duration_and_trace_facts():
    body = job_payload(trace_job(), fmt="philly", flavor="v100", gpus_per_node=8,
                       image="docker.io/library/busybox:1.36", priority="low")
    assert body == {
        "team": "philly-7f04ca",
        "name": "trace-31567",
        "image": "docker.io/library/busybox:1.36",
        "command": ["sleep", "2240194"],
        "env": [
            {"name": "TRACE_FORMAT", "value": "philly"},
            {"name": "TRACE_JOB_ID", "value": "31567"},
            {"name": "TRACE_VC", "value": "7f04ca"},
            {"name": "TRACE_DURATION_SECONDS", "value": "2240194"},
            {"name": "TRACE_OUTCOME", "value": "failed"},
        ],
        "workers": 2,            # 12 GPUs on 8-GPU nodes: 2 workers of 6
        "gpus_per_worker": 6,
        "flavor": "v100",
        # the simulated cluster runs it for the trace duration (rounded up to whole
        # seconds) and ends it as drawn; no activeDeadlineSeconds to race its end
        "sim_duration_seconds": 2240194,
        "sim_outcome": "Failed",
        "priority": "low",
    }
    assert "max_runtime_seconds" not in body
    uuid_job = trace_job(job_id="a11b4fc9-8f06-7093-2b93-bcb89acf0e7e", vc="cluster07", gpus=64)
    body = job_payload(uuid_job, fmt="elasticflow", flavor="h100", gpus_per_node=4, image="x:1")
    assert (body["team"], body["name"], body["workers"], body["gpus_per_worker"]) == (
        "elasticflow-cluster07", "trace-a11b4fc9-8f06-7093-2b93-bcb89acf0e7e", 16, 4)
    assert len(body["name"]) <= 47 and "priority" not in body
    assert team_slug("philly", "0e4a51") == "philly-0e4a51"


def test_job_payload_outcomes_map_to_the_simulators():
    # Philly's completed/failed/cancelled; the simulator ends a job Succeeded or Failed.
    outcomes = {}
    for outcome in ("completed", "failed", "cancelled"):
        job = TraceJob(job_id="1", vc="a", submit_time=0.0, gpus=1, duration_seconds=0.2,
                       outcome=outcome)
        body = job_payload(job, fmt="philly", flavor="h100", gpus_per_node=8, image="x:1")
        outcomes[outcome] = (body["sim_outcome"], body["sim_duration_seconds"],
                             body["env"][-1]["value"])
    assert outcomes == {"completed": ("Succeeded", 1, "completed"),
                        "failed": ("Failed", 1, "failed"),
                        "cancelled": ("Failed", 1, "cancelled")}


def test_p95_nearest_rank():
    assert p95([]) is None
    assert p95([7.0]) == 7.0
    assert p95([float(i) for i in range(1, 21)]) == 19.0     # ceil(0.95 * 20) = 19th
    assert p95([float(i) for i in range(1, 101)]) == 95.0
    assert p95([5.0, 1.0, 3.0]) == 5.0                         # ceil(2.85) = 3rd


def test_summarize_counts_and_waits():
    a1, a2, a3 = (trace_job(job_id=str(i), vc="a", gpus=1) for i in (1, 2, 3))
    b1, b2 = trace_job(job_id="4", vc="b", gpus=1), trace_job(job_id="5", vc="b", gpus=200)
    submissions = [
        Submission(job=a1, team="philly-a", job_id=11, status=201),
        Submission(job=a2, team="philly-a", job_id=12, status=201),
        Submission(job=a3, team="philly-a", job_id=13, status=201),
        Submission(job=b1, team="philly-b", job_id=14, status=201),
        Submission(job=b2, team="philly-b", status=400, errors={
            "gpus_per_worker": ["needs 200 nvidia.com/gpu on v100; the team can be admitted "
                                "at most 64"]}),
    ]
    t0 = "2026-01-01T10:00:00Z"
    latest = {
        11: {"id": 11, "phase": "Succeeded", "submitted_at": t0,
             "admitted_at": "2026-01-01T10:00:02Z"},
        12: {"id": 12, "phase": "Running", "submitted_at": t0,
             "admitted_at": "2026-01-01T10:00:10Z"},
        13: {"id": 13, "phase": "Queued", "submitted_at": t0, "admitted_at": None},
        14: {"id": 14, "phase": "Failed", "submitted_at": t0,
             "admitted_at": "2026-01-01T10:00:04.500000Z"},
    }
    rows = summarize(submissions, latest)
    assert [(r.team, r.submitted, r.refused, r.admitted, r.finished, r.mean_wait, r.p95_wait)
            for r in rows] == [
        ("philly-a", 3, 0, 2, 1, 6.0, 10.0),
        ("philly-b", 1, 1, 1, 1, 4.5, 4.5),
        ("all", 4, 1, 3, 2, (2 + 10 + 4.5) / 3, 10.0),
    ]
    out = io.StringIO()
    write_summary(out, rows, submissions)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["team", "submitted", "refused", "admitted", "finished", "mean",
                                "wait", "s", "p95", "wait", "s"]
    assert lines[1].split() == ["philly-a", "3", "0", "2", "1", "6.0", "10.0"]
    assert lines[3].split() == ["all", "4", "1", "3", "2", "5.5", "10.0"]
    assert lines[4] == ("refused x1: gpus_per_worker: needs 200 nvidia.com/gpu on v100; "
                        "the team can be admitted at most 64")


def test_summarize_without_polling_counts_submissions_only():
    job = trace_job(job_id="1", vc="a", gpus=1)
    rows = summarize([Submission(job=job, team="philly-a", job_id=1, status=201)], {})
    assert [(r.team, r.submitted, r.admitted, r.finished, r.mean_wait) for r in rows] == [
        ("philly-a", 1, 0, 0, None), ("all", 1, 0, 0, None)]


def test_get_all_follows_the_link_header_through_every_page():
    """The job list is paged (body an array, ``Link: rel="next"``): the replay reads
    every page, or it would wait for ever on jobs past the first page."""
    import json as json_module

    import requests

    from portal.replay import PortalClient

    def page(rows, following=None):
        response = requests.Response()
        response.status_code = 200
        response._content = json_module.dumps(rows).encode()
        if following:
            response.headers["Link"] = f'<{following}>; rel="next"'
        return response

    pages = {None: page([{"id": 1}, {"id": 2}], "http://portal/api/v1/jobs/?team=a&page=2"),
             "http://portal/api/v1/jobs/?team=a&page=2": page([{"id": 3}])}
    asked = []

    class Fake(PortalClient):
        def request(self, method, path, **kwargs):
            asked.append((path, kwargs.get("params")))
            return pages[None] if not path.startswith("http") else pages[path]

    rows = Fake("http://portal/", "token").get_all("/api/v1/jobs/", team="a")
    assert [r["id"] for r in rows] == [1, 2, 3]
    assert asked == [("/api/v1/jobs/", {"page_size": 1000, "team": "a"}),
                     ("http://portal/api/v1/jobs/?team=a&page=2", None)]
