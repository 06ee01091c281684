# Two commands for a newcomer: `make run` (the demo) and `make test` (the whole suite).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Tests use PostgreSQL when one answers on 127.0.0.1:5432 (CI has one), SQLite otherwise.
PG_URL := postgres://postgres@127.0.0.1:5432/controlplane

.PHONY: install run test lint typecheck pytest chromium compose-check clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: install
	$(BIN)/python manage.py demo

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests..."; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# No Docker engine runs here: Debian's docker-compose validates the file (schema, references).
compose-check:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  echo "Installing Debian's docker-compose to validate docker-compose.yml..."; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; }
	docker-compose -f docker-compose.yml config -q && echo "docker-compose.yml is valid"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy .

pytest: install chromium
	@if [ -z "$$DATABASE_URL" ] && (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then \
	  export DATABASE_URL=$(PG_URL); fi; \
	if [ "$$CI" = "true" ] && [ -z "$$DATABASE_URL" ]; then \
	  echo "CI needs PostgreSQL on 127.0.0.1:5432" >&2; exit 1; fi; \
	echo "database: $${DATABASE_URL:-sqlite}"; \
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck compose-check pytest

clean:
	rm -rf $(VENV) .run db.sqlite3 .mypy_cache .ruff_cache .pytest_cache
