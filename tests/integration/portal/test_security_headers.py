"""Response headers: Content-Security-Policy, Permissions-Policy, HSTS (preload opt-in);
the OpenAPI schema needs a login; no page template carries inline JavaScript."""

import re

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from tests.services import REPO_ROOT


def _directives(header: str) -> dict[str, list[str]]:
    parts = (p.strip().split() for p in header.split(";") if p.strip())
    return {p[0]: p[1:] for p in parts}


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/accounts/login/", "/healthz", "/api/v1/teams/"])
def test_every_response_carries_csp_and_permissions_policy(client, url):
    response = client.get(url)
    csp = _directives(response["Content-Security-Policy"])
    assert csp["default-src"] == ["'self'"]
    assert csp["script-src"] == ["'self'"]  # no inline scripts, no eval
    assert csp["object-src"] == ["'none'"]
    assert csp["frame-ancestors"] == ["'none'"]
    assert csp["form-action"] == ["'self'"]
    policy = response["Permissions-Policy"]
    for feature in ("camera=()", "microphone=()", "geolocation=()", "usb=()"):
        assert feature in policy


@pytest.mark.django_db
def test_csp_report_only_mode_and_empty_permissions_policy(client):
    from django.conf import settings

    with override_settings(SECURE_CSP={}, SECURE_CSP_REPORT_ONLY=settings.SECURE_CSP,
                           PERMISSIONS_POLICY=""):
        response = client.get("/accounts/login/")
    assert "Content-Security-Policy" not in response
    assert "script-src 'self'" in response["Content-Security-Policy-Report-Only"]
    assert "Permissions-Policy" not in response


@pytest.mark.django_db
def test_hsts_preload_only_when_opted_in(client):
    with override_settings(SECURE_HSTS_SECONDS=31536000, SECURE_HSTS_INCLUDE_SUBDOMAINS=True,
                           SECURE_HSTS_PRELOAD=False, SECURE_SSL_REDIRECT=False):
        header = client.get("/accounts/login/", secure=True)["Strict-Transport-Security"]
    assert header == "max-age=31536000; includeSubDomains"
    with override_settings(SECURE_HSTS_SECONDS=31536000, SECURE_HSTS_INCLUDE_SUBDOMAINS=True,
                           SECURE_HSTS_PRELOAD=True, SECURE_SSL_REDIRECT=False):
        header = APIClient().get("/accounts/login/", secure=True)["Strict-Transport-Security"]
    assert header == "max-age=31536000; includeSubDomains; preload"


@pytest.mark.django_db
def test_openapi_schema_needs_a_login(django_user_model):
    anonymous = APIClient().get("/api/schema/", {"format": "json"})
    assert anonymous.status_code in (401, 403)
    assert "paths" not in anonymous.content.decode()
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("reader"))
    signed_in = client.get("/api/schema/", {"format": "json"})
    assert signed_in.status_code == 200
    assert "/api/v1/teams/" in signed_in.json()["paths"]


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)


def test_no_template_has_inline_javascript():
    """The CSP's script-src 'self' refuses inline scripts and on* handlers: keep none."""
    offenders = []
    for path in sorted((REPO_ROOT / "templates").rglob("*.html")):
        text = path.read_text()
        for pattern in (INLINE_SCRIPT, INLINE_HANDLER):
            offenders += [f"{path.relative_to(REPO_ROOT)}: {m.group(0)}"
                          for m in pattern.finditer(text)]
    assert offenders == []
