"""Members: a lead cannot remove or demote the team's last lead; whether a username
exists is told only to those who may manage the team's members."""

import pytest

from portal.models import Membership


def test_lead_cannot_demote_the_last_lead(world, api):
    response = api(world["lead_a"]).post("/api/v1/teams/team-a/members/",
                                         {"username": "lead_a", "role": "member"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"username": [
        "Cannot demote 'lead_a': the last lead of 'team-a'. Make another member lead first."]}
    assert Membership.objects.get(user=world["lead_a"]).role == "lead"


def test_lead_cannot_remove_the_last_lead(world, api):
    response = api(world["lead_a"]).delete("/api/v1/teams/team-a/members/lead_a/")
    assert response.status_code == 400
    assert "the last lead of 'team-a'" in response.json()["username"][0]
    assert Membership.objects.filter(user=world["lead_a"]).exists()


def test_with_a_second_lead_one_may_step_down(world, api):
    lead = api(world["lead_a"])
    assert lead.post("/api/v1/teams/team-a/members/", {"username": "member_a", "role": "lead"},
                     format="json").status_code == 201
    assert lead.post("/api/v1/teams/team-a/members/", {"username": "lead_a", "role": "member"},
                     format="json").status_code == 201
    # lead_a is a member now: member_a, the last lead, cannot leave
    assert api(world["member_a"]).delete(
        "/api/v1/teams/team-a/members/member_a/").status_code == 400


def test_staff_may_take_away_the_last_lead(world, api):
    assert api(world["staff"]).delete("/api/v1/teams/team-a/members/lead_a/").status_code == 204


def test_the_team_page_says_why_too(world, client):
    client.force_login(world["lead_a"])
    response = client.post("/teams/team-a/members/lead_a/remove/", follow=True)
    assert "the last lead of" in response.content.decode()
    assert Membership.objects.filter(user=world["lead_a"]).exists()


@pytest.mark.parametrize("username", ["member_b", "no-such-user"])
def test_non_leads_learn_nothing_about_usernames(world, api, username):
    """A member (or an outsider) gets the same 403 whether the username exists or not."""
    for who in ("member_a", "lead_b"):
        response = api(world[who]).post("/api/v1/teams/team-a/members/",
                                        {"username": username, "role": "member"}, format="json")
        assert response.status_code in (403, 404), who
        assert username not in response.content.decode()
