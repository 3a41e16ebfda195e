"""``GET /api/v1/fairness/``: fair shares, dominant shares and Jain's index of one flavor.

Contract (issue 8): ``{capacity_gpus, jain_index, teams: [{slug, weight, nominal_gpus,
usage_gpus, demand_gpus, fair_share_gpus, dominant_share, dominant_resource}]}``,
extended with the flavor's context, Kueue's weighted share, how far each team is from its
fair share, reclaim suggestions and sentences (see :class:`FairnessSerializer`).

Who sees what: staff see every team's row. Others see the rows of their own teams only;
``capacity_gpus``, ``jain_index`` and ``teams_with_demand`` stay the flavor's figures over
every team (aggregates that name no team), and reclaim suggestions say how many GPUs
could come back from "other teams of its cohort" without naming them.
"""

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from portal import access
from portal.models import Cluster, GpuFlavor
from portal.selectors.fairness import flavor_fairness


class FairnessQuerySerializer(serializers.Serializer):
    """Query parameters: ``flavor`` (required) and ``cluster`` (required when the flavor
    name exists in more than one cluster)."""

    flavor = serializers.CharField(help_text="GPU flavor name")
    cluster = serializers.CharField(required=False, help_text="cluster name")


class FairnessTeamSerializer(serializers.Serializer):
    """One team's fairness on the flavor. GPU figures are physical GPUs (fractional on
    time-sliced flavors); shares are 0..1."""

    slug = serializers.CharField()
    name = serializers.CharField()
    cohort = serializers.CharField(allow_null=True, help_text="the team's cohort")
    cohort_pool = serializers.CharField(
        allow_null=True, help_text="root of the cohort tree: the pool the team shares")
    weight = serializers.FloatField(help_text="fair-sharing weight")
    nominal_gpus = serializers.FloatField(help_text="nominal quota (GPUs)")
    usage_gpus = serializers.FloatField(help_text="Admitted and Running jobs (GPUs)")
    demand_gpus = serializers.FloatField(help_text="usage + Submitted and Queued jobs (GPUs)")
    fair_share_gpus = serializers.FloatField(
        help_text="weighted max-min fair share, water-filled within the cohort pool (GPUs)")
    dominant_share = serializers.FloatField(
        help_text="DRF dominant share of usage over the flavor's capacity (0..1)")
    dominant_resource = serializers.CharField(
        allow_null=True, help_text="gpu, cpu or memory; null when the team uses nothing")
    kueue_share = serializers.FloatField(
        allow_null=True, help_text="Kueue's weighted share (borrowed/lendable*1000/weight); "
                                   "null when infinite")
    kueue_share_infinite = serializers.BooleanField()
    kueue_share_rounded = serializers.IntegerField(
        allow_null=True, help_text="as in ClusterQueue status.fairSharing.weightedShare")
    below_fair_share_by = serializers.FloatField(help_text="GPUs, >= 0")
    above_fair_share_by = serializers.FloatField(help_text="GPUs, >= 0")
    sentence = serializers.CharField()


class ReclaimSourceSerializer(serializers.Serializer):
    """GPUs that could come back from one team above its fair share."""

    team = serializers.CharField()
    gpus = serializers.FloatField()


class ReclaimSerializer(serializers.Serializer):
    """A team below its fair share and where GPUs could be reclaimed from."""

    team = serializers.CharField()
    deficit_gpus = serializers.FloatField()
    reclaimable_gpus = serializers.FloatField()
    sources = ReclaimSourceSerializer(many=True, help_text="empty for non-staff callers")
    sentence = serializers.CharField()


class FairnessSerializer(serializers.Serializer):
    """The fairness of one GPU flavor."""

    cluster = serializers.CharField()
    flavor = serializers.CharField()
    capacity_gpus = serializers.IntegerField(help_text="physical GPUs of the flavor")
    time_slicing_replicas = serializers.IntegerField()
    jain_index = serializers.FloatField(
        allow_null=True, help_text="Jain's index over usage/fair share of teams with demand "
                                   "(0..1); null when no team has demand")
    teams_with_demand = serializers.IntegerField()
    quota_exceeds_capacity = serializers.BooleanField()
    teams = FairnessTeamSerializer(many=True)
    reclaim = ReclaimSerializer(many=True)
    sentences = serializers.ListField(child=serializers.CharField())


def resolve_flavor(*, flavor: str, cluster: str | None) -> GpuFlavor:
    """The flavor named ``flavor`` (in ``cluster`` when given), with its cluster loaded.

    One query when found. Raises Django ``ValidationError`` naming the field: unknown
    cluster (``cluster``), unknown flavor (``flavor``), or a flavor name that exists in
    several clusters without ``cluster`` (``cluster``).
    """
    found = GpuFlavor.objects.select_related("cluster").filter(name=flavor)
    if cluster:
        match = found.filter(cluster__name=cluster).first()
        if match is not None:
            return match
        if not Cluster.objects.filter(name=cluster).exists():
            raise ValidationError({"cluster": f"No cluster named '{cluster}'."})
        raise ValidationError({"flavor": f"No flavor '{flavor}' in cluster '{cluster}'."})
    matches = list(found.order_by("cluster__name")[:2])
    if not matches:
        raise ValidationError({"flavor": f"No flavor named '{flavor}'."})
    if len(matches) > 1:
        raise ValidationError({"cluster": f"Flavor '{flavor}' exists in several clusters; "
                                          f"name one with ?cluster=."})
    return matches[0]


class FairnessView(APIView):
    """Fairness of one GPU flavor: staff see every team, others their own teams' rows."""

    @extend_schema(
        parameters=[
            OpenApiParameter("flavor", str, required=True, description="GPU flavor name"),
            OpenApiParameter("cluster", str, description="cluster name (needed when the "
                                                          "flavor name is in several clusters)"),
        ],
        responses={200: FairnessSerializer},
    )
    def get(self, request):
        """Fair shares (water-filling), dominant shares (DRF), Kueue's weighted share and
        Jain's index of the flavor; 400 naming ``flavor`` or ``cluster`` when unknown."""
        query = FairnessQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        flavor = resolve_flavor(flavor=query.validated_data["flavor"],
                                cluster=query.validated_data.get("cluster"))
        slugs = None
        if not access.is_staff(request.user):
            slugs = set(access.visible_teams(request.user).filter(
                cluster_id=flavor.cluster_id).values_list("slug", flat=True))
        return Response(flavor_fairness(flavor=flavor).as_dict(slugs=slugs))
