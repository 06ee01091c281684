"""Settings, read from the environment (and an optional .env file at the project root).

Every value is read one way: `env`, django-environ's typed accessors, with the default beside
the name. Reading them has no side effects: the directories they name are made when the apps
are ready (controlplane.apps). Checks of values and the long fixed groups live in
controlplane/settings_parts/, so that this file stays the list of what can be set.
"""

import datetime as dt
import os
from pathlib import Path

import environ

from controlplane.settings_parts import api as api_settings
from controlplane.settings_parts import csp, log_config, sign_in
from controlplane.settings_parts.audit_streams import audit_streams
from controlplane.settings_parts.beat import beat_schedule
from controlplane.settings_parts.caches import caches_config
from controlplane.settings_parts.database import database_config
from controlplane.settings_parts.demo_keys import derived_fernet_key, derived_signing_seed
from controlplane.settings_parts.templates import templates_config
from controlplane.settings_parts.validation import (
    allowed_networks,
    refuse_demo_defaults,
    require_lease_outlasts_commands,
)

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# Variables already in the environment win over the file's.
env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
# PRODUCTION=true (the compose file's production profile) refuses to start on demo defaults.
PRODUCTION = env.bool("PRODUCTION", default=False)
if PRODUCTION:
    refuse_demo_defaults(env, debug=DEBUG)
