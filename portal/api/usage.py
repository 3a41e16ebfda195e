"""``GET /api/v1/utilization/``: GPU-hours, efficiency and coverage per team, the
unattributed bucket, idle jobs; ``?format=csv`` for the showback by team and day."""

import csv
import io
from datetime import timedelta

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, OpenApiTypes, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.selectors.usage import (
    DEFAULT_SPAN,
    showback_by_day,
    utilization_report,
    visible_team_list,
)

SHOWBACK_COLUMNS = ("day", "scope", "team", "allocated_gpu_hours", "busy_gpu_hours",
                    "idle_gpu_hours", "efficiency", "coverage")


class CsvRenderer(BaseRenderer):
    """Renders a list of dicts (or a ``{"rows": [...]}`` payload) as CSV with
    :data:`SHOWBACK_COLUMNS`, through Python's ``csv`` module; errors (a dict without
    rows) as ``field,message`` lines. Selected by ``?format=csv``."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if isinstance(data, dict) and "rows" in data:
            writer.writerow(SHOWBACK_COLUMNS)
            for row in data["rows"]:
                writer.writerow(["" if row[c] is None else
                                 (f"{row[c]:.6f}" if isinstance(row[c], float) else row[c])
                                 for c in SHOWBACK_COLUMNS])
        elif isinstance(data, dict):
            writer.writerow(("field", "message"))
            for field_name, messages in data.items():
                for message in messages if isinstance(messages, list) else [messages]:
                    writer.writerow((field_name, str(message)))
        return out.getvalue().encode(self.charset)


class UtilizationQuery(serializers.Serializer):
    """Query parameters: ``team`` (slug), ``since``/``until`` (ISO 8601; default the
    last 7 days)."""

    team = serializers.SlugField(required=False, allow_blank=True)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)

    def validate(self, attrs):
        until = attrs.get("until") or timezone.now()
        try:
            since = attrs.get("since") or until - DEFAULT_SPAN
        except OverflowError:  # until in the first days of year 1
            raise serializers.ValidationError(
                {"until": [f"Too early: the default since is {DEFAULT_SPAN.days} days "
                           "before until."]}) from None
        if since >= until:
            raise serializers.ValidationError({"until": ["Must be later than since."]})
        if until - since > timedelta(days=3660):
            raise serializers.ValidationError({"since": ["At most 10 years at once."]})
        attrs["since"], attrs["until"] = since, until
        return attrs


_figures = {
    "allocated_gpu_hours": serializers.FloatField(),
    "busy_gpu_hours": serializers.FloatField(allow_null=True),
    "idle_gpu_hours": serializers.FloatField(allow_null=True),
    "efficiency": serializers.FloatField(allow_null=True),
    "coverage": serializers.FloatField(allow_null=True),
}


class UtilizationView(APIView):
    """GPU utilization from DCGM: the caller's teams (staff: all)."""

    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("team", OpenApiTypes.STR, description="team slug"),
            OpenApiParameter("since", OpenApiTypes.DATETIME,
                             description="ISO 8601; default until - 7 days"),
            OpenApiParameter("until", OpenApiTypes.DATETIME, description="default now"),
            OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"],
                             description="csv: GPU-hours by team and UTC day (showback)"),
        ],
        responses={200: inline_serializer("Utilization", {
            "since": serializers.DateTimeField(), "until": serializers.DateTimeField(),
            "resolution_seconds": serializers.IntegerField(),
            "teams": inline_serializer("TeamUtilization", {
                "slug": serializers.CharField(), **_figures}, many=True),
            "unattributed": inline_serializer("UnattributedUtilization", _figures,
                                              allow_null=True),
            "idle_jobs": inline_serializer("IdleJob", {
                "job": serializers.CharField(), "team": serializers.CharField(),
                "gpus": serializers.FloatField(), "idle_since": serializers.DateTimeField(),
                "activity": serializers.FloatField(), "state": serializers.CharField(),
                "flag": serializers.IntegerField(),
                "reclaimable_at": serializers.DateTimeField()}, many=True),
        })},
    )
    def get(self, request):
        """GPU-hours (allocated, busy, idle), efficiency (busy / reporting) and coverage
        (reporting / allocated) per team over buckets starting in [since, until);
        ``unattributed`` for staff (null for others); live idle flags. ``?format=csv``:
        the same figures by team and UTC day. 400 names a bad field; 404 for a team the
        caller cannot see."""
        query = UtilizationQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        teams = visible_team_list(user=request.user, slug=params.get("team") or None)
        if teams is None:
            raise NotFound("No such team.")
        if getattr(request.accepted_renderer, "format", "") == "csv":
            rows = showback_by_day(user=request.user, teams=teams, since=params["since"],
                                   until=params["until"])
            name = f"gpu-showback-{params.get('team') or 'all'}-" \
                   f"{params['since']:%Y%m%d}-{params['until']:%Y%m%d}.csv"
            return Response({"rows": rows}, headers={
                "Content-Disposition": f'attachment; filename="{name}"'})
        report = utilization_report(user=request.user, teams=teams, since=params["since"],
                                    until=params["until"])
        return Response(report.as_dict())
