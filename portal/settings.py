"""Settings for the GPU quota portal, all read from the environment.

One env reader (django-environ) reads every variable; ``.env.example`` lists them.
Defaults give the embedded setup of ``make demo``: a SQLite file under ``var/``,
a Redis broker when ``REDIS_URL`` is set or else Kombu's filesystem transport
(no server needed), DEBUG on. Production sets ``DEBUG=false`` and gets the
secure defaults that ``manage.py check --deploy`` asks for.
"""

from datetime import timedelta
from pathlib import Path

import environ
import plotly
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
#: The env file read first (variables already set win); ``PORTAL_ENV_FILE`` names another.
ENV_FILE = Path(environ.Env().str("PORTAL_ENV_FILE", default=str(BASE_DIR / ".env")))
env.read_env(ENV_FILE, overwrite=False)
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
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI assets served locally at /api/docs/
    "django_filters",
    "axes",
    "portal",
]

MIDDLEWARE = [
    # First: every later line logged for the request carries its id (portal/logs.py).
    "portal.logs.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "portal.middleware.PermissionsPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last, as django-axes asks: turns a locked-out login into the lockout page
    "axes.middleware.AxesMiddleware",
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
#: django-axes first: it refuses a locked-out login before the password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
#: Failed logins (django-axes, stored in the database): after LOGIN_FAILURE_LIMIT failures
#: of one username from one IP address, that pair is locked out for
#: LOGIN_LOCKOUT_MINUTES; the login page answers 429 and says for how long. A success
#: resets the count. LOGIN_LOCKOUT_PARAMETERS: comma-separated alternatives, each
#: "username", "ip_address" or a combination joined by "+" (default
#: "username+ip_address"; "username" alone also stops a spread-out attack on one
#: account, at the price of letting anyone lock that account). AXES_IPWARE_PROXY_COUNT:
#: proxies in front of the portal, so the client's IP is read from X-Forwarded-For.
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [
    part.split("+") if "+" in part else part
    for part in env.list("LOGIN_LOCKOUT_PARAMETERS", default=["username+ip_address"])
]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
AXES_IPWARE_PROXY_COUNT = env.int("AXES_IPWARE_PROXY_COUNT", default=None) or None
AXES_VERBOSE = False
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
# Probes and Prometheus scrapes talk plain HTTP to the pod (TLS ends at the ingress).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not DEBUG)
#: HSTS preload is opt-in: once browsers ship the domain in their preload list, undoing
#: it takes months. Set SECURE_HSTS_PRELOAD=true only for a domain (and every
#: subdomain) that is HTTPS-only for good.
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# check --deploy warns while preload is off (security.W021): off is the deliberate default.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
#: Content-Security-Policy (Django's own middleware): scripts, styles, images, fonts
#: and XHR only from the portal itself; no inline scripts (the pages' JS is in
#: static/js), no framing, forms post only to the portal. Styles allow 'unsafe-inline'
#: because plotly.js sets style attributes on the SVG it draws.
#: CSP_REPORT_ONLY=true sends the same policy as Content-Security-Policy-Report-Only.
_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
if env.bool("CSP_REPORT_ONLY", default=False):
    SECURE_CSP, SECURE_CSP_REPORT_ONLY = {}, _CSP
else:
    SECURE_CSP, SECURE_CSP_REPORT_ONLY = _CSP, {}
#: Permissions-Policy (portal.middleware): the portal uses no browser feature below.
PERMISSIONS_POLICY = env.str(
    "PERMISSIONS_POLICY",
    default="accelerometer=(), camera=(), geolocation=(), gyroscope=(), magnetometer=(), "
            "microphone=(), payment=(), usb=(), browsing-topics=()",
)

# --- REST API ---------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # knox's hashed tokens behind the anonymous-IP throttle (portal/api/auth.py)
        "portal.api.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    # Every list is paged; the body stays an array, the total and links are headers.
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.HeaderPageNumberPagination",
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "portal.api.errors.ContentNegotiation",
    "DEFAULT_THROTTLE_CLASSES": [
        "portal.api.throttles.UserRateThrottle",
        "portal.api.throttles.AnonRateThrottle",
    ],
    "NUM_PROXIES": env.int("API_NUM_PROXIES", default=None),
}
#: API tokens (django-rest-knox, model portal.ApiToken): stored hashed, sent as
#: "Authorization: Token <secret>". A new token expires after API_TOKEN_DEFAULT_DAYS
#: unless its maker picks another lifetime, at most API_TOKEN_MAX_DAYS (0 = no cap,
#: and then "never expires" may be chosen).
API_TOKEN_DEFAULT_DAYS = env.int("API_TOKEN_DEFAULT_DAYS", default=90)
API_TOKEN_MAX_DAYS = env.int("API_TOKEN_MAX_DAYS", default=365)
KNOX_TOKEN_MODEL = "portal.ApiToken"  # noqa: S105 - a model name
#: knox's own migrations create its (swapped-out) AuthToken table all the same, with a
#: foreign key to users that nothing cleans; the portal's table is portal.ApiToken.
MIGRATION_MODULES = {"knox": None}
REST_KNOX = {
    "TOKEN_MODEL": KNOX_TOKEN_MODEL,
    "TOKEN_TTL": timedelta(days=API_TOKEN_DEFAULT_DAYS),
    "AUTH_HEADER_PREFIX": "Token",
    "AUTO_REFRESH": False,
}
#: Requests per user (signed in) and per anonymous client IP (portal/api/throttles.py),
#: as DRF rates: N/second, N/minute, N/hour or N/day; empty = unthrottled.
API_THROTTLE_RATES = {
    "user": env.str("API_THROTTLE_USER", default="1200/minute") or None,
    "anon": env.str("API_THROTTLE_ANON", default="60/minute") or None,
}
#: The API throttles' counts: shared by every web process through Redis when REDIS_URL
#: is set (keys prefixed "throttle:"; never cleared by the portal), else per process.
_THROTTLE_REDIS = env.str("REDIS_URL", default="")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                 "LOCATION": _THROTTLE_REDIS, "KEY_PREFIX": "throttle"}
    if _THROTTLE_REDIS else
    {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"},
}
#: Rows per page of the API's lists (``?page_size=`` up to the maximum) and of the pages.
API_PAGE_SIZE = env.int("API_PAGE_SIZE", default=100)
API_MAX_PAGE_SIZE = env.int("API_MAX_PAGE_SIZE", default=1000)
PAGE_LIST_SIZE = env.int("PAGE_LIST_SIZE", default=50)
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU quota portal API",
    "DESCRIPTION": "Self-service GPU quota, gang jobs, fairness and utilization.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # /api/schema/ answers signed-in users only (session or token), like the API.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # every operation may answer 429 (the throttles): portal/api/schema.py
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "portal.api.schema.add_throttled_responses"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
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
    # then idle-GPU detection over the stored samples. Collecting more often than the
    # bucket (the demo: 20 s) refreshes the current bucket's rows (replaced whole).
    "usage-collect": {"task": "portal.usage_collect",
                      "schedule": env.float("USAGE_COLLECT_INTERVAL_SECONDS", default=300.0)},
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
#: Pod Security admission labels on team namespaces: pods in them must meet
#: POD_SECURITY_LEVEL (enforce; default baseline: no privileged pods, host namespaces or
#: host paths) and are warned about and audited against POD_SECURITY_WARN_LEVEL
#: (default restricted). Levels: privileged, baseline, restricted; empty = no label.
POD_SECURITY_LEVEL = env.str("POD_SECURITY_LEVEL", default="baseline")
POD_SECURITY_WARN_LEVEL = env.str("POD_SECURITY_WARN_LEVEL", default="restricted")
for _level in (POD_SECURITY_LEVEL, POD_SECURITY_WARN_LEVEL):
    if _level not in ("", "privileged", "baseline", "restricted"):
        raise environ.ImproperlyConfigured(
            f"POD_SECURITY_LEVEL and POD_SECURITY_WARN_LEVEL must be privileged, baseline, "
            f"restricted or empty; got {_level!r}")
