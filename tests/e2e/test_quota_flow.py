"""A lead requests quota in the browser, staff review and approve it, the team has it."""

import pytest

from tests.e2e.pages.auth import LoginPage
from tests.e2e.pages.quota import NavBar, TeamDetailPage
from tests.factories import PASSWORD, make_cluster, make_cohort, make_flavor, make_team, make_user


@pytest.mark.django_db(transaction=True)
def test_lead_requests_staff_approves_team_has_the_quota(live_server, page):
    cluster = make_cluster(name="gpu-east")
    make_flavor(cluster=cluster, name="a100", physical_gpus=16, gpu_model="A100-80GB")
    team = make_team(cluster=cluster, slug="vision", name="Vision",
                     cohort=make_cohort(cluster=cluster, name="research"))
    make_user("lena", team=team, role="lead")
    make_user("sam", staff=True)

    # the lead asks for 8 GPUs through the team page
    LoginPage(page, live_server.url).open().log_in("lena", PASSWORD)
    team_page = NavBar(page).open_teams().open_team("vision")
    team_page.request_quota(flavor="a100 (A100-80GB)", nominal_gpus="8",
                            justification="Training the next detector.")
    assert any("submitted for review" in m for m in team_page.messages)
    [(request_id, state)] = team_page.request_states().items()
    assert state == "Pending"
    NavBar(page).log_out()

    # staff review it from the queue and approve
    LoginPage(page, live_server.url).open().log_in("sam", PASSWORD)
    nav = NavBar(page)
    assert nav.pending_count == 1
    queue = nav.open_review_queue()
    assert queue.request_ids() == [request_id]
    review = queue.open_request(request_id)
    preview = review.preview()
    assert preview["capacity"] == "16"
    assert preview["nominal_sum"] == "0"
    assert preview["nominal_sum_after"].startswith("8")
    assert "within capacity" in preview["nominal_sum_after"]
    assert "kind: ClusterQueue" in review.manifests_yaml
    queue = review.approve(comment="Go ahead")
    assert any(f"Request #{request_id} approved" in m for m in queue.messages)
    assert queue.request_ids() == []
    NavBar(page).log_out()

    # the lead's team page shows the new quota
    LoginPage(page, live_server.url).open().log_in("lena", PASSWORD)
    team_page = TeamDetailPage(page).open(live_server.url, "vision")
    assert team_page.nominal_gpus("a100") == "8"
    assert team_page.request_states() == {request_id: "Approved"}