# A development default only; production sets SECRET_KEY (see `manage.py check --deploy`).
SECRET_KEY = (
    env.str("SECRET_KEY", default="") or "dev-only-insecure-secret-key-change-me-0123456789abcdef"
)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# Behind TLS (SECURE_HTTPS=true): cookies only over HTTPS, HTTP redirected, HSTS. A proxy that
# terminates TLS must send X-Forwarded-Proto; say so with SECURE_PROXY_SSL_HEADER=true.
SECURE_HTTPS = env.bool("SECURE_HTTPS", default=False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = SECURE_HTTPS
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31_536_000 if SECURE_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = SECURE_HTTPS
if env.bool("SECURE_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]  # Prometheus often scrapes over the internal network

# Key for SSH private keys at rest (Fernet, 32 url-safe base64 bytes). Without it, a key derived
# from SECRET_KEY is used so the demo works; production sets both independently.
FIELD_ENCRYPTION_KEY = env.str("FIELD_ENCRYPTION_KEY", default="") or derived_fernet_key(SECRET_KEY)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "django_celery_beat",
    "axes",
    "controlplane",
    "rest_framework",
    "drf_spectacular",
    "controlplane.accounts",
    "controlplane.audit",
    "controlplane.api",
    "controlplane.notifications",
    "controlplane.monitoring",
    "hosts",
    "deployments",
    *api_settings.API_DOCS_APPS,  # Swagger UI's files, when drf-spectacular-sidecar is there
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",  # outermost but one: every answer gets the policy
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "controlplane.views.HtmxSignInRedirectMiddleware",
    "controlplane.audit.middleware.AuditRequestMiddleware",
    # An identity provider's user: their groups asked again before a request that acts.
    "controlplane.accounts.middleware.IdentityRecheckMiddleware",
    "controlplane.views.RefusalMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Sign-in throttling (django-axes): after AXES_FAILURE_LIMIT failed sign-ins for one user name
# from one address, that pair waits AXES_COOLOFF_MINUTES. Failed sign-ins are audited as well.
# Passwords as LOCAL_LOGIN allows; the identity provider's users (controlplane.accounts.oidc).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "controlplane.accounts.backends.LocalPasswordBackend",
    "controlplane.accounts.backends.IdentityBackend",
]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = dt.timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
AXES_DISABLE_ACCESS_LOG, AXES_VERBOSE = True, False  # sign-ins are in the audit log already

# --- signing in: the team's identity provider (OpenID Connect), and local accounts ------------
# on: anyone with a local password; admins: superusers only (the break-glass administrator);
# off: no password sign-in at all (needs OIDC_ISSUER).
LOCAL_LOGIN = env.str("LOCAL_LOGIN", default="on").strip().lower()
# Unset: no identity provider. Its endpoints come from discovery unless all four are set.
OIDC_ISSUER = env.str("OIDC_ISSUER", default="").strip().rstrip("/")
OIDC_CLIENT_ID = env.str("OIDC_CLIENT_ID", default="").strip()
OIDC_CLIENT_SECRET = env.str("OIDC_CLIENT_SECRET", default="")  # never rendered nor logged
OIDC_ENDPOINTS = {k: env.str(n, default="").strip() for k, n in sign_in.ENDPOINT_SETTINGS.items()}
OIDC_SCOPES = sign_in.scopes_parse(env.str("OIDC_SCOPES", default="openid profile email"))
OIDC_GROUPS_CLAIM = env.str("OIDC_GROUPS_CLAIM", default="groups").strip()
OIDC_PROVIDER_NAME = env.str("OIDC_PROVIDER_NAME", default="single sign-on").strip()
# Reads ask the provider for the user's groups at most this often; a request that acts always.
OIDC_GROUPS_RECHECK_SECONDS = env.int("OIDC_GROUPS_RECHECK_SECONDS", default=300)
# An API token of a provider's user stops working once its groups were last confirmed longer ago.
OIDC_API_TOKEN_GROUPS_MAX_AGE_SECONDS = env.int(
    "OIDC_API_TOKEN_GROUPS_MAX_AGE_SECONDS", default=8 * 3600
)
OIDC_TIMEOUT_SECONDS = env.float("OIDC_TIMEOUT_SECONDS", default=5.0)
sign_in.check_sign_in(
    local_login=LOCAL_LOGIN,
    issuer=OIDC_ISSUER,
    client_id=OIDC_CLIENT_ID,
    client_secret=OIDC_CLIENT_SECRET,
    endpoints=OIDC_ENDPOINTS,
    scopes=OIDC_SCOPES,
    groups_claim=OIDC_GROUPS_CLAIM,
    recheck_seconds=OIDC_GROUPS_RECHECK_SECONDS,
    token_groups_max_age_seconds=OIDC_API_TOKEN_GROUPS_MAX_AGE_SECONDS,
    timeout_seconds=OIDC_TIMEOUT_SECONDS,
)


ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"

# Fixed: the project's templates/ folder, each app's, and the context processors.
TEMPLATES = templates_config(BASE_DIR)

DATABASES = {
    "default": database_config(
        env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        base_dir=BASE_DIR,
        pid=os.getpid(),
        conn_max_age=env.int("DB_CONN_MAX_AGE", default=300),  # seconds; 0: one per request
    ),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "hosts:dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# Made at start-up if missing (controlplane.apps), so that WhiteNoise does not warn about it.
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(BASE_DIR / ".run" / "static")))
STATICFILES_DIRS = [BASE_DIR / "controlplane" / "static"]
# Serve straight from the source folders when collectstatic has not run (the demo, tests).
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_HTTPONLY = True
# A sign-in lasts SESSION_HOURS from the moment it was made, however busy the tab (htmx polls
# would otherwise keep an idle session alive for ever), and ends when the browser closes.
SESSION_COOKIE_AGE = int(env.float("SESSION_HOURS", default=8) * 3600)
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_HTTPONLY = False  # htmx reads no cookie: the token is sent via hx-headers on <body>
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp): enforced, fixed, in controlplane/settings_parts/csp.py
CONTENT_SECURITY_POLICY = csp.CONTENT_SECURITY_POLICY

# --- the rules -------------------------------------------------------------------------------
SNAPSHOT_MAX_AGE_SECONDS = env.int("SNAPSHOT_MAX_AGE_SECONDS", default=300)
APPROVAL_TTL_SECONDS = env.int("APPROVAL_TTL_SECONDS", default=1800)

# --- caches (settings_parts/caches.py): rendered fragments of the fleet and host pages, bounded
CACHES = caches_config(fragment_entries=env.int("FRAGMENT_CACHE_ENTRIES", default=10_000))

# --- SSH ------------------------------------------------------------------------------------
SSH_CONNECT_TIMEOUT = env.float("SSH_CONNECT_TIMEOUT", default=10.0)
SSH_COMMAND_TIMEOUT = env.float("SSH_COMMAND_TIMEOUT", default=30.0)
PROBE_CONCURRENCY = env.int("PROBE_CONCURRENCY", default=200)

