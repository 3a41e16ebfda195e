"""Serializers: the shapes of the REST API (validation of types; rules live in services)."""

from collections.abc import Mapping

from rest_framework import serializers

from portal.models import Cohort, GpuFlavor, Membership, QuotaGrant, QuotaRequest, Team


class StrictSerializer(serializers.Serializer):
    """A request body whose unknown keys are refused, each named: ``{"key": ["Unknown
    field 'key'."]}`` (with any other field errors). A misspelt optional key such as
    ``borrowing_limit`` would otherwise be dropped silently and its default used."""

    def to_internal_value(self, data):
        """Field errors and unknown keys, reported together (400)."""
        errors: dict = {}
        values = None
        try:
            values = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not isinstance(exc.detail, dict):
                raise
            errors.update(exc.detail)
        if isinstance(data, Mapping):
            for key in sorted(set(data) - set(self.fields)):
                errors[key] = [self.unknown_key_message(key)]
        if errors:
            raise serializers.ValidationError(errors)
        return values

    def unknown_key_message(self, key: str) -> str:
        """The error for an unknown body key (subclasses explain keys they know of)."""
        return f"Unknown field '{key}'."


class FlavorSerializer(serializers.ModelSerializer):
    """A GPU flavor; ``physical_gpus`` counts physical GPUs (capacity)."""

    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = GpuFlavor
        fields = ["name", "cluster", "gpu_resource", "gpu_model", "physical_gpus",
                  "time_slicing_replicas", "gpus_per_node", "cpu_per_gpu", "memory_per_gpu",
                  "node_labels", "node_taints", "tolerations"]


class FlavorCreateSerializer(StrictSerializer):
    """``POST /api/v1/flavors/`` (staff)."""

    cluster = serializers.CharField(help_text="cluster name")
    name = serializers.CharField()
    gpu_resource = serializers.CharField(default="nvidia.com/gpu")
    gpu_model = serializers.CharField(required=False, allow_blank=True, default="")
    physical_gpus = serializers.IntegerField(min_value=0)
    time_slicing_replicas = serializers.IntegerField(min_value=1, default=1)
    gpus_per_node = serializers.IntegerField(min_value=1, default=8)
    cpu_per_gpu = serializers.CharField(default="8")
    memory_per_gpu = serializers.CharField(default="64Gi")
    node_labels = serializers.DictField(child=serializers.CharField(), required=False)
    node_taints = serializers.ListField(child=serializers.DictField(), required=False)
    tolerations = serializers.ListField(child=serializers.DictField(), required=False)


class CohortSerializer(serializers.ModelSerializer):
    """A cohort (department) with its optional parent and fair-sharing weight."""

    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    parent = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Cohort
        fields = ["name", "cluster", "parent", "weight"]


class CohortCreateSerializer(StrictSerializer):
    """``POST /api/v1/cohorts/`` (staff)."""

    cluster = serializers.CharField(help_text="cluster name")
    name = serializers.CharField()
    parent = serializers.CharField(required=False, allow_null=True, default=None)
    weight = serializers.DecimalField(max_digits=8, decimal_places=3, default=1, min_value=0)


class QuotaSerializer(serializers.ModelSerializer):
    """A team's grant on one flavor (whole GPUs; ``null`` limit = no limit)."""

    flavor = serializers.SlugRelatedField(slug_field="name", read_only=True)
    ends_at = serializers.DateTimeField(source="temporary_request.ends_at", read_only=True,
                                        allow_null=True, default=None)

    class Meta:
        model = QuotaGrant
        fields = ["flavor", "nominal_gpus", "borrowing_limit_gpus", "lending_limit_gpus",
                  "cpu", "memory", "ends_at"]


class MemberSerializer(serializers.ModelSerializer):
    """A team member and their role."""

    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Membership
        fields = ["username", "role"]


class MemberWriteSerializer(StrictSerializer):
    """``POST /api/v1/teams/{slug}/members/``."""

    username = serializers.CharField()
    role = serializers.ChoiceField(choices=Membership.Role.choices, default="member")


class TeamSerializer(serializers.ModelSerializer):
    """A team with its quotas and members."""

    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    cohort = serializers.SlugRelatedField(slug_field="name", read_only=True)
    quotas = QuotaSerializer(source="grants", many=True, read_only=True)
    members = MemberSerializer(source="memberships", many=True, read_only=True)

    class Meta:
        model = Team
        fields = ["slug", "name", "cluster", "cohort", "weight", "quotas", "members"]


class TeamCreateSerializer(StrictSerializer):
    """``POST /api/v1/teams/`` (staff). ``cluster`` defaults to the only cluster."""

    slug = serializers.CharField(max_length=200)
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    cluster = serializers.CharField(required=False, allow_null=True, default=None)
    cohort = serializers.CharField(required=False, allow_null=True, default=None)
    weight = serializers.DecimalField(max_digits=8, decimal_places=3, default=1, min_value=0)


