"""``cp .env.example .env`` gives the settings the values the file shows.

django-environ keeps an inline ``# comment`` as part of the value, so the file keeps
comments on their own lines; these tests load it through the settings' own reader.
"""

import json
import os
import subprocess
import sys

from tests.services import REPO_ROOT

EXAMPLE = REPO_ROOT / ".env.example"

PROBE = """
import json, django
django.setup()
from django.conf import settings as s
print(json.dumps({
    "ENV_FILE": str(s.ENV_FILE), "DEBUG": s.DEBUG, "SECRET_KEY": s.SECRET_KEY,
    "ALLOWED_HOSTS": s.ALLOWED_HOSTS, "CSRF_TRUSTED_ORIGINS": s.CSRF_TRUSTED_ORIGINS,
    "DATABASE": [s.DATABASES["default"]["ENGINE"], str(s.DATABASES["default"]["NAME"])],
    "CELERY_BROKER_URL": s.CELERY_BROKER_URL, "SCHEDULER_BACKEND": s.SCHEDULER_BACKEND,
    "KUBECONFIG": s.KUBECONFIG, "KUBE_CONTEXT": s.KUBE_CONTEXT,
    "KUBE_CONNECT_TIMEOUT": s.KUBE_CONNECT_TIMEOUT, "KUBE_REQUEST_TIMEOUT": s.KUBE_REQUEST_TIMEOUT,
    "PROMETHEUS_URL": s.PROMETHEUS_URL, "DCGM_EXPORTER_URL": s.DCGM_EXPORTER_URL,
    "USAGE_RETENTION": [s.USAGE_RETENTION_5M_DAYS, s.USAGE_RETENTION_HOURLY_DAYS,
                        s.USAGE_RETENTION_DAILY_DAYS],
    "IDLE": [s.IDLE_GRACE_HOURS, s.IDLE_SNOOZE_HOURS],
    "DEFAULT_FROM_EMAIL": s.DEFAULT_FROM_EMAIL,
    "MAILER": s.MAILERS["default"]["BACKEND"],
    "LOG_LEVEL": s.LOGGING["root"]["level"],
}))
"""


def _assignments() -> dict[str, str]:
    pairs = {}
    for line in EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value
    return pairs


def test_comments_are_on_their_own_lines():
    pairs = _assignments()
    assert "DEBUG" in pairs and "SECRET_KEY" in pairs
    for key, value in pairs.items():
        assert "#" not in value, f"{key}: an inline comment would become part of the value"
        assert value == value.strip(), f"{key}: stray spaces around the value"


def test_settings_read_the_example_as_written(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update({"PORTAL_ENV_FILE": str(EXAMPLE), "DJANGO_SETTINGS_MODULE": "portal.settings",
                "PORTAL_VAR_DIR": str(tmp_path)})
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {
        "ENV_FILE": str(EXAMPLE),
        "DEBUG": True,
        "SECRET_KEY": "change-me",
        "ALLOWED_HOSTS": ["127.0.0.1", "localhost"],
        "CSRF_TRUSTED_ORIGINS": [],
        "DATABASE": ["django.db.backends.sqlite3", "var/portal.sqlite3"],
        "CELERY_BROKER_URL": "filesystem://",
        "SCHEDULER_BACKEND": "kueue",
        "KUBECONFIG": "", "KUBE_CONTEXT": "",
        "KUBE_CONNECT_TIMEOUT": 5.0, "KUBE_REQUEST_TIMEOUT": 30.0,
        "PROMETHEUS_URL": "", "DCGM_EXPORTER_URL": "",
        "USAGE_RETENTION": [14, 180, 1825],
        "IDLE": [24.0, 72.0],
        "DEFAULT_FROM_EMAIL": "gpu-portal@localhost",
        # EMAIL_BACKEND= (empty) means the default: the console while DEBUG is on.
        "MAILER": "django.core.mail.backends.console.EmailBackend",
        "LOG_LEVEL": "INFO",
    }
