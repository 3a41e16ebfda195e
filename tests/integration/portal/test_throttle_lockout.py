"""Brute-force protection: the API throttles per user and per anonymous IP (429 with
Retry-After), and repeated failed logins lock the account out (django-axes)."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tests.factories import PASSWORD, make_user


@pytest.fixture
def rates(settings):
    settings.API_THROTTLE_RATES = {"user": "3/minute", "anon": "2/minute"}
    return settings.API_THROTTLE_RATES


@pytest.mark.django_db
def test_signed_in_user_is_throttled_per_user_with_retry_after(rates):
    alice, bob = make_user("alice"), make_user("bob")
    client = APIClient()
    client.force_authenticate(alice)
    assert [client.get("/api/v1/teams/").status_code for _ in range(3)] == [200, 200, 200]
    refused = client.get("/api/v1/teams/")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "throttled" in refused.json()["detail"].lower()
    # counted per user: another user from the same address still gets through
    other = APIClient()
    other.force_authenticate(bob)
    assert other.get("/api/v1/teams/").status_code == 200


@pytest.mark.django_db
def test_anonymous_requests_are_throttled_per_ip(rates):
    client = APIClient()
    assert [client.get("/api/v1/teams/").status_code for _ in range(2)] == [401, 401]
    refused = client.get("/api/v1/teams/")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    elsewhere = APIClient(REMOTE_ADDR="10.9.8.7")
    assert elsewhere.get("/api/v1/teams/").status_code == 401


@pytest.mark.django_db
def test_empty_rate_means_unthrottled(settings):
    settings.API_THROTTLE_RATES = {"user": None, "anon": None}
    client = APIClient()
    client.force_authenticate(make_user("carol"))
    assert {client.get("/api/v1/teams/").status_code for _ in range(30)} == {200}


def _log_in(client, username, password):
    return client.post("/accounts/login/", {"username": username, "password": password})


@pytest.mark.django_db
def test_repeated_failed_logins_lock_the_account_and_say_for_how_long(client, settings):
    settings.AXES_FAILURE_LIMIT = 3
    make_user("dana")
    for _ in range(2):
        wrong = _log_in(client, "dana", "not-the-password")
        assert wrong.status_code == 200
        assert "didn't match" in wrong.content.decode()
    locked = _log_in(client, "dana", "not-the-password")
    assert locked.status_code == 429
    text = locked.content.decode()
    assert "Too many failed logins for <strong>dana</strong>" in text
    assert "this account is locked for 15 min" in text
    # the right password does not get in while locked
    still = _log_in(client, "dana", PASSWORD)
    assert still.status_code == 429
    assert "_auth_user_id" not in client.session
    # another user from the same address is not locked (username + IP address)
    make_user("erin")
    assert _log_in(client, "erin", PASSWORD).status_code == 302


@pytest.mark.django_db
def test_a_success_resets_the_failure_count(client, settings):
    settings.AXES_FAILURE_LIMIT = 3
    make_user("finn")
    for _ in range(2):
        _log_in(client, "finn", "nope")
    assert _log_in(client, "finn", PASSWORD).status_code == 302
    client.logout()
    for _ in range(2):
        assert _log_in(client, "finn", "nope").status_code == 200
    assert _log_in(client, "finn", PASSWORD).status_code == 302


@pytest.mark.django_db
def test_staff_unlock_by_resetting_attempts(client, settings):
    from axes.utils import reset

    settings.AXES_FAILURE_LIMIT = 2
    make_user("gus")
    for _ in range(2):
        _log_in(client, "gus", "nope")
    assert _log_in(client, "gus", PASSWORD).status_code == 429
    reset(username="gus")
    assert _log_in(client, "gus", PASSWORD).status_code == 302
    assert get_user_model().objects.get(username="gus").last_login is not None


@pytest.mark.django_db
def test_failed_token_guesses_are_throttled_per_ip_even_for_a_right_guess(rates):
    from portal.services.tokens import token_issue

    secret = token_issue(actor=None, user=make_user("hal"), name="t")[1]
    guesser = APIClient()
    guesser.credentials(HTTP_AUTHORIZATION="Token " + "0" * 64)
    assert [guesser.get("/api/v1/teams/").status_code for _ in range(2)] == [401, 401]
    guesser.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    refused = guesser.get("/api/v1/teams/")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    # the same token from another address works: only the guessing IP is held back
    other = APIClient(REMOTE_ADDR="10.1.2.3")
    other.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert other.get("/api/v1/teams/").status_code == 200


@pytest.mark.django_db
def test_schema_documents_the_token_scheme_and_429():
    client = APIClient()
    client.force_authenticate(make_user("ivy"))
    schema = client.get("/api/schema/", {"format": "json"}).json()
    scheme = schema["components"]["securitySchemes"]["tokenAuth"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "Authorization")
    assert '"Token"' in scheme["description"]
    op = schema["paths"]["/api/v1/teams/"]["get"]
    assert {"tokenAuth": []} in op["security"]
    assert "Retry-After" in op["responses"]["429"]["headers"]


@pytest.mark.django_db
def test_an_unreachable_throttle_cache_lets_requests_through(rates, settings, caplog):
    settings.CACHES = {**settings.CACHES, "throttle": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0"}}  # nothing listens on port 1
    client = APIClient()
    client.force_authenticate(make_user("jay"))
    assert {client.get("/api/v1/teams/").status_code for _ in range(5)} == {200}
    assert APIClient().get("/api/v1/teams/").status_code == 401
    assert any("cache unreachable" in r.getMessage() for r in caplog.records)