POD_SECURITY_LABELS = tuple(
    (mode, level) for mode, level in (("enforce", POD_SECURITY_LEVEL),
                                      ("warn", POD_SECURITY_WARN_LEVEL),
                                      ("audit", POD_SECURITY_WARN_LEVEL)) if level)
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
#: console in the demo (DEBUG); EMAIL_BACKEND overrides the backend class (empty = default).
_EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="") or (
    "django.core.mail.backends.smtp.EmailBackend" if not DEBUG
    else "django.core.mail.backends.console.EmailBackend")
MAILERS = {"default": {"BACKEND": _EMAIL_BACKEND, "OPTIONS": {
    "host": env.str("EMAIL_HOST", default="localhost"),
    "port": env.int("EMAIL_PORT", default=25),
} if _EMAIL_BACKEND.endswith("smtp.EmailBackend") else {}}}

# --- job images (portal/services/images.py) -------------------------------------------
#: Registries a job's image may come from (host or host:port, comma-separated; empty =
#: any registry but loopback and link-local ones, which IMAGE_ALLOW_LOCAL_REGISTRIES allows).
IMAGE_REGISTRIES = env.list("IMAGE_REGISTRIES", default=[])
IMAGE_ALLOW_LOCAL_REGISTRIES = env.bool("IMAGE_ALLOW_LOCAL_REGISTRIES", default=False)

# --- what-if before approval (portal/selectors/whatif.py) -------------------------
#: Days of submitted jobs the quota preview replays through the simulator.
WHATIF_DAYS = env.int("WHATIF_DAYS", default=7)
#: At most this many jobs (the most recent) are replayed.
WHATIF_MAX_JOBS = env.int("WHATIF_MAX_JOBS", default=2000)
#: Run time (s) of a job with neither a measured run time nor max_runtime_seconds.
WHATIF_DEFAULT_DURATION_SECONDS = env.int("WHATIF_DEFAULT_DURATION_SECONDS", default=3600)
#: Seconds a what-if result is cached (key: request, spec generation, newest job id).
WHATIF_CACHE_SECONDS = env.int("WHATIF_CACHE_SECONDS", default=600)

# --- the portal's own metrics (GET /metrics, portal/metrics/) -------------------------
#: Bearer token Prometheus presents on /metrics; empty: staff sessions only.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
#: Redis where workers count task outcomes and reconcile runs; empty: not counted.
METRICS_REDIS_URL = env.str("METRICS_REDIS_URL", default=REDIS_URL)
METRICS_KEY_PREFIX = env.str("METRICS_KEY_PREFIX", default="gpuq:metrics")

# --- logging ------------------------------------------------------------------------
#: plain (one text line) or json (one JSON object a line with the request id, and in
#: workers the task id and cluster: portal/logs.py).
LOG_FORMAT = env.str("LOG_FORMAT", default="plain")
if LOG_FORMAT not in ("plain", "json"):
    raise environ.ImproperlyConfigured(f"LOG_FORMAT must be 'plain' or 'json', got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "portal.logs.ContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "portal.logs.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT,
                             "filters": ["context"]}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}
