"""Django settings for the PDD control plane.

Every value an operator may change comes from the environment through ``controlplane.env``;
the defaults run on one machine with nothing installed but Python: SQLite, the in-memory
channel layer, and Celery tasks executed in-process. ``DATABASE_URL`` switches to PostgreSQL
and ``REDIS_URL`` switches the Celery broker, its result backend and the channel layer to Redis.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import django_stubs_ext
import plotly
from dotenv import load_dotenv

from controlplane import env

# Lets annotations like ModelAdmin[Site] and QuerySet[Site] work at run time.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
# A `.env` file in the project root (or the file PDD_ENV_FILE names) sets the variables the
# environment does not already set; the environment wins.
load_dotenv(os.environ.get("PDD_ENV_FILE") or BASE_DIR / ".env", override=False)
DATA_DIR = Path(env.env_str("PDD_DATA_DIR", str(BASE_DIR / "var")))

DEBUG = env.env_bool("PDD_DEBUG", False)
# Without PDD_SECRET_KEY a random key is kept in DATA_DIR so sessions survive restarts.
SECRET_KEY = env.env_str("PDD_SECRET_KEY", "") or env.secret_key_file(DATA_DIR / "secret_key")
ALLOWED_HOSTS = env.env_list("PDD_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.env_list("PDD_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "channels",
    "controlplane.core",
    "controlplane.accounts",
    "controlplane.inventory",
    "controlplane.tenancy",
    "controlplane.agents",
    "controlplane.telemetry",
    "controlplane.billing",
    "controlplane.planning",
    "frontend",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "controlplane.core.limits.BodySizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it answers a locked-out login with 429.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
ASGI_APPLICATION = "controlplane.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "frontend.context.scope",
            ],
        },
    },
]

DATABASES = {"default": env.database_from_url("DATABASE_URL", DATA_DIR / "pdd.sqlite3")}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not memory, so the browser and system tests' server processes see the test data;
    # one per test process, so concurrent test runs do not share (and delete) each other's.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test-pdd-{os.getpid()}.sqlite3")}
    # Concurrent ingestion (daphne runs sync views in threads) must queue for SQLite's single
    # writer instead of failing "database is locked": take the write lock at BEGIN, wait for it.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS = env.redis_from_url("REDIS_URL")
if REDIS is None:
    CHANNEL_LAYERS: dict[str, Any] = {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = "cache+memory://"
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py's default 5 s read timeout equals channels_redis's 5 s blocking pop, so an
            # idle WebSocket's receive timed out and the socket closed with 1011; read longer.
            "CONFIG": {
                "hosts": [{"address": REDIS.url, "socket_timeout": 30}],
                "prefix": env.env_str("PDD_CHANNEL_PREFIX", "pdd"),
            },
        }
    }
    CELERY_BROKER_URL = REDIS.url
    CELERY_RESULT_BACKEND = REDIS.url
CELERY_TASK_ALWAYS_EAGER = env.env_bool("PDD_CELERY_EAGER", REDIS is None)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes): after PDD_LOGIN_FAILURE_LIMIT failed logins of one username
# from one address, that pair is locked out for PDD_LOGIN_COOLOFF_MINUTES (429).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.env_int("PDD_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env.env_int("PDD_LOGIN_COOLOFF_MINUTES", 15, minimum=1) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every request without it
# Static files are served by the app itself (WhiteNoise), from the apps' static folders, with
# no collectstatic step needed for the embedded defaults.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
# Plotly.js from the installed plotly package (no CDN): {% static 'plotly/plotly.min.js' %}.
STATICFILES_DIRS = [("plotly", str(Path(plotly.__file__).resolve().parent / "package_data"))]

# Telemetry (docs/monitoring.md): how long records and live rollups are kept, how often one
# live group may be pushed to, the HMAC secret of alert webhooks, and an optional token that
# may read /metrics besides operator and viewer API tokens.
TELEMETRY_RETENTION_HOURS = env.env_int("PDD_TELEMETRY_RETENTION_HOURS", 48, minimum=1)
TELEMETRY_LIVE_MIN_INTERVAL_S = env.env_int("PDD_LIVE_MIN_INTERVAL_MS", 500, minimum=0) / 1000
# How often an open page's socket re-reads the deployment's state (open alerts, agents, plan, SLA
# panel) from the database: what other processes change reaches it on every channel layer.
TELEMETRY_LIVE_STATE_INTERVAL_S = (
    env.env_int("PDD_LIVE_STATE_INTERVAL_MS", 2000, minimum=100) / 1000
)
TELEMETRY_WEBHOOK_SECRET = env.env_str("PDD_ALERT_WEBHOOK_SECRET", "") or SECRET_KEY
TELEMETRY_METRICS_TOKEN = env.env_str("PDD_METRICS_TOKEN", "")
# Bounds on reported records (controlplane/telemetry/bounds.py): how far ahead of this clock a
# finish time may be (also how far a record's arrival may be from its key's issue or
# withdrawal), and how old a record may be.
TELEMETRY_CLOCK_SKEW_S = env.env_int("PDD_TELEMETRY_CLOCK_SKEW_S", 300, minimum=0)
TELEMETRY_MAX_RECORD_AGE_DAYS = env.env_int("PDD_TELEMETRY_MAX_RECORD_AGE_DAYS", 3650, minimum=1)

# Agents (controlplane/agents): heartbeat period they are told, and how old their last heartbeat
# may be before they show as stale, then dead (three and twelve missed beats by default).
AGENT_HEARTBEAT_INTERVAL_S = env.env_int("PDD_AGENT_HEARTBEAT_INTERVAL_S", 5, minimum=1)
AGENT_STALE_AFTER_S = env.env_int("PDD_AGENT_STALE_AFTER_S", 15, minimum=1)
AGENT_DEAD_AFTER_S = env.env_int("PDD_AGENT_DEAD_AFTER_S", 60, minimum=1)
# How long a site's reconciler lets a surplus instance drain (finish in-flight requests) before
# it stops it anyway; sent with each site's desired state (controlplane/agents/desired.py).
AGENT_DRAIN_TIMEOUT_S = env.env_int("PDD_AGENT_DRAIN_TIMEOUT_S", 30, minimum=0)

# Request size (controlplane/core/limits.py): the largest workload trace an operator may upload,
# and the largest request body of any kind (413 above it, before the body is read).
WORKLOAD_MAX_BYTES = env.env_int("PDD_WORKLOAD_MAX_BYTES", 20 * 1024 * 1024, minimum=1)
MAX_BODY_BYTES = env.env_int("PDD_MAX_BODY_BYTES", WORKLOAD_MAX_BYTES + 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_BODY_BYTES

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "controlplane.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["controlplane.accounts.permissions.ScopePermission"],
    "DEFAULT_FILTER_BACKENDS": [
        "controlplane.core.filters.StrictFilterBackend",
        "rest_framework.filters.OrderingFilter",
        "rest_framework.filters.SearchFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "controlplane.core.pagination.PageNumberPagination",
    "PAGE_SIZE": env.env_int("PDD_API_PAGE_SIZE", 50, minimum=1),
    "DEFAULT_SCHEMA_CLASS": "controlplane.core.schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "controlplane.core.errors.api_exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["controlplane.core.parsers.JSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "PDD token factory control plane",
    "DESCRIPTION": (
        "Inventory, plans, agents, telemetry and billing of a cross-datacenter PDD "
        "(Prefill / Relay-Decode / Main-Decode) LLM token factory. Authenticate with "
        "`Authorization: Bearer <token>`; tokens carry a scope (operator, viewer, billing, agent)."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Error answers, write shapes and text rules, in one place: controlplane/core/schema.py.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "controlplane.core.schema.text_without_nul",
    ],
    # Swagger UI and ReDoc from the installed drf-spectacular-sidecar: the docs work offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Two fields are called "role" with different choices: pool roles (P/RLD/MD) and agent roles.
    "ENUM_NAME_OVERRIDES": {
        "PoolRoleEnum": "controlplane.inventory.models.Role",
        "AgentRoleEnum": "controlplane.agents.models.AgentRole",
        "AgentRolloutStateEnum": "controlplane.agents.models.AgentState",
        "JobStatusEnum": "controlplane.planning.models.PlanStatus",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # A refusal (4xx) is one line, without the traceback Django attaches (core/logs.py).
    "filters": {"client_errors_one_line": {"()": "controlplane.core.logs.ClientErrorsOneLine"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["client_errors_one_line"]}
    },
    "root": {"handlers": ["console"], "level": env.env_str("PDD_LOG_LEVEL", "INFO")},
}

# HTTPS (every warning of ``manage.py check --deploy`` has its setting here): cookies only over
# HTTPS, redirect HTTP to HTTPS, HSTS, and trust X-Forwarded-Proto from a TLS-terminating proxy.
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SECURE = env.env_bool("PDD_SECURE_COOKIES", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE
SECURE_SSL_REDIRECT = env.env_bool("PDD_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env.env_int("PDD_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.env_bool("PDD_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env.env_bool("PDD_HSTS_PRELOAD", False)
if env.env_bool("PDD_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Prometheus scrapes /metrics over plain HTTP inside a cluster even when pages redirect.
SECURE_REDIRECT_EXEMPT = [r"^metrics$", r"^healthz$", r"^readyz$"]  # scrapers and probes
