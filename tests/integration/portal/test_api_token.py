"""``manage.py create_api_token`` prints a token that authenticates API calls."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient


def test_token_authenticates_the_api(world):
    out = StringIO()
    call_command("create_api_token", "lead_a", stdout=out)
    key = out.getvalue().strip()
    assert len(key) == 40
    client = APIClient()
    assert client.get("/api/v1/teams/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    teams = client.get("/api/v1/teams/").json()
    assert [t["slug"] for t in teams] == ["team-a"]
    again = StringIO()
    call_command("create_api_token", "lead_a", stdout=again)
    assert again.getvalue().strip() == key
    rotated = StringIO()
    call_command("create_api_token", "lead_a", "--rotate", stdout=rotated)
    assert rotated.getvalue().strip() != key


def test_unknown_user_is_an_error(world):
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        call_command("create_api_token", "ghost")