class QuotaRequestSerializer(serializers.ModelSerializer):
    """A quota request and its review."""

    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    flavor = serializers.SlugRelatedField(slug_field="name", read_only=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = QuotaRequest
        fields = ["id", "team", "flavor", "state", "nominal_gpus", "borrowing_limit_gpus",
                  "lending_limit_gpus", "justification", "ends_at", "requested_by",
                  "reviewer", "review_comment", "overcommit_acknowledged", "created_at",
                  "reviewed_at", "expired_at"]


class TeamFilterSerializer(serializers.Serializer):
    """``?team=<slug>`` of a list: any text PostgreSQL can compare (no NUL)."""

    team = serializers.CharField(required=False, allow_blank=True, help_text="team slug")


class QuotaRequestCreateSerializer(StrictSerializer):
    """``POST /api/v1/quota-requests/``: whole GPUs; ``1.5`` is refused, never rounded."""

    team = serializers.CharField(help_text="team slug")
    flavor = serializers.CharField(help_text="flavor name (in the team's cluster)")
    nominal_gpus = serializers.IntegerField(min_value=0)
    borrowing_limit_gpus = serializers.IntegerField(min_value=0, required=False, allow_null=True,
                                                    default=None)
    lending_limit_gpus = serializers.IntegerField(min_value=0, required=False, allow_null=True,
                                                  default=None)
    justification = serializers.CharField()
    ends_at = serializers.DateTimeField(required=False, allow_null=True, default=None)


class ApproveSerializer(StrictSerializer):
    """``POST .../approve/``: ``allow_overcommit`` must be true to exceed capacity."""

    comment = serializers.CharField(required=False, allow_blank=True, default="")
    allow_overcommit = serializers.BooleanField(default=False)


class RejectSerializer(StrictSerializer):
    """``POST .../reject/``: a comment is required."""

    comment = serializers.CharField()


class WhatIfFiguresSerializer(serializers.Serializer):
    """One team's figures from one simulated run (waits in seconds, GPUs in units)."""

    team = serializers.CharField()
    jobs = serializers.IntegerField()
    admitted = serializers.IntegerField()
    not_admitted = serializers.IntegerField()
    mean_wait_seconds = serializers.FloatField(allow_null=True)
    p95_wait_seconds = serializers.FloatField(allow_null=True)
    borrowed_mean_gpus = serializers.FloatField()
    borrowed_peak_gpus = serializers.IntegerField()
    jobs_preempted = serializers.IntegerField()
    preemptions = serializers.IntegerField()


class WhatIfDeltaSerializer(serializers.Serializer):
    """After minus before, per figure (``null`` when a side has no admitted job)."""

    mean_wait_seconds = serializers.FloatField(allow_null=True)
    p95_wait_seconds = serializers.FloatField(allow_null=True)
    borrowed_mean_gpus = serializers.FloatField()
    borrowed_peak_gpus = serializers.IntegerField()
    jobs_preempted = serializers.IntegerField()
    preemptions = serializers.IntegerField()
    not_admitted = serializers.IntegerField()


class WhatIfTeamSerializer(serializers.Serializer):
    """A team's figures without (``before``) and with (``after``) the request."""

    team = serializers.CharField()
    before = WhatIfFiguresSerializer()
    after = WhatIfFiguresSerializer()
    delta = WhatIfDeltaSerializer()


class WhatIfSerializer(serializers.Serializer):
    """The recent demand of the cluster (last ``days`` days, at most ``max_jobs``
    jobs) replayed through the scheduler simulator with and without the request."""

    days = serializers.IntegerField()
    since = serializers.DateTimeField()
    jobs = serializers.IntegerField()
    truncated = serializers.BooleanField()
    max_jobs = serializers.IntegerField()
    measured_durations = serializers.IntegerField()
    backend = serializers.CharField()
    horizon_seconds = serializers.FloatField()
    fingerprint_before = serializers.CharField(required=False)
    fingerprint_after = serializers.CharField(required=False)
    sentences = serializers.ListField(child=serializers.CharField())
    teams = WhatIfTeamSerializer(many=True)


class PreviewSerializer(serializers.Serializer):
    """What approval would do (GPU counts of the request's flavor; manifests as JSON)."""

    capacity_gpus = serializers.IntegerField()
    nominal_sum_gpus = serializers.IntegerField()
    nominal_sum_after_gpus = serializers.IntegerField()
    overcommit_after = serializers.BooleanField()
    current = serializers.DictField(allow_null=True)
    requested = serializers.DictField()
    max_admissible_gpus_now = serializers.IntegerField()
    max_admissible_gpus = serializers.IntegerField()
    manifests = serializers.ListField(child=serializers.DictField())
    what_if = WhatIfSerializer(allow_null=True)
