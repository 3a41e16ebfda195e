"""Settings for the GPU quota portal, all read from the environment.

One env reader (django-environ) reads every variable; ``.env.example`` lists them.
Defaults give the embedded setup of ``make demo``: a SQLite file under ``var/``,
a Redis broker when ``REDIS_URL`` is set or else Kombu's filesystem transport
(no server needed), DEBUG on. Production sets ``DEBUG=false`` and gets the
secure defaults that ``manage.py check --deploy`` asks for.
"""

from pathlib import Path

import environ
import plotly

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
env.read_env(BASE_DIR / ".env", overwrite=False)
#: Local state of the embedded default: SQLite file, filesystem broker, beat schedule.
VAR_DIR = Path(env.str("PORTAL_VAR_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DEBUG", default=True)
_DEV_SECRET_KEY = "insecure-dev-key-only-for-local-demo-never-in-production"  # noqa: S105
SECRET_KEY = env.str("SECRET_KEY", default=_DEV_SECRET_KEY if DEBUG else environ.Env.NOTSET)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_filters",
    "portal",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
ASGI_APPLICATION = "portal.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.nav",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'portal.sqlite3'}"),
}
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=0))
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default has several writers (web, worker, beat, the demo's job
    # stream): WAL lets readers run beside a writer, IMMEDIATE transactions queue
    # writers on the busy timeout instead of failing with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "timeout": 30, "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"})
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- auth -----------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

# --- i18n / time ----------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

# --- static files (whitenoise serves them in production) --------------------------
STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / "staticfiles")
# Plotly's JS comes from the installed plotly package (same version as the Python
# figures), served as our own static file: never from a CDN.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/plotly", Path(plotly.__file__).parent / "package_data"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# --- security (production defaults when DEBUG is off) -----------------------------
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not DEBUG)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# --- REST API ---------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "portal.api.errors.ContentNegotiation",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU quota portal API",
    "DESCRIPTION": "Self-service GPU quota, gang jobs, fairness and utilization.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}

# --- Celery -----------------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL or "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        # Kombu's filesystem transport: one folder both ways, so any local process
        # (web, worker, beat) shares the queue with no server running.
        "data_folder_in": str(VAR_DIR / "broker"),
        "data_folder_out": str(VAR_DIR / "broker"),
        "processed_folder": str(VAR_DIR / "broker-processed"),
        # Exchange tables; Kombu's default is ./control in the working directory.
        "control_folder": str(VAR_DIR / "broker-control"),
        "store_processed": False,
    }
    if CELERY_BROKER_URL.startswith("filesystem://")
    else {}
)
CELERY_RESULT_BACKEND = env.str(
    "CELERY_RESULT_BACKEND", default=REDIS_URL or f"file://{VAR_DIR / 'results'}"
)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="portal")
CELERY_BEAT_SCHEDULE = {
    # Temporary quota reverts when its end date passes.
    "expire-grants": {"task": "portal.expire_grants", "schedule": 60.0},
    # The outbox's safety net: re-drive clusters whose applied generation lags,
    # and a full drift check of each every RECONCILE_DRIFT_CHECK_SECONDS.
    "resync": {"task": "portal.resync", "schedule": 30.0},
    # GPU utilization: a 5-minute sample from DCGM, hourly/daily rollups, retention,
    # then idle-GPU detection over the stored samples.
    "usage-collect": {"task": "portal.usage_collect", "schedule": 300.0},
    "usage-rollup": {"task": "portal.usage_rollup", "schedule": 3600.0},
    "usage-prune": {"task": "portal.usage_prune", "schedule": 86400.0},
    "idle-detect": {"task": "portal.idle_detect", "schedule": 900.0},
    # Gang jobs: read every live job's Workload, events and queue position.
    "jobs-sync": {"task": "portal.jobs_sync",
                  "schedule": env.float("JOBS_SYNC_INTERVAL_SECONDS", default=15.0)},
}
#: Fairness history: a snapshot per flavor every interval, kept for the retention.
FAIRNESS_SNAPSHOT_INTERVAL_SECONDS = env.int("FAIRNESS_SNAPSHOT_INTERVAL_SECONDS", default=300)
FAIRNESS_SNAPSHOT_RETENTION_DAYS = env.int("FAIRNESS_SNAPSHOT_RETENTION_DAYS", default=30)
CELERY_BEAT_SCHEDULE["fairness-snapshot"] = {
    "task": "portal.fairness_snapshot", "schedule": float(FAIRNESS_SNAPSHOT_INTERVAL_SECONDS),
}

