"""State races on jobs: the same name submitted twice at once, cancel twice at once,
cancel after the job finished. Real transactions on PostgreSQL, one connection per
thread; each checks that exactly one row / one cancel request is written."""

import pytest

from portal.models import AuditEvent, Job
from tests.integration.helpers import together
from tests.integration.jobs.conftest import build_world, job_payload

URL = "/api/v1/jobs/"


@pytest.fixture
def live_world(transactional_db, unconsumed_queue):
    return build_world()


def test_same_name_submitted_twice_at_once_creates_one_job(live_world, api):
    def post(user):
        response = api(live_world[user]).post(URL, job_payload(name="twin"), format="json")
        return response.status_code, response.json()

    results = together([lambda: post("member_a"), lambda: post("member_a2")])
    assert sorted(code for code, _ in results) == [201, 400]
    (refusal,) = [body for code, body in results if code == 400]
    assert list(refusal) == ["name"] and "already has a job named 'twin'" in refusal["name"][0]
    assert Job.objects.filter(team=live_world["team_a"], name="twin").count() == 1
    assert AuditEvent.objects.filter(action="job.submitted").count() == 1


def test_cancel_twice_at_once_records_one_request(live_world, api):
    created = api(live_world["member_a"]).post(URL, job_payload(), format="json")
    job_id = created.json()["id"]
    path = f"{URL}{job_id}/cancel/"
    codes = together([lambda: api(live_world["member_a"]).post(path).status_code,
                      lambda: api(live_world["lead_a"]).post(path).status_code])
    assert codes == [202, 202]
    assert AuditEvent.objects.filter(action="job.cancel_requested").count() == 1
    assert Job.objects.get(pk=job_id).cancel_requested_at is not None


@pytest.mark.parametrize("phase", ["Succeeded", "Failed", "Cancelled"])
def test_cancelling_a_finished_job_is_a_400_on_phase_and_writes_nothing(world, api, phase):
    created = api(world["member_a"]).post(URL, job_payload(), format="json")
    Job.objects.filter(pk=created.json()["id"]).update(phase=phase)
    audits = AuditEvent.objects.count()
    response = api(world["member_a"]).post(f"{URL}{created.json()['id']}/cancel/")
    assert response.status_code == 400
    assert response.json() == {"phase": [f"The job is already {phase}."]}
    assert Job.objects.get(pk=created.json()["id"]).cancel_requested_at is None
    assert AuditEvent.objects.count() == audits
