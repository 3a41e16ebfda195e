"""Page forms: they check the shape of input; services check the rules.

Numbers of GPUs are taken as text and handed to the services unchanged, so
"1.5" is refused (never rounded) with the service's own message.
"""

from datetime import datetime, time

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone

from portal.models import GpuFlavor, Membership


def add_service_error(form: forms.Form, exc: ValidationError) -> None:
    """Show a service's ``ValidationError`` on ``form``: next to the field it names.

    Keys that are not fields of the form become errors of the whole form.
    """
    if not hasattr(exc, "error_dict"):
        form.add_error(None, exc)
        return
    for field, errors in exc.error_dict.items():
        form.add_error(field if field in form.fields else None, errors)


class QuotaRequestForm(forms.Form):
    """A lead asks for quota on one of the team's cluster's flavors."""

    flavor = forms.TypedChoiceField(coerce=int, label="GPU flavor")
    nominal_gpus = forms.CharField(label="Nominal GPUs", max_length=12)
    borrowing_limit_gpus = forms.CharField(
        label="Borrowing limit (GPUs)", required=False, max_length=12,
        help_text="Empty = no limit. Needs the team to be in a cohort.",
    )
    lending_limit_gpus = forms.CharField(
        label="Lending limit (GPUs)", required=False, max_length=12,
        help_text="Empty = no limit; at most the nominal GPUs.",
    )
    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    ends_at = forms.DateField(
        label="End date (optional)", required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="Temporary quota: reverts at 00:00 on this date.",
    )

    def __init__(self, *args, flavors: list[GpuFlavor], **kwargs) -> None:
        """``flavors``: the flavors of the team's cluster (already loaded)."""
        super().__init__(*args, **kwargs)
        self._flavors = {f.pk: f for f in flavors}
        self.fields["flavor"].choices = [
            (f.pk, f"{f.name} ({f.gpu_model or f.gpu_resource})") for f in flavors
        ]

    def clean_ends_at(self) -> datetime | None:
        """The end date as an aware datetime at the start of that day."""
        day = self.cleaned_data.get("ends_at")
        if day is None:
            return None
        return timezone.make_aware(datetime.combine(day, time.min))

    def service_kwargs(self) -> dict:
        """Keyword arguments for :func:`portal.services.quota.quota_request_create`."""
        data = self.cleaned_data
        return {
            "flavor": self._flavors[data["flavor"]],
            "nominal_gpus": data["nominal_gpus"],
            "borrowing_limit_gpus": data["borrowing_limit_gpus"] or None,
            "lending_limit_gpus": data["lending_limit_gpus"] or None,
            "justification": data["justification"],
            "ends_at": data["ends_at"],
        }


class MemberForm(forms.Form):
    """Add a user to a team, or change their role."""

    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)


class ReviewApproveForm(forms.Form):
    """Staff approve a request; over-commit must be ticked when it applies."""

    comment = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    allow_overcommit = forms.BooleanField(required=False, label="Allow over-commit")


class ReviewRejectForm(forms.Form):
    """Staff reject a request; the service requires the comment."""

    comment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False, label="Reason (required)"
    )
