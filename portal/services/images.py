"""Which registries a job's image may come from (``settings.IMAGE_REGISTRIES``).

The node's container runtime pulls the image, from the node's network: a registry on
the node's loopback or on a link-local address (``169.254.169.254`` is the cloud
metadata service) is not somewhere a team should point the runtime. Those are
refused unless allowed by name in ``IMAGE_REGISTRIES`` or by
``IMAGE_ALLOW_LOCAL_REGISTRIES``; with ``IMAGE_REGISTRIES`` set, only the registries it
lists are allowed. Names are not resolved: the rule reads the reference as written
(``ubuntu`` is ``docker.io``).
"""

import ipaddress

from django.conf import settings
from docker_image.reference import InvalidReference, Reference

LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def registry_of(image: str) -> str | None:
    """The registry (``host`` or ``host:port``, lowercase) of ``image``; ``None`` if it is
    not an image reference (the spec check reports that)."""
    try:
        host, _ = Reference.parse_normalized_named(image).split_hostname()
    except (InvalidReference, TypeError, ValueError):
        return None
    return host.lower()


def _host(registry: str) -> str:
    if registry.startswith("["):  # [v6]:port
        return registry[1:registry.index("]")] if "]" in registry else registry
    return registry.rsplit(":", 1)[0] if registry.count(":") == 1 else registry


def is_local(registry: str) -> bool:
    """True for a loopback, link-local or unspecified address, or a localhost name."""
    host = _host(registry).rstrip(".")
    if host in LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_link_local or address.is_unspecified


def registry_problem(image: str) -> str | None:
    """Why ``image``'s registry is refused, or ``None`` when it is allowed."""
    registry = registry_of(image)
    if registry is None:
        return None
    allowed = [r.lower() for r in settings.IMAGE_REGISTRIES]
    if allowed:
        if registry in allowed or _host(registry) in allowed:
            return None
        return (f"registry '{registry}' is not allowed here; images come from: "
                f"{', '.join(allowed)}")
    if is_local(registry) and not settings.IMAGE_ALLOW_LOCAL_REGISTRIES:
        return (f"registry '{registry}' is a loopback or link-local address; the node would "
                "pull from itself or its metadata service")
    return None