# --- Celery -----------------------------------------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_BROKER_TRANSPORT_OPTIONS = env.json("CELERY_BROKER_TRANSPORT_OPTIONS", default={})
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = TIME_ZONE
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# How often beat looks for hosts whose probe interval elapses before its next look. Each host
# is probed at most its interval after the last probe (and at most this much earlier).
PROBE_SWEEP_SECONDS = env.int("PROBE_SWEEP_SECONDS", default=5)
# A sweep hands its hosts out as tasks of at most this many, each to the worker process that
# probed them last (hosts.services.probe_routing), so each keeps its SSH connections warm.
PROBE_BATCH_SIZE = env.int("PROBE_BATCH_SIZE", default=250)
# A sweep claims at most twice what falls due per sweep (a whole fleet due at once is spread
# over half an interval), and never fewer than MIN or more than MAX hosts.
PROBE_SWEEP_MIN_HOSTS = env.int("PROBE_SWEEP_MIN_HOSTS", default=500)
PROBE_SWEEP_MAX_HOSTS = env.int("PROBE_SWEEP_MAX_HOSTS", default=100_000)
# Whether this worker takes scheduled probe batches on a queue of its own (false: a worker
# kept for change jobs and webhooks), and how long one may stay silent before it is left out.
PROBE_WORKER = env.bool("PROBE_WORKER", default=True)
PROBE_WORKER_TTL_SECONDS = env.int("PROBE_WORKER_TTL_SECONDS", default=30)
# A connection to a host this process has not probed for this long is closed.
SSH_IDLE_SECONDS = env.float("SSH_IDLE_SECONDS", default=300.0)

# --- snapshot retention (hosts.services.retention) -------------------------------------------
# Every snapshot younger than SNAPSHOT_KEEP_ALL_SECONDS is kept; then one per host per
# SNAPSHOT_DENSE_EVERY_SECONDS until SNAPSHOT_KEEP_DENSE_SECONDS; then one per host per
# SNAPSHOT_SPARSE_EVERY_SECONDS for ever. A snapshot that a change request, an approval, a
# host's health or an audit event names is never removed.
SNAPSHOT_KEEP_ALL_SECONDS = env.int("SNAPSHOT_KEEP_ALL_SECONDS", default=86400)
SNAPSHOT_DENSE_EVERY_SECONDS = env.int("SNAPSHOT_DENSE_EVERY_SECONDS", default=600)
SNAPSHOT_KEEP_DENSE_SECONDS = env.int("SNAPSHOT_KEEP_DENSE_SECONDS", default=30 * 86400)
SNAPSHOT_SPARSE_EVERY_SECONDS = env.int("SNAPSHOT_SPARSE_EVERY_SECONDS", default=3600)
SNAPSHOT_RETENTION_SWEEP_SECONDS = env.int("SNAPSHOT_RETENTION_SWEEP_SECONDS", default=600)
# Sections are compressed with a dictionary trained on the fleet's own, again this often.
SECTION_DICTIONARY_EVERY_SECONDS = env.int("SECTION_DICTIONARY_EVERY_SECONDS", default=7 * 86400)

# Whatever is logged passes controlplane.redaction first (settings_parts/log_config.py).
LOGGING = log_config.logging_config(level=env.str("LOG_LEVEL", default="INFO"))

# --- audit anchoring ----------------------------------------------------------------------------
# Checkpoints (sequence number, head hash, time) are signed with an Ed25519 key and appended to a
# sink outside the database, so cutting off the newest events or recomputing the chain shows.
AUDIT_CHECKPOINT_DIR = Path(
    env.str("AUDIT_CHECKPOINT_DIR", default=str(BASE_DIR / ".run" / "audit-checkpoints"))
)
# base64 of the 32-byte Ed25519 private seed; without it, one derived from SECRET_KEY (demo only).
AUDIT_SIGNING_KEY = env.str("AUDIT_SIGNING_KEY", default="") or derived_signing_seed(SECRET_KEY)
# Extra base64 Ed25519 public keys whose checkpoints verify (after rotating the signing key).
AUDIT_TRUSTED_PUBLIC_KEYS = env.list("AUDIT_TRUSTED_PUBLIC_KEYS", default=[])
AUDIT_CHECKPOINT_SECONDS = env.int("AUDIT_CHECKPOINT_SECONDS", default=300)
AUDIT_VERIFY_SECONDS = env.int("AUDIT_VERIFY_SECONDS", default=900)

