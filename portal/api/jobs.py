"""``/api/v1/jobs/``: submit, list, read, cancel and refresh gang jobs.

The shapes here are a public contract (issue 5): ``POST /api/v1/jobs/`` takes
``{team, name, image, command, args?, env?, workers, gpus_per_worker, flavor,
cpu_per_worker?, memory_per_worker?, priority?, kind?, max_runtime_seconds?, sim_duration_seconds?,
sim_outcome?, sim_profile?}``
(team by slug, flavor and priority by name) and answers 201 with the job;
``GET /api/v1/jobs/?team=&phase=``; ``GET /api/v1/jobs/{id}/``;
``POST /api/v1/jobs/{id}/cancel/``; ``POST /api/v1/jobs/{id}/refresh/``.
Serializers check the shape only; :mod:`portal.services.jobs` checks the rules.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from portal import access
from portal.api.serializers import StrictSerializer
from portal.filters import JobFilter
from portal.models import Job
from portal.selectors.jobs import jobs_visible
from portal.services import jobs as job_services
from portal.services.fields import whole_count

#: Keys a client might send hoping to set a GPU limit apart from the request:
#: refused with a message (GPU requests always equal limits in rendered pods).
LIMIT_KEYS = ("gpu_limit", "gpu_limit_per_worker", "gpus_limit_per_worker", "limits",
              "resources", "gpu_request_per_worker", "gpus_request_per_worker")


@extend_schema_field(OpenApiTypes.INT)
class WholeNumberField(serializers.Field):
    """A whole number (GPUs, workers, seconds): ``1.5`` is refused, never rounded."""

    default_error_messages = {"invalid": "Not a whole number."}

    def __init__(self, *, allow_none: bool = False, **kwargs) -> None:
        self.allow_none_value = allow_none
        super().__init__(allow_null=allow_none, **kwargs)

    def to_internal_value(self, data):
        """Validate with :func:`portal.services.fields.whole_count`; its message names no field."""
        try:
            return whole_count(self.field_name, data, allow_none=self.allow_none_value)
        except ValidationError as exc:
            raise serializers.ValidationError(exc.message_dict[self.field_name]) from exc

    def to_representation(self, value):
        """As is."""
        return value


class EnvVarSerializer(serializers.Serializer):
    """One environment variable of the workers' container."""

    name = serializers.CharField(trim_whitespace=False)
    value = serializers.CharField(allow_blank=True, trim_whitespace=False, default="")


class JobCreateSerializer(StrictSerializer):
    """``POST /api/v1/jobs/``. Unknown keys are refused (a GPU limit apart from the
    request, in particular: requests always equal limits)."""

    team = serializers.CharField(help_text="team slug")
    name = serializers.CharField(trim_whitespace=False,
                                 help_text="DNS-1123 label, unique in the team")
    image = serializers.CharField(trim_whitespace=False, help_text="container image reference")
    command = serializers.ListField(child=serializers.CharField(trim_whitespace=False,
                                                                allow_blank=True))
    args = serializers.ListField(child=serializers.CharField(trim_whitespace=False,
                                                             allow_blank=True),
                                 required=False, default=list)
    env = EnvVarSerializer(many=True, required=False, default=list)
    workers = WholeNumberField(help_text="pods of the gang, started together")
    gpus_per_worker = WholeNumberField(help_text="whole GPUs of the flavor per worker "
                                                 "(request = limit)")
    flavor = serializers.CharField(help_text="GPU flavor name (in the team's cluster)")
    cpu_per_worker = serializers.CharField(required=False, allow_blank=True, default="",
                                           help_text="quantity; empty = the flavor's per-GPU "
                                                     "CPU times gpus_per_worker")
    memory_per_worker = serializers.CharField(required=False, allow_blank=True, default="",
                                              help_text="quantity; empty = the flavor's "
                                                        "per-GPU memory times gpus_per_worker")
    priority = serializers.CharField(required=False, allow_blank=True, allow_null=True,
                                     default=None, help_text="priority class name")
    kind = serializers.ChoiceField(choices=Job.Kind.choices, default=Job.Kind.JOB)
    max_runtime_seconds = WholeNumberField(allow_none=True, required=False, default=None,
                                           help_text="activeDeadlineSeconds; null = no limit")
    sim_duration_seconds = WholeNumberField(
        allow_none=True, required=False, default=None,
        help_text="simulated clusters only: seconds the job runs once started")
    sim_outcome = serializers.CharField(required=False, allow_blank=True, default="",
                                        help_text="simulated clusters only: Succeeded or Failed")
    sim_profile = serializers.CharField(
        required=False, allow_blank=True, default="",
        help_text="simulated clusters only: training, notebook or inference (GPU activity)")

    def unknown_key_message(self, key: str) -> str:
        """A GPU-limit key is refused with why (limits always equal requests)."""
        if key in LIMIT_KEYS or "limit" in key:
            return ("GPU limits cannot be set apart from requests: each worker "
                    "gets gpus_per_worker GPUs as both request and limit.")
        return super().unknown_key_message(key)