# --- the cluster side ---------------------------------------------------------------
SCHEDULER_BACKEND = env.str("SCHEDULER_BACKEND", default="kueue")
if SCHEDULER_BACKEND not in ("kueue", "volcano"):
    raise environ.ImproperlyConfigured(
        f"SCHEDULER_BACKEND must be 'kueue' or 'volcano', got {SCHEDULER_BACKEND!r}"
    )
KUBECONFIG = env.str("KUBECONFIG", default="")
KUBE_CONTEXT = env.str("KUBE_CONTEXT", default="")
#: Seconds to connect to, and to wait for an answer from, the Kubernetes API
#: (each request; a timeout is a transient error, retried with backoff).
KUBE_CONNECT_TIMEOUT = env.float("KUBE_CONNECT_TIMEOUT", default=5.0)
KUBE_REQUEST_TIMEOUT = env.float("KUBE_REQUEST_TIMEOUT", default=30.0)
#: Seconds between full reconciles of an up-to-date cluster (finds hand edits).
RECONCILE_DRIFT_CHECK_SECONDS = env.float("RECONCILE_DRIFT_CHECK_SECONDS", default=300.0)

# --- GPU utilization (DCGM) and idle GPUs ----------------------------------------------
#: Prometheus that scrapes dcgm-exporter (HTTP API root). Empty: read DCGM_EXPORTER_URL.
PROMETHEUS_URL = env.str("PROMETHEUS_URL", default="")
#: A dcgm-exporter /metrics URL read directly when PROMETHEUS_URL is empty (the demo).
DCGM_EXPORTER_URL = env.str("DCGM_EXPORTER_URL", default="")
#: Days each resolution of stored samples is kept (5-minute, hourly, daily).
USAGE_RETENTION_5M_DAYS = env.int("USAGE_RETENTION_5M_DAYS", default=14)
USAGE_RETENTION_HOURLY_DAYS = env.int("USAGE_RETENTION_HOURLY_DAYS", default=180)
USAGE_RETENTION_DAILY_DAYS = env.int("USAGE_RETENTION_DAILY_DAYS", default=1825)
#: Hours after an idle flag before staff may reclaim the job.
IDLE_GRACE_HOURS = env.float("IDLE_GRACE_HOURS", default=24.0)
#: Hours a snooze (allowed once per flag, with a justification) holds off reclaim.
IDLE_SNOOZE_HOURS = env.float("IDLE_SNOOZE_HOURS", default=72.0)
#: Sender of idle-GPU emails.
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="gpu-portal@localhost")
#: Django's mailers (Django 6.1): SMTP at EMAIL_HOST:EMAIL_PORT in production, the
#: console in the demo (DEBUG); EMAIL_BACKEND overrides the backend class.
_EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend"
                         if not DEBUG else "django.core.mail.backends.console.EmailBackend")
MAILERS = {"default": {"BACKEND": _EMAIL_BACKEND, "OPTIONS": {
    "host": env.str("EMAIL_HOST", default="localhost"),
    "port": env.int("EMAIL_PORT", default=25),
} if _EMAIL_BACKEND.endswith("smtp.EmailBackend") else {}}}

# --- what-if before approval (portal/selectors/whatif.py) -------------------------
#: Days of submitted jobs the quota preview replays through the simulator.
WHATIF_DAYS = env.int("WHATIF_DAYS", default=7)
#: At most this many jobs (the most recent) are replayed.
WHATIF_MAX_JOBS = env.int("WHATIF_MAX_JOBS", default=2000)
#: Run time (s) of a job with neither a measured run time nor max_runtime_seconds.
WHATIF_DEFAULT_DURATION_SECONDS = env.int("WHATIF_DEFAULT_DURATION_SECONDS", default=3600)
#: Seconds a what-if result is cached (key: request, spec generation, newest job id).
WHATIF_CACHE_SECONDS = env.int("WHATIF_CACHE_SECONDS", default=600)

# --- logging ------------------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}
