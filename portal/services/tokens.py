"""API tokens: issue (the secret is returned once) and revoke."""

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from portal.models import ApiToken
from portal.services.audit import audit_record

#: Longest token name.
NAME_MAX = ApiToken._meta.get_field("name").max_length


def lifetime(days: int | None) -> timedelta | None:
    """The lifetime of a new token: ``days`` (``None`` = the default), ``0`` = never expires.

    Raises :class:`ValidationError` on ``expires_days`` when ``days`` is negative, over
    ``settings.API_TOKEN_MAX_DAYS``, or ``0`` while that cap is set.
    """
    cap = settings.API_TOKEN_MAX_DAYS
    days = settings.API_TOKEN_DEFAULT_DAYS if days is None else days
    if days < 0:
        raise ValidationError({"expires_days": ["Must be 0 (never) or more days."]})
    if cap and (days == 0 or days > cap):
        raise ValidationError({"expires_days": [
            f"Tokens expire within {cap} days here (API_TOKEN_MAX_DAYS); give 1 to {cap}."]})
    return timedelta(days=days) if days else None


def token_issue(*, actor, user, name: str, days: int | None = None,
                rotate: bool = False) -> tuple[ApiToken, str]:
    """Make a token named ``name`` for ``user``; return ``(row, secret)``.

    The secret is in no row, log or audit event: show it once. ``days`` as in
    :func:`lifetime`. ``rotate``: first revoke ``user``'s tokens of that name. Only
    the user or staff may (``actor`` ``None``: the command line). Raises
    :class:`PermissionDenied` or :class:`ValidationError` (``name``, ``expires_days``).
    """
    if actor is not None and actor != user and not getattr(actor, "is_staff", False):
        raise PermissionDenied("Only the user or platform staff can make the user's tokens.")
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": ["Give the token a name (what it is for)."]})
    if len(name) > NAME_MAX:
        raise ValidationError({"name": [f"At most {NAME_MAX} characters, got {len(name)}."]})
    expiry = lifetime(days)
    with transaction.atomic():
        if rotate:
            for old in ApiToken.objects.filter(user=user, name=name):
                _revoke(actor, old)
        token, secret = ApiToken.objects.create(user=user, expiry=expiry, name=name)
        audit_record(actor=actor, action="token.issued", target=token, team=None,
                     after={"user": user.get_username(), "name": name,
                            "token_key": token.token_key,
                            "expiry": token.expiry.isoformat() if token.expiry else None})
    return token, secret


def token_revoke(*, actor, token: ApiToken) -> None:
    """Revoke ``token`` (its owner or staff): the row goes, the secret stops working."""
    if actor != token.user and not getattr(actor, "is_staff", False):
        raise PermissionDenied("Only the token's owner or platform staff can revoke it.")
    with transaction.atomic():
        _revoke(actor, token)


def _revoke(actor, token: ApiToken) -> None:
    audit_record(actor=actor, action="token.revoked", target=token, team=None,
                 before={"user": token.user.get_username(), "name": token.name,
                         "token_key": token.token_key})
    token.delete()