# --- the audit trail to a SIEM (controlplane/audit/streaming/README.md) ---------------------------
# Destinations as a JSON list (syslog over TCP with TLS, a JSON Lines file, an HTTP collector);
# none by default. Each is sent from a cursor in the database, at least once, in order.
AUDIT_STREAMS = audit_streams(env.str("AUDIT_STREAMS", default=""))
# Beat's sweep sends whatever a kick after an append did not (a broker that was down, a
# receiver that was); a destination that failed waits 5 s, then twice as long each time, up to
# AUDIT_STREAM_RETRY_MAX_SECONDS.
AUDIT_STREAM_SWEEP_SECONDS = env.int("AUDIT_STREAM_SWEEP_SECONDS", default=30)
AUDIT_STREAM_RETRY_MAX_SECONDS = env.int("AUDIT_STREAM_RETRY_MAX_SECONDS", default=300)
# The Celery queue the stream's tasks go to ("" is the default queue), as WEBHOOK_QUEUE.
AUDIT_STREAM_QUEUE = env.str("AUDIT_STREAM_QUEUE", default="")

# --- change jobs --------------------------------------------------------------------------------
# Kinds that always need a second person's approval. Any change of what serves or how it is
# exposed needs it too, whatever its kind, and an engine repair always does, even if this list
# leaves it out (deployments/policy.py).
APPROVAL_REQUIRED_KINDS = env.list(
    "APPROVAL_REQUIRED_KINDS", default=["model_swap", "engine_repair"]
)
# Engine flags an administrator has declared harmless: a redeploy that changes only these goes
# without approval. Flags that change what serves or who can reach it cannot be listed here
# (`manage.py check` says which); see deployments/engine_flags.py.
HARMLESS_ENGINE_FLAGS = env.list(
    "HARMLESS_ENGINE_FLAGS",
    default=[
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--enable-prefix-caching",
        "--enable-chunked-prefill",
        "--disable-log-stats",
        "--enforce-eager",
    ],
)
# Memory kept free per GPU for the KV cache when checking whether a model fits.
KV_CACHE_RESERVE_GIB = env.float("KV_CACHE_RESERVE_GIB", default=4.0)
# The longest a single command of a change job may run (a smoke completion, one benchmark
# level); each command is cut off after this.
JOB_COMMAND_TIMEOUT_SECONDS = env.int("JOB_COMMAND_TIMEOUT_SECONDS", default=60)
# A job holds a lease on its host and renews it every JOB_LEASE_SECONDS / 4 while it lives, also
# while a command runs (a heartbeat); recovery declares a job interrupted only once its lease
# has lapsed. The lease must outlast the longest command, so that even a heartbeat that
# stalled behind a command cannot let a second job onto the host while the first one's command
# still runs there.
JOB_LEASE_SECONDS = env.int("JOB_LEASE_SECONDS", default=90)
JOB_LEASE_MARGIN_SECONDS = 15
require_lease_outlasts_commands(
    JOB_LEASE_SECONDS,
    job_command=JOB_COMMAND_TIMEOUT_SECONDS,
    ssh_command=SSH_COMMAND_TIMEOUT,
    margin=JOB_LEASE_MARGIN_SECONDS,
)
JOB_RECOVERY_SWEEP_SECONDS = env.int("JOB_RECOVERY_SWEEP_SECONDS", default=30)
# The same sweep sends a job again that is still queued this long after it was queued: a
# restarted broker without persistence loses the messages it held (only one worker can claim a
# job, so a spare message is harmless).
JOB_REQUEUE_AFTER_SECONDS = env.int("JOB_REQUEUE_AFTER_SECONDS", default=60)
HEALTH_POLL_SECONDS = env.float("HEALTH_POLL_SECONDS", default=2.0)
# Rollouts (deployments.rollouts): beat has a worker look at every active rollout this often (a
# rollout also moves at once when one of its changes ends); a worker taking a host's turn holds
# it with a claim renewed while it probes, which another takes over once it is this old.
ROLLOUT_SWEEP_SECONDS = env.int("ROLLOUT_SWEEP_SECONDS", default=15)
ROLLOUT_CLAIM_SECONDS = env.int("ROLLOUT_CLAIM_SECONDS", default=60)

# --- JSON API -----------------------------------------------------------------------------------
# Long, and nothing in them is set from the environment: controlplane/settings_parts/api.py.
REST_FRAMEWORK = api_settings.REST_FRAMEWORK
SPECTACULAR_SETTINGS = api_settings.SPECTACULAR_SETTINGS

