"""The admin console (``/admin/``) for platform staff.

Writes that carry rules (quota decisions) go through services via actions;
catalog rows (clusters, flavors, cohorts, priority classes) are plain edits
that bump the cluster's spec generation so the reconciler picks them up.
"""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from portal import models
from portal.services import catalog, quota
from portal.services.outbox import cluster_spec_bump, reconcile_enqueue


class BumpsClusterAdmin(admin.ModelAdmin):
    """Saving or deleting a row marks its cluster's desired state as changed."""

    def _cluster_id(self, obj) -> int | None:
        return getattr(obj, "cluster_id", None)

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if self._cluster_id(obj):
            cluster_spec_bump(cluster_id=self._cluster_id(obj))

    def delete_model(self, request, obj) -> None:
        cluster_id = self._cluster_id(obj)
        super().delete_model(request, obj)
        if cluster_id:
            cluster_spec_bump(cluster_id=cluster_id)


class ClusterForm(forms.ModelForm):
    """Refuses a backend switch the renderers could not honour (``catalog.backend_problems``)."""

    class Meta:
        model = models.Cluster
        fields = ["name", "backend", "kube_context"]

    def clean(self):
        data = super().clean()
        if self.instance.pk and "backend" in self.changed_data:
            for message in catalog.backend_problems(
                cluster=self.instance, backend=data.get("backend")
            ).get("backend", []):
                self.add_error("backend", message)
        return data


@admin.register(models.Cluster)
class ClusterAdmin(admin.ModelAdmin):
    """A backend switch bumps the spec generation and reconciles on commit (old objects pruned)."""

    form = ClusterForm
    list_display = ("name", "backend", "kube_context", "spec_generation", "applied_generation")

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if change and "backend" in form.changed_data:
            cluster_spec_bump(cluster_id=obj.pk)
            reconcile_enqueue(cluster_id=obj.pk)


class GpuFlavorForm(forms.ModelForm):
    """Refuses a flavor that could not be rendered (``catalog.flavor_spec_check``): one
    such row would break every reconcile, preview and job submission of its cluster."""

    class Meta:
        model = models.GpuFlavor
        fields = ["cluster", "name", "gpu_resource", "gpu_model", "node_labels", "node_taints",
                  "tolerations", "physical_gpus", "time_slicing_replicas", "gpus_per_node",
                  "cpu_per_gpu", "memory_per_gpu"]

    def clean(self):
        data = super().clean()
        names = ("name", "gpu_resource", "gpu_model", "physical_gpus", "time_slicing_replicas",
                 "cpu_per_gpu", "memory_per_gpu", "node_labels", "node_taints", "tolerations")
        if self.errors or any(n not in data for n in names):
            return data
        values = {n: data[n] for n in names}
        for name, empty in (("node_labels", {}), ("node_taints", []), ("tolerations", [])):
            values[name] = values[name] or empty
        if not isinstance(values["node_labels"], dict):
            self.add_error("node_labels", "Expected an object of string keys and values.")
            return data
        for name in ("node_taints", "tolerations"):
            if not isinstance(values[name], list):
                self.add_error(name, "Expected a list of objects.")
                return data
        try:
            catalog.flavor_spec_check(**values)
        except ValidationError as exc:
            for field, messages_ in exc.message_dict.items():
                head = field.split("[", 1)[0]
                self.add_error(head if head in self.fields else None,
                               [m if head == field else f"{field}: {m}" for m in messages_])
        return data


@admin.register(models.GpuFlavor)
class GpuFlavorAdmin(BumpsClusterAdmin):
    form = GpuFlavorForm
    list_display = ("name", "cluster", "gpu_resource", "gpu_model", "physical_gpus",
                    "time_slicing_replicas")
    list_filter = ("cluster",)


@admin.register(models.Cohort)
class CohortAdmin(BumpsClusterAdmin):
    list_display = ("name", "cluster", "parent", "weight")


class MembershipInline(admin.TabularInline):
    model = models.Membership
    extra = 0


