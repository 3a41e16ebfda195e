"""Page forms: they check the shape of input; services check the rules.

Numbers of GPUs are taken as text and handed to the services unchanged, so
"1.5" is refused (never rounded) with the service's own message.
"""

import re
import shlex
from datetime import datetime, time

from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone

from portal.models import GpuFlavor, Membership

#: ``env[2].name: message`` (the service's item path, the API's words) -> the form's
#: words: line 3 of the env box, word 3 of a command line.
_ITEM_PATH = re.compile(r"^(?P<field>env|command|args)\[(?P<index>\d+)\](?:\.(?P<part>name|value))?"
                        r": (?P<message>.*)$", re.S)


def plain_item_message(message: str) -> str:
    """A service message that names a list item by its API path, in the form's words:
    ``"env[0].name: ..."`` -> ``"Line 1 (the name): ..."``, ``"args[2]: ..."`` ->
    ``"Word 3: ..."``; other messages unchanged."""
    match = _ITEM_PATH.match(message)
    if match is None:
        return message
    number = int(match["index"]) + 1
    where = f"Line {number}" if match["field"] == "env" else f"Word {number}"
    if match["part"]:
        where += f" (the {match['part']})"
    return f"{where}: {match['message']}"


def add_service_error(form: forms.Form, exc: ValidationError) -> None:
    """Show a service's ``ValidationError`` on ``form``: next to the field it names,
    every field at once, item paths in the form's words (:func:`plain_item_message`).

    Keys that are not fields of the form become errors of the whole form.
    """
    if not hasattr(exc, "error_dict"):
        form.add_error(None, exc)
        return
    for field, errors in exc.error_dict.items():
        messages = [plain_item_message(m) for error in errors for m in error.messages]
        form.add_error(field if field in form.fields else None, messages)


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


class JobForm(forms.Form):
    """Submit a gang job. Shapes only: the service checks the rules (and names the field).

    ``command`` and ``args`` are command lines split like a POSIX shell would
    (``shlex``); ``env`` is one ``NAME=value`` per line. Numbers are handed to
    the service as typed, so ``1.5`` GPUs is refused with the service's message.
    Field names are the API's.
    """

    name = forms.CharField(max_length=100, help_text="Lowercase letters, digits and '-', "
                                                     "starting with a letter (at most 47).")
    image = forms.CharField(max_length=512, help_text="e.g. ghcr.io/org/train:1.4")
    command = forms.CharField(required=False, max_length=4000,
                              help_text="Empty = the image's entrypoint. Split like a shell.")
    args = forms.CharField(required=False, max_length=8000)
    env = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                          help_text="One NAME=value per line.")
    kind = forms.ChoiceField(choices=[("job", "Single-role job (Indexed Job)"),
                                      ("jobset", "Multi-node job (JobSet, workers find each "
                                                 "other by DNS)")], initial="job")
    workers = forms.CharField(max_length=12, initial="1")
    gpus_per_worker = forms.CharField(label="GPUs per worker", max_length=12, initial="1",
                                      help_text="Whole GPUs; requests always equal limits.")
    flavor = forms.ChoiceField(label="GPU flavor")
    cpu_per_worker = forms.CharField(label="CPU per worker", required=False, max_length=32,
                                     help_text="Quantity such as 8 or 500m; empty = the "
                                               "flavor's CPU per GPU.")
    memory_per_worker = forms.CharField(label="Memory per worker", required=False,
                                        max_length=32,
                                        help_text="Quantity such as 64Gi; empty = the "
                                                  "flavor's memory per GPU.")
    priority = forms.ChoiceField(label="Priority class", required=False)
    max_runtime_seconds = forms.CharField(label="Maximum runtime (seconds)", required=False,
                                          max_length=12, help_text="Empty = no limit.")

    def __init__(self, *args, flavors: list[GpuFlavor], priorities: list, **kwargs) -> None:
        """``flavors``: the flavors the team holds quota on; ``priorities``: priority classes."""
        super().__init__(*args, **kwargs)
        self.fields["flavor"].choices = [
            (f.name, f"{f.name} ({f.gpu_model or f.gpu_resource})") for f in flavors
        ]
        self.fields["priority"].choices = [("", "queue default")] + [
            (p.name, f"{p.name} ({p.value})") for p in priorities
        ]

    @staticmethod
    def _split(field: str, text: str) -> list[str]:
        try:
            return shlex.split(text or "")
        except ValueError as exc:
            raise ValidationError(f"Cannot split this command line: {exc}.",
                                  code=f"bad_{field}") from exc

    def clean_command(self) -> list[str]:
        """The command as a list of strings."""
        return self._split("command", self.cleaned_data.get("command", ""))

    def clean_args(self) -> list[str]:
        """The arguments as a list of strings."""
        return self._split("args", self.cleaned_data.get("args", ""))

    def clean_env(self) -> list[dict]:
        """``NAME=value`` lines as ``[{name, value}]`` (names checked by the service)."""
        env = []
        for number, line in enumerate((self.cleaned_data.get("env") or "").splitlines(), 1):
            if not line.strip():
                continue
            name, sep, value = line.partition("=")
            if not sep:
                raise ValidationError(f"Line {number}: expected NAME=value, got '{line}'.")
            env.append({"name": name.strip(), "value": value})
        return env

    def service_kwargs(self) -> dict:
        """Keyword arguments for :func:`portal.services.jobs.job_submit` / ``job_check``."""
        data = self.cleaned_data
        return {
            "name": data["name"], "image": data["image"], "command": data["command"],
            "args": data["args"], "env": data["env"], "workers": data["workers"],
            "gpus_per_worker": data["gpus_per_worker"], "flavor": data["flavor"],
            "cpu_per_worker": data["cpu_per_worker"],
            "memory_per_worker": data["memory_per_worker"],
            "priority": data["priority"] or None, "kind": data["kind"],
            "max_runtime_seconds": data["max_runtime_seconds"] or None,
        }


class ApiTokenForm(forms.Form):
    """Name and lifetime of a new API token (the service checks the lifetime's cap)."""

    name = forms.CharField(max_length=64, help_text="What the token is for, e.g. 'laptop CLI'.")
    expires_days = forms.IntegerField(
        min_value=0, label="Expires after (days)",
        help_text="0 = never (only where the portal allows tokens that never expire).")