# --- metrics and notifications ------------------------------------------------------------------
# Prometheus scrapes /metrics with `Authorization: Bearer <METRICS_TOKEN>`. Unset, only people
# signed in with a role can read it.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# controlplane_probe_outcomes counts snapshots taken within this trailing window.
METRICS_PROBE_WINDOW_SECONDS = env.int("METRICS_PROBE_WINDOW_SECONDS", default=3600)
# A change stays in controlplane_change_event_timestamp_seconds (the dashboard's annotations)
# this long after its last event, and at most this many changes are exposed: Prometheus needs to
# scrape each event once within the window to keep it.
METRICS_CHANGE_WINDOW_SECONDS = env.int("METRICS_CHANGE_WINDOW_SECONDS", default=86400)
METRICS_CHANGE_EVENTS_MAX = env.int("METRICS_CHANGE_EVENTS_MAX", default=1000)
# Rollouts share that window in controlplane_rollout_event_timestamp_seconds; at most this many
# rollouts are exposed (those still going first), each with a few series per wave.
METRICS_ROLLOUT_EVENTS_MAX = env.int("METRICS_ROLLOUT_EVENTS_MAX", default=200)
# Outgoing webhooks: a delivery is tried once, then again after each of these delays (seconds),
# so the default makes 5 attempts over about 7 minutes.
WEBHOOK_RETRY_DELAYS = env.list("WEBHOOK_RETRY_DELAYS", cast=float, default=[10, 30, 90, 270])
WEBHOOK_TIMEOUT_SECONDS = env.float("WEBHOOK_TIMEOUT_SECONDS", default=5.0)
# Deliveries go to this Celery queue ("" is Celery's default queue): a dedicated queue keeps a
# slow receiver from holding up change jobs on the same workers.
WEBHOOK_QUEUE = env.str("WEBHOOK_QUEUE", default="")
# Beat re-enqueues deliveries still pending (or overdue for a retry) after this long, in case the
# broker was down when they were created or their message was lost with a worker.
WEBHOOK_REQUEUE_AFTER_SECONDS = env.int("WEBHOOK_REQUEUE_AFTER_SECONDS", default=60)
# Webhooks may not reach the control plane's own network (loopback, private, link-local, ...
# addresses and its own names: controlplane/notifications/destinations.py) except the networks
# listed here as CIDRs, e.g. 10.20.0.0/16,127.0.0.1/32. Empty by default.
WEBHOOK_ALLOWED_NETWORKS = allowed_networks(env.list("WEBHOOK_ALLOWED_NETWORKS", default=[]))
# Prefix for links in notifications, e.g. https://controlplane.example.com; paths when unset.
CONTROLPLANE_BASE_URL = env.str("CONTROLPLANE_BASE_URL", default="")

# --- what beat runs, every so many seconds (each interval is set above) -------------------------
# Entry names are kept as they are: django-celery-beat stores its schedule under them.
CELERY_BEAT_SCHEDULE = beat_schedule(
    {
        "probe-due-hosts": ("hosts.tasks.probe_due_hosts", PROBE_SWEEP_SECONDS),
        "snapshot-retention": ("hosts.tasks.thin_snapshots", SNAPSHOT_RETENTION_SWEEP_SECONDS),
        "section-dictionary": ("hosts.tasks.train_section_dictionary", 3600),
        "audit-checkpoint": ("controlplane.audit.tasks.write_checkpoint", AUDIT_CHECKPOINT_SECONDS),
        "audit-verify": ("controlplane.audit.tasks.verify_chain", AUDIT_VERIFY_SECONDS),
        "audit-stream": ("controlplane.audit.tasks.stream_sweep", AUDIT_STREAM_SWEEP_SECONDS),
        "recover-interrupted-jobs": (
            "deployments.tasks.recover_interrupted_jobs",
            JOB_RECOVERY_SWEEP_SECONDS,
        ),
        "end-maintenance": ("hosts.tasks.end_maintenance", 60),
        "rollouts-sweep": ("deployments.tasks.rollouts_sweep", ROLLOUT_SWEEP_SECONDS),
        "webhook-requeue": (
            "controlplane.notifications.tasks.requeue_deliveries",
            WEBHOOK_REQUEUE_AFTER_SECONDS,
        ),
    }
)
