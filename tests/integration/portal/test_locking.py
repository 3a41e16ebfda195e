"""Row locks taken by the quota services leave the rows a reconcile needs free (PostgreSQL).

A reconcile's ``_record`` holds the Cluster row (``FOR UPDATE``) and writes
ManagedObject rows whose ``team_id`` foreign key takes ``FOR KEY SHARE`` on
the Team row. An approval that also locked the Team row (``FOR UPDATE`` through
``select_related`` without ``of=``) and then bumped the Cluster row deadlocked
with it: PostgreSQL aborted one side and the approval answered 500 (seen in
``test_replay_trace`` under load). The services now lock only their own rows.
"""

import threading

import pytest
from django.db import connection, connections, transaction

from portal.models import QuotaGrant
from portal.services.quota import _locked_pending
from tests.factories import make_cluster, make_flavor, make_grant, make_request, make_team

pytestmark = pytest.mark.django_db(transaction=True)


def _key_share_from_another_connection(team_id: int) -> str:
    """``FOR KEY SHARE NOWAIT`` on the team row from a 2nd connection: "free" or the error."""
    outcome = {}

    def run():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM portal_team WHERE id = %s FOR KEY SHARE NOWAIT",
                               [team_id])
            outcome["result"] = "free"
        except Exception as exc:  # noqa: BLE001 - the lock error is the answer
            outcome["result"] = type(exc).__name__
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    return outcome.get("result", "timeout")


def test_locking_a_pending_request_leaves_its_team_row_free():
    cluster = make_cluster()
    flavor = make_flavor(cluster=cluster)
    team = make_team(cluster=cluster)
    request = make_request(team=team, flavor=flavor)
    with transaction.atomic():
        locked = _locked_pending(request)
        assert locked.team.slug == team.slug  # the team is still read, just not locked
        assert _key_share_from_another_connection(team.pk) == "free"


def test_the_expiry_lock_on_a_grant_leaves_its_team_row_free():
    cluster = make_cluster()
    flavor = make_flavor(cluster=cluster)
    team = make_team(cluster=cluster)
    grant = make_grant(team=team, flavor=flavor, nominal_gpus=4)
    with transaction.atomic():
        list(QuotaGrant.objects.select_for_update(of=("self",)).select_related("team")
             .filter(pk=grant.pk))
        assert _key_share_from_another_connection(team.pk) == "free"
    # and the lock without ``of=`` would have blocked it: the check can fail
    with transaction.atomic():
        list(QuotaGrant.objects.select_for_update().select_related("team").filter(pk=grant.pk))
        assert _key_share_from_another_connection(team.pk) == "OperationalError"
