"""REST endpoints under ``/api/v1/``. Views resolve objects the caller may see
(others are 404), check the role (403) and call services."""

from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response

from portal import access
from portal.api import serializers as s
from portal.models import Cluster, Cohort, GpuFlavor, Membership, QuotaGrant, QuotaRequest
from portal.selectors.quota import quota_request_preview, quota_requests_visible
from portal.services import catalog, quota, teams


def _cluster(name: str | None) -> Cluster:
    """The named cluster, or the only one when ``name`` is empty (field errors otherwise)."""
    if name:
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            raise ValidationError({"cluster": f"No cluster named '{name}'."})
        return cluster
    clusters = list(Cluster.objects.all()[:2])
    if len(clusters) != 1:
        raise ValidationError({"cluster": "Name the cluster (there is not exactly one)."})
    return clusters[0]


def _staff_input(request, serializer_class, what: str) -> dict:
    """Validated input of a staff-only create endpoint: 403 for others, 400 naming fields."""
    if not access.is_staff(request.user):
        raise PermissionDenied(f"Only platform staff can create {what}.")
    data = serializer_class(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


class FlavorViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """GPU flavors: everyone signed in reads; staff create."""

    serializer_class = s.FlavorSerializer
    queryset = GpuFlavor.objects.select_related("cluster").order_by("cluster__name", "name")
    lookup_field = "name"
    lookup_value_regex = r"[^/.\x00]+"  # a NUL cannot be in a name (PostgreSQL text refuses it)

    @extend_schema(request=s.FlavorCreateSerializer, responses={201: s.FlavorSerializer})
    def create(self, request):
        """Add a flavor (staff only)."""
        values = _staff_input(request, s.FlavorCreateSerializer, "GPU flavors")
        cluster = _cluster(values.pop("cluster"))
        flavor = catalog.flavor_create(actor=request.user, cluster=cluster, **values)
        return Response(s.FlavorSerializer(flavor).data, status=status.HTTP_201_CREATED)


class CohortViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Cohorts: everyone signed in reads; staff create."""

    serializer_class = s.CohortSerializer
    queryset = Cohort.objects.select_related("cluster", "parent").order_by("cluster__name", "name")

    @extend_schema(request=s.CohortCreateSerializer, responses={201: s.CohortSerializer})
    def create(self, request):
        """Add a cohort (staff only)."""
        values = _staff_input(request, s.CohortCreateSerializer, "cohorts")
        cluster = _cluster(values.pop("cluster"))
        parent_name = values.pop("parent")
        parent = None
        if parent_name:
            parent = Cohort.objects.filter(cluster=cluster, name=parent_name).first()
            if parent is None:
                raise ValidationError({"parent": f"No cohort named '{parent_name}'."})
        cohort = catalog.cohort_create(actor=request.user, cluster=cluster, parent=parent,
                                       **values)
        return Response(s.CohortSerializer(cohort).data, status=status.HTTP_201_CREATED)


class TeamViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Teams the caller belongs to (staff: all), with quotas and members."""

    serializer_class = s.TeamSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[^/\x00]+"  # a NUL cannot be in a slug (PostgreSQL text refuses it)

    def get_queryset(self):
        """Visible teams, with grants and members prefetched (fixed query count)."""
        return access.visible_teams(self.request.user).select_related(
            "cluster", "cohort"
        ).prefetch_related(
            Prefetch("grants", QuotaGrant.objects.select_related(
                "flavor", "temporary_request").order_by("flavor__name")),
            Prefetch("memberships", Membership.objects.select_related("user").order_by(
                "user__username")),
        ).order_by("slug")

    @extend_schema(request=s.TeamCreateSerializer, responses={201: s.TeamSerializer})
    def create(self, request):
        """Create a team (staff only)."""
        values = _staff_input(request, s.TeamCreateSerializer, "teams")
        cluster = _cluster(values.pop("cluster"))
        cohort_name = values.pop("cohort")
        cohort = None
        if cohort_name:
            cohort = Cohort.objects.filter(cluster=cluster, name=cohort_name).first()
            if cohort is None:
                raise ValidationError({"cohort": f"No cohort named '{cohort_name}'."})
        team = teams.team_create(actor=request.user, cluster=cluster, cohort=cohort, **values)
        return Response(self.get_serializer(self.get_queryset().get(pk=team.pk)).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(request=s.MemberWriteSerializer, responses={201: s.MemberSerializer})
    @action(detail=True, methods=["post"], url_path="members")
    def add_member(self, request, slug=None):
        """Add a member or change a role (the team's lead or staff)."""
        team = self.get_object()
        data = s.MemberWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = teams.membership_set(actor=request.user, team=team, **data.validated_data)
        return Response(s.MemberSerializer(membership).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["delete"], url_path=r"members/(?P<username>[^/\x00]+)")
    def remove_member(self, request, slug=None, username=None):
        """Remove a member (the team's lead or staff)."""
        team = self.get_object()
        teams.membership_remove(actor=request.user, team=team, username=username)
        return Response(status=status.HTTP_204_NO_CONTENT)


class QuotaRequestViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                          viewsets.GenericViewSet):
    """Quota requests of the caller's teams (staff: all), and their review."""

    serializer_class = s.QuotaRequestSerializer
    lookup_value_regex = "[0-9]+"  # ids only: "abc" is 404, not a failed integer lookup

    def get_queryset(self):
        """Visible requests, filtered by ``?team=<slug>`` and ``?state=``."""
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return QuotaRequest.objects.none()
        return quota_requests_visible(
            user=self.request.user,
            team=self.request.query_params.get("team"),
            state=self.request.query_params.get("state"),
        )

    @extend_schema(parameters=[
        OpenApiParameter("team", str, description="team slug"),
        OpenApiParameter("state", str, enum=QuotaRequest.State.values),
    ])
    def list(self, request, *args, **kwargs):
        """List requests; ``?state=`` must be one of the states."""
        s.TeamFilterSerializer(data=request.query_params).is_valid(raise_exception=True)
        state = request.query_params.get("state")
        if state and state not in QuotaRequest.State.values:
            raise ValidationError({"state": f"'{state}' is not one of "
                                            f"{', '.join(QuotaRequest.State.values)}."})
        return super().list(request, *args, **kwargs)

    def get_object(self):
        """The request if the caller may see it, else 404."""
        return get_object_or_404(
            quota_requests_visible(user=self.request.user), pk=self.kwargs["pk"]
        )

    @extend_schema(request=s.QuotaRequestCreateSerializer,
                   responses={201: s.QuotaRequestSerializer})
    def create(self, request):
        """Request quota (the team's lead or staff)."""
        data = s.QuotaRequestCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        team = access.visible_teams(request.user).filter(slug=values.pop("team")).first()
        if team is None:
            raise NotFound("No such team.")
        flavor_name = values.pop("flavor")
        flavor = GpuFlavor.objects.filter(cluster_id=team.cluster_id, name=flavor_name).first()
        if flavor is None:
            raise ValidationError({"flavor": f"No flavor '{flavor_name}' in the team's cluster."})
        created = quota.quota_request_create(actor=request.user, team=team, flavor=flavor,
                                             **values)
        return Response(s.QuotaRequestSerializer(created).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.ApproveSerializer, responses={200: s.QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approve (staff): the grant changes in the same transaction."""
        target = self.get_object()
        data = s.ApproveSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        done = quota.quota_request_approve(actor=request.user, request=target,
                                           **data.validated_data)
        return Response(s.QuotaRequestSerializer(done).data)

    @extend_schema(request=s.RejectSerializer, responses={200: s.QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        """Reject with a comment (staff)."""
        target = self.get_object()
        if not access.is_staff(request.user):
            raise PermissionDenied("Only platform staff can reject quota requests.")
        data = s.RejectSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        done = quota.quota_request_reject(actor=request.user, request=target,
                                          **data.validated_data)
        return Response(s.QuotaRequestSerializer(done).data)

    @extend_schema(request=None, responses={200: s.QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        """Withdraw a pending request (the requesting team's lead)."""
        target = self.get_object()
        done = quota.quota_request_withdraw(actor=request.user, request=target)
        return Response(s.QuotaRequestSerializer(done).data)

    @extend_schema(responses={200: s.PreviewSerializer})
    @action(detail=True, methods=["get"])
    def preview(self, request, pk=None):
        """What approval would do (staff and the team's lead)."""
        target = self.get_object()
        if not (access.is_staff(request.user) or access.is_lead(request.user, target.team)):
            raise PermissionDenied("Only staff and the team's lead can preview a request.")
        return Response(quota_request_preview(request=target))
