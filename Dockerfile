# Two images from one file, both for web, worker and beat:
#   production (the last stage, so a plain `docker build .` makes it): the product, no simulator;
#   demo: the same with the GPU host simulator beside it, for the compose demo's simulated fleet.
# The simulator runs what it is sent (a rehearsal tool): production never carries it.
FROM python:3.11-slim AS product
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml ./
COPY controlplane ./controlplane
COPY hosts ./hosts
COPY deployments ./deployments
# The product's wheel (pyproject.toml), without the simulator.
RUN pip install --no-cache-dir .
COPY manage.py ./
COPY templates ./templates
# The mount points exist, owned by `app`, before the volumes are first mounted: a new named
# volume takes the ownership of the directory it is mounted on.
RUN useradd --create-home app \
    && mkdir -p /app/.run/simfleet /var/lib/controlplane/audit-checkpoints \
    && chown -R app /app/.run /var/lib/controlplane
USER app
EXPOSE 8000
CMD ["gunicorn", "controlplane.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]

# `manage.py simfleet` finds it beside manage.py; owned by root, so `app` cannot change it.
FROM product AS demo
COPY simulator ./simulator

FROM product AS production
