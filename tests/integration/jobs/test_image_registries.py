"""Image registries: loopback and link-local registries are refused by default; with
IMAGE_REGISTRIES set, only the registries it lists are allowed."""

import pytest

from portal.models import Job
from portal.services.images import is_local, registry_of
from tests.integration.jobs.conftest import job_payload

pytestmark = pytest.mark.django_db

URL = "/api/v1/jobs/"


@pytest.mark.parametrize("image", [
    "localhost:5000/team/train:1", "127.0.0.1:5000/train:1", "127.1.2.3/train",
    "[::1]:5000/train:1", "169.254.169.254/latest:1", "[fe80::1]:5000/a:1",
    "0.0.0.0:5000/a:1", "registry.localhost/a:1",
])
def test_local_registries_are_refused_by_default(world, api, image):
    response = api(world["member_a"]).post(URL, job_payload(image=image), format="json")
    assert response.status_code == 400, response.content
    (message,) = response.json()["image"]
    assert message.startswith(f"Refused: registry '{registry_of(image)}' is a loopback or "
                              "link-local address")
    assert Job.objects.count() == 0


@pytest.mark.parametrize("image", ["ubuntu:24.04", "ghcr.io/acme/train:1",
                                   "registry.example.com:5000/a/b@sha256:" + "a" * 64,
                                   "10.0.0.5:5000/a:1"])
def test_other_registries_are_allowed_by_default(world, api, image):
    response = api(world["member_a"]).post(URL, job_payload(image=image), format="json")
    assert response.status_code == 201, response.content


def test_local_registries_can_be_allowed(world, api, settings):
    settings.IMAGE_ALLOW_LOCAL_REGISTRIES = True
    response = api(world["member_a"]).post(URL, job_payload(image="localhost:5000/a:1"),
                                           format="json")
    assert response.status_code == 201, response.content


def test_allow_list_admits_only_its_registries(world, api, settings):
    settings.IMAGE_REGISTRIES = ["ghcr.io", "registry.example.com:5000"]
    member = api(world["member_a"])
    refused = member.post(URL, job_payload(image="ubuntu:24.04"), format="json")
    assert refused.status_code == 400
    assert refused.json()["image"] == [
        "Refused: registry 'docker.io' is not allowed here; images come from: "
        "ghcr.io, registry.example.com:5000."]
    assert member.post(URL, job_payload(name="a", image="ghcr.io/acme/t:1"),
                       format="json").status_code == 201
    assert member.post(URL, job_payload(name="b", image="registry.example.com:5000/t:1"),
                       format="json").status_code == 201
    assert member.post(URL, job_payload(name="c", image="registry.example.com:6000/t:1"),
                       format="json").status_code == 400


def test_the_form_live_check_says_the_same(world, client):
    client.force_login(world["member_a"])
    response = client.post("/teams/team-a/jobs/validate/", {
        "name": "probe", "image": "169.254.169.254/x:1", "command": "python x", "workers": "1",
        "gpus_per_worker": "1", "flavor": "h100", "kind": "job"})
    assert "link-local" in str(response.json())


def test_is_local_reads_addresses_as_written():
    assert is_local("localhost") and is_local("[::1]:80") and is_local("169.254.1.1:5000")
    assert not is_local("ghcr.io") and not is_local("10.0.0.1:5000")
    assert not is_local("localhost.example.com")