class GrantInline(admin.TabularInline):
    model = models.QuotaGrant
    extra = 0
    readonly_fields = ("temporary_request",)


@admin.register(models.Team)
class TeamAdmin(BumpsClusterAdmin):
    list_display = ("slug", "name", "cluster", "cohort", "weight")
    list_filter = ("cluster", "cohort")
    search_fields = ("slug", "name")
    inlines = [MembershipInline, GrantInline]


@admin.register(models.PriorityClass)
class PriorityClassAdmin(admin.ModelAdmin):
    list_display = ("name", "value", "description")


@admin.register(models.QuotaRequest)
class QuotaRequestAdmin(admin.ModelAdmin):
    list_display = ("id", "team", "flavor", "nominal_gpus", "borrowing_limit_gpus",
                    "lending_limit_gpus", "state", "ends_at", "created_at")
    list_filter = ("state", "flavor")
    readonly_fields = ("state", "reviewer", "reviewed_at", "previous_grant", "expired_at",
                       "overcommit_acknowledged")
    actions = ["approve_selected", "reject_selected"]

    @admin.action(description="Approve selected pending requests (no over-commit)")
    def approve_selected(self, request, queryset) -> None:
        for target in queryset.select_related("team", "flavor"):
            try:
                quota.quota_request_approve(actor=request.user, request=target,
                                            comment="approved in the admin console")
            except ValidationError as exc:
                self.message_user(request, f"#{target.pk}: {'; '.join(exc.messages)}",
                                  messages.ERROR)

    @admin.action(description="Reject selected pending requests")
    def reject_selected(self, request, queryset) -> None:
        for target in queryset.select_related("team", "flavor"):
            try:
                quota.quota_request_reject(actor=request.user, request=target,
                                           comment="rejected in the admin console")
            except ValidationError as exc:
                self.message_user(request, f"#{target.pk}: {'; '.join(exc.messages)}",
                                  messages.ERROR)


@admin.register(models.AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ("at", "actor", "action", "team", "target_type", "target_id")
    list_filter = ("action",)
    readonly_fields = [f.name for f in models.AuditEvent._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.Job)
class JobAdmin(admin.ModelAdmin):
    """Gang jobs, read-only; staff cancel through the service (Workload deactivated first)."""

    list_display = ("name", "team", "phase", "reason", "queue_position", "workers",
                    "gpus_per_worker", "flavor", "submitter", "submitted_at")
    list_filter = ("phase", "kind", "team")
    list_select_related = ("team", "flavor", "submitter")
    search_fields = ("name", "team__slug", "submitter__username")
    actions = ["cancel_jobs"]

    def has_add_permission(self, request) -> bool:
        return False  # submitted by teams through the form or the API

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.action(description="Cancel the selected jobs")
    def cancel_jobs(self, request, queryset) -> None:
        from portal.services.jobs import job_cancel

        for job in queryset:
            try:
                job_cancel(actor=request.user, job=job)
            except ValidationError as exc:
                self.message_user(request, f"{job.name}: {' '.join(exc.messages)}",
                                  messages.WARNING)
            else:
                self.message_user(request, f"Cancelling {job.name}.")


@admin.register(models.ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """API tokens: staff see whose, which name, the secret's first characters and the
    expiry, and revoke them (delete); never the secret (not stored) nor its digest. Tokens are
    made by their owners (``/account/tokens/``) or ``manage.py create_api_token``."""

    list_display = ("name", "user", "token_key", "created", "expiry")
    list_filter = ("created", "expiry")
    search_fields = ("name", "token_key", "user__username")
    fields = ("name", "user", "token_key", "created", "expiry")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def delete_queryset(self, request, queryset) -> None:
        """"Delete selected" revokes each token through the service (audited)."""
        from portal.services.tokens import token_revoke

        for token in queryset.select_related("user"):
            token_revoke(actor=request.user, token=token)

    def delete_model(self, request, obj) -> None:
        from portal.services.tokens import token_revoke

        token_revoke(actor=request.user, token=obj)
