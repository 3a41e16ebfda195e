"""API tokens: hashed, named, expiring, revocable; ``manage.py create_api_token`` prints one."""

import hashlib
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from portal.models import ApiToken, AuditEvent


def _cli(*args) -> str:
    out = StringIO()
    call_command("create_api_token", *args, stdout=out, stderr=StringIO())
    return out.getvalue().strip()


def _teams(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client.get("/api/v1/teams/")


def test_token_authenticates_the_api_with_the_token_keyword(world):
    secret = _cli("lead_a")
    assert len(secret) == 64
    assert APIClient().get("/api/v1/teams/").status_code == 401
    assert [t["slug"] for t in _teams(secret).json()] == ["team-a"]
    token = ApiToken.objects.get(user=world["lead_a"])
    assert token.name == "cli"
    # default lifetime: API_TOKEN_DEFAULT_DAYS
    assert abs(token.expiry - (timezone.now() + timedelta(days=90))) < timedelta(minutes=1)


def test_the_database_never_holds_the_secret(world):
    secret = _cli("lead_a", "--name", "laptop")
    token = ApiToken.objects.get(user=world["lead_a"], name="laptop")
    assert token.digest == hashlib.sha512(secret.encode()).hexdigest()
    assert token.token_key == secret[:15]
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM portal_apitoken")
        rows = cursor.fetchall()
    assert rows and not any(secret in str(value) for row in rows for value in row)
    # nor does the audit trail
    events = AuditEvent.objects.filter(action="token.issued")
    assert events.count() == 1 and secret not in str(events.get().after)


def test_each_call_makes_a_new_named_token_and_rotate_replaces_that_name(world):
    first, second = _cli("lead_a", "--name", "ci"), _cli("lead_a", "--name", "ci")
    assert first != second
    assert _teams(first).status_code == 200 and _teams(second).status_code == 200
    other = _cli("lead_a", "--name", "laptop")
    rotated = _cli("lead_a", "--name", "ci", "--rotate")
    assert _teams(first).status_code == 401 and _teams(second).status_code == 401
    assert _teams(rotated).status_code == 200 and _teams(other).status_code == 200
    assert sorted(ApiToken.objects.filter(user=world["lead_a"]).values_list("name", flat=True)
                  ) == ["ci", "laptop"]


def test_expired_token_is_refused(world):
    secret = _cli("lead_a", "--expires", "1")
    assert _teams(secret).status_code == 200
    ApiToken.objects.filter(user=world["lead_a"]).update(
        expiry=timezone.now() - timedelta(seconds=1))
    refused = _teams(secret)
    assert refused.status_code == 401
    assert refused.json()["detail"] == "Invalid token."
    assert not ApiToken.objects.filter(user=world["lead_a"]).exists()  # knox drops it


def test_lifetime_is_capped_and_never_only_without_a_cap(world, settings):
    with pytest.raises(CommandError, match="expire within 365 days"):
        _cli("lead_a", "--expires", "400")
    with pytest.raises(CommandError, match="expire within 365 days"):
        _cli("lead_a", "--expires", "0")
    settings.API_TOKEN_MAX_DAYS = 0
    secret = _cli("lead_a", "--expires", "0")
    assert ApiToken.objects.get(user=world["lead_a"]).expiry is None
    assert _teams(secret).status_code == 200


def test_unknown_user_is_an_error(world):
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        call_command("create_api_token", "ghost")


def test_user_makes_sees_and_revokes_tokens_on_their_page(world, client):
    client.force_login(world["member_a"])
    made = client.post("/account/tokens/", {"name": "notebook", "expires_days": "30"})
    assert made.status_code == 200
    secret = made.context["secret"]
    assert secret in made.content.decode()
    assert _teams(secret).status_code == 200
    token = ApiToken.objects.get(user=world["member_a"])
    page = client.get("/account/tokens/").content.decode()
    assert "notebook" in page and token.token_key in page and secret not in page
    # another user cannot revoke it
    intruder = APIClient()
    intruder.force_login(world["member_b"])
    assert intruder.post(f"/account/tokens/{token.pk}/revoke/").status_code == 404
    assert client.post(f"/account/tokens/{token.pk}/revoke/").status_code == 302
    assert _teams(secret).status_code == 401
    assert AuditEvent.objects.filter(action="token.revoked").count() == 1


def test_token_page_refuses_a_lifetime_over_the_cap(world, client):
    client.force_login(world["member_a"])
    refused = client.post("/account/tokens/", {"name": "x", "expires_days": "9999"})
    assert refused.status_code == 400
    assert "expire within 365 days" in refused.content.decode()
    assert not ApiToken.objects.exists()


def test_staff_see_and_revoke_tokens_in_the_admin_but_never_the_secret(world, client):
    from django.contrib.auth import get_user_model

    secret = _cli("lead_a", "--name", "ci")
    token = ApiToken.objects.get()
    admin_user = get_user_model().objects.create_superuser("root", password="pw-root-123")
    client.force_login(admin_user)
    listing = client.get("/admin/portal/apitoken/").content.decode()
    assert "ci" in listing and token.token_key in listing
    assert secret not in listing and token.digest not in listing
    detail = client.get(f"/admin/portal/apitoken/{token.pk}/change/")
    assert detail.status_code == 200
    assert secret not in detail.content.decode() and token.digest not in detail.content.decode()
    assert client.get("/admin/portal/apitoken/add/").status_code == 403
    client.post("/admin/portal/apitoken/", {"action": "delete_selected", "post": "yes",
                                           "_selected_action": [token.pk]})
    assert not ApiToken.objects.exists()
    assert _teams(secret).status_code == 401
    assert AuditEvent.objects.filter(action="token.revoked", actor=admin_user).count() == 1


def test_migration_hashes_existing_plaintext_tokens(world):
    """The data step of migration 0009: a DRF plaintext token (table authtoken_token)
    becomes a hashed ApiToken with the same secret; the plaintext row is deleted."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("portal.migrations.0009_api_token")
    plaintext = "0123456789abcdef0123456789abcdef01234567"  # DRF's 40 hex characters
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
                       "created timestamp with time zone NOT NULL, user_id bigint NOT NULL)")
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, now(), %s)",
                       [plaintext, world["lead_b"].pk])
    with connection.schema_editor() as editor:
        migration.hash_plaintext_tokens(apps, editor)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM authtoken_token")
        assert cursor.fetchone() == (0,)
    token = ApiToken.objects.get(user=world["lead_b"])
    assert token.name == "migrated" and token.expiry is not None
    assert plaintext not in token.digest
    assert [t["slug"] for t in _teams(plaintext).json()] == ["team-b"]
