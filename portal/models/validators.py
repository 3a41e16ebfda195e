"""Field validators shared by models, services and serializers."""

import re

from django.core.exceptions import ValidationError

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: Extended resource names as device plugins expose them: ``nvidia.com/gpu``,
#: ``nvidia.com/mig-1g.10gb`` (domain-prefixed, Kubernetes qualified name rules).
GPU_RESOURCE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)


def validate_dns1123_label(value: str) -> None:
    """Refuse anything but a DNS-1123 label (lowercase, digits, '-', at most 63 chars).

    The value is never altered: an uppercase or long name is an error, not a
    silently fixed name. Raises :class:`ValidationError`.
    """
    if len(value) > 63:
        raise ValidationError(
            f"'{value[:70]}' is {len(value)} characters; a DNS-1123 label has at most 63.",
            code="too_long",
        )
    if not DNS1123_LABEL.match(value):
        raise ValidationError(
            f"'{value}' is not a DNS-1123 label: use lowercase letters, digits and '-', "
            "starting and ending with a letter or digit.",
            code="invalid_dns1123",
        )


def validate_gpu_resource(value: str) -> None:
    """Refuse a GPU resource name that is not a domain-prefixed extended resource."""
    if len(value) > 253 or not GPU_RESOURCE.match(value):
        raise ValidationError(
            f"'{value}' is not an extended resource name such as nvidia.com/gpu "
            "or nvidia.com/mig-1g.10gb.",
            code="invalid_resource",
        )