class EnvVarOutSerializer(serializers.Serializer):
    """An environment variable as stored."""

    name = serializers.CharField()
    value = serializers.CharField()


class JobSerializer(serializers.ModelSerializer):
    """A gang job: what was submitted and what the cluster did with it.

    ``queue_position`` is 0-based among the LocalQueue's pending workloads
    (``null`` when not pending); ``preemption_loop`` is true after 3 or more
    preemptions within 60 minutes; ``timeline`` lists ``{at, source, type,
    reason, message}`` of the Workload's conditions and the job's events;
    ``manifest`` is the object sent to the cluster.
    """

    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    flavor = serializers.SlugRelatedField(slug_field="name", read_only=True)
    priority = serializers.SlugRelatedField(source="priority_class", slug_field="name",
                                            read_only=True)
    submitter = serializers.SlugRelatedField(slug_field="username", read_only=True)
    env = EnvVarOutSerializer(many=True, read_only=True)
    command = serializers.ListField(child=serializers.CharField(), read_only=True)
    args = serializers.ListField(child=serializers.CharField(), read_only=True)
    total_gpus = serializers.IntegerField(read_only=True)
    preemption_times = serializers.ListField(child=serializers.CharField(), read_only=True)
    timeline = serializers.ListField(child=serializers.DictField(), read_only=True)
    manifest = serializers.DictField(read_only=True, allow_null=True)

    class Meta:
        model = Job
        fields = ["id", "team", "name", "submitter", "kind", "image", "command", "args", "env",
                  "workers", "gpus_per_worker", "total_gpus", "flavor", "cpu_per_worker",
                  "memory_per_worker", "priority", "max_runtime_seconds",
                  "sim_duration_seconds", "sim_outcome", "sim_profile",
                  "phase", "reason", "message", "queue_position", "admitted_flavor",
                  "preemptions", "last_preemptor", "preemption_times", "preemption_loop",
                  "submitted_at", "admitted_at", "started_at", "finished_at",
                  "cancel_requested_at", "status_synced_at", "last_error", "timeline",
                  "manifest"]
        read_only_fields = fields


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Jobs of the caller's teams (staff: all); any other job is 404. The list is newest
    first, filtered by :class:`portal.filters.JobFilter` and paged
    (:mod:`portal.api.pagination`: ``?page=``, ``?page_size=``, total in
    ``X-Total-Count``)."""

    serializer_class = JobSerializer
    filterset_class = JobFilter

    def get_queryset(self):
        """Visible jobs, joined (one query per page of results)."""
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return Job.objects.none()
        return jobs_visible(user=self.request.user)

    @extend_schema(request=JobCreateSerializer, responses={201: JobSerializer})
    def create(self, request):
        """Submit a gang job (any member of the team, staff). 201 with ``phase: Submitted``."""
        data = JobCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        team = access.visible_teams(request.user).filter(slug=values.pop("team")).first()
        if team is None:
            raise NotFound("No such team.")
        job = job_services.job_submit(actor=request.user, team=team, **values)
        return Response(JobSerializer(self.get_queryset().get(pk=job.pk)).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel: the Workload is deactivated (``spec.active: false``), then the job deleted.

        Staff: any job; the team's lead: any job of the team; a member: their own
        (403 otherwise). 202: the worker does it; the phase becomes ``Cancelled``.
        """
        job = job_services.job_cancel(actor=request.user, job=self.get_object())
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def refresh(self, request, pk=None):
        """Ask a worker to read the job's status from the cluster now (202)."""
        job = self.get_object()
        job_services.job_refresh(job=job)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
