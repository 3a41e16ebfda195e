"""Settings come from the environment; production settings pass check --deploy."""

import os
import subprocess
import sys

from tests.services import REPO_ROOT

PRODUCTION_ENV = {
    "DEBUG": "false",
    "SECRET_KEY": "k" * 20 + "-production-secret-with-enough-entropy-0123456789abcdef",
    "ALLOWED_HOSTS": "gpu-portal.example.com",
    "DATABASE_URL": "postgres://portal:pw@db.example.com:5432/portal",
    "REDIS_URL": "redis://redis.example.com:6379/0",
}


def _manage(*args: str, extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in PRODUCTION_ENV and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )


def test_production_settings_pass_check_deploy_without_warnings():
    result = _manage("check", "--deploy", "--fail-level", "WARNING", extra_env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_debug_settings_fail_check_deploy():
    """The check is real: the demo defaults (DEBUG on, dev key) do warn."""
    result = _manage("check", "--deploy", "--fail-level", "WARNING", extra_env={"DEBUG": "true"})
    assert result.returncode != 0
    assert "security.W018" in result.stderr  # DEBUG is on


def test_production_refuses_to_start_without_secret_key():
    env = dict(PRODUCTION_ENV)
    env.pop("SECRET_KEY")
    result = _manage("check", extra_env=env)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_unknown_scheduler_backend_is_refused_with_its_name():
    result = _manage("check", extra_env={"SCHEDULER_BACKEND": "slurm"})
    assert result.returncode != 0
    assert "SCHEDULER_BACKEND must be 'kueue' or 'volcano', got 'slurm'" in result.stderr


def test_hsts_preload_is_opt_in():
    show = ("from django.conf import settings as s; "
            "print(s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_PRELOAD, s.SILENCED_SYSTEM_CHECKS)")
    default = _manage("shell", "--no-imports", "-c", show, extra_env=PRODUCTION_ENV)
    assert default.stdout.split(maxsplit=2) == ["31536000", "False", "['security.W021']\n"]
    opted = {**PRODUCTION_ENV, "SECURE_HSTS_PRELOAD": "true"}
    opted_out = _manage("shell", "--no-imports", "-c", show, extra_env=opted).stdout
    assert opted_out.split(maxsplit=2) == ["31536000", "True", "[]\n"]
    result = _manage("check", "--deploy", "--fail-level", "WARNING", extra_env=opted)
    assert result.returncode == 0, result.stdout + result.stderr


def test_pod_security_levels_come_from_the_environment():
    show = "from django.conf import settings as s; print(s.POD_SECURITY_LABELS)"
    default = _manage("shell", "--no-imports", "-c", show, extra_env={})
    assert default.stdout.strip() == (
        "(('enforce', 'baseline'), ('warn', 'restricted'), ('audit', 'restricted'))")
    chosen = _manage("shell", "--no-imports", "-c", show, extra_env={
        "POD_SECURITY_LEVEL": "restricted", "POD_SECURITY_WARN_LEVEL": ""})
    assert chosen.stdout.strip() == "(('enforce', 'restricted'),)"
    wrong = _manage("check", extra_env={"POD_SECURITY_LEVEL": "strict"})
    assert wrong.returncode != 0 and "got 'strict'" in wrong.stderr
