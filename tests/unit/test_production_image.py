"""The production image serves HTML: its static step, then pages under DEBUG=false.

No docker engine here: these tests run the image's own steps. ``scripts/build-static``
is what the Dockerfile runs; the pages are then rendered in a fresh process with
production settings (DEBUG=false, manifest static storage) against that STATIC_ROOT.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.services import REPO_ROOT

#: Production settings for the probe process; SQLite and the filesystem broker in a
#: temp folder stand in for PostgreSQL and Redis (healthz needs both reachable).
PRODUCTION_ENV = {
    "DEBUG": "false",
    "SECRET_KEY": "k" * 20 + "-production-secret-with-enough-entropy-0123456789abcdef",
    "ALLOWED_HOSTS": "testserver",
}

#: Runs in the probe process: GET the login page and /healthz over "https".
PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.test import Client
assert settings.DEBUG is False
client = Client(raise_request_exception=False)
login = client.get("/accounts/login/", secure=True)
health = client.get("/healthz", secure=True)
print(json.dumps({"storage": settings.STORAGES["staticfiles"]["BACKEND"],
                  "login": login.status_code, "login_body": login.content.decode(),
                  "healthz": health.status_code, "healthz_body": health.json()}))
"""


def _env(tmp_path, static_root) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("DATABASE_URL", "REDIS_URL", "CELERY_", "DEBUG", "SECRET_KEY",
                                 "ALLOWED_HOSTS", "STATIC_ROOT", "PORTAL_VAR_DIR"))
            and k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return {**keep, **PRODUCTION_ENV, "DJANGO_SETTINGS_MODULE": "portal.settings",
            "STATIC_ROOT": str(static_root), "PORTAL_VAR_DIR": str(tmp_path / "var"),
            "DATABASE_URL": f"sqlite:///{tmp_path / 'portal.sqlite3'}"}


def _probe(tmp_path, static_root) -> dict:
    (tmp_path / "var").mkdir(exist_ok=True)
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT,
                            env=_env(tmp_path, static_root), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_dockerfile_runs_the_production_static_step():
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert "RUN scripts/build-static" in dockerfile
    assert "DEBUG=true" not in dockerfile
    assert "DEBUG=false" in (REPO_ROOT / "scripts" / "build-static").read_text()


@pytest.mark.parametrize("entry", [".env", "var/", ".venv/", "**/kubeconfig", ".git/",
                                   "**/__pycache__/", ".pytest_cache/", "*.sqlite3"])
def test_dockerignore_keeps_secrets_and_local_state_out(entry):
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    assert entry in lines


@pytest.fixture(scope="module")
def built_static(tmp_path_factory):
    """STATIC_ROOT filled by the image's own static step (scripts/build-static)."""
    tmp = tmp_path_factory.mktemp("image")
    static_root = tmp / "static"
    result = subprocess.run(["sh", "scripts/build-static", sys.executable], cwd=REPO_ROOT,
                            env=_env(tmp, static_root), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return static_root


def test_static_step_writes_the_manifest(built_static):
    manifest = json.loads((built_static / "staticfiles.json").read_text())
    assert "css/portal.css" in manifest["paths"]
    assert "vendor/plotly/plotly.min.js" in manifest["paths"]
    hashed = manifest["paths"]["css/portal.css"]
    assert hashed != "css/portal.css" and (built_static / hashed).is_file()


def test_login_page_renders_with_production_settings_after_the_static_step(
        built_static, tmp_path):
    seen = _probe(tmp_path, built_static)
    assert seen["storage"] == "whitenoise.storage.CompressedManifestStaticFilesStorage"
    assert seen["login"] == 200, seen["login_body"][:2000]
    manifest = json.loads((built_static / "staticfiles.json").read_text())
    assert f'/static/{manifest["paths"]["css/portal.css"]}' in seen["login_body"]
    assert seen["healthz"] == 200, seen["healthz_body"]
    assert seen["healthz_body"] == {"status": "ok", "checks": {
        "database": "ok", "broker": "ok", "pages": "ok"}}


def test_without_the_manifest_pages_fail_and_healthz_says_so(tmp_path):
    empty = tmp_path / "static-never-collected"
    empty.mkdir()
    seen = _probe(tmp_path, empty)
    assert seen["login"] == 500
    assert seen["healthz"] == 503
    assert seen["healthz_body"] == {"status": "degraded", "checks": {
        "database": "ok", "broker": "ok", "pages": "down"}}
