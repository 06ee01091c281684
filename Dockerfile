# One image for web, worker, beat and the simulated fleet.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml ./
COPY controlplane ./controlplane
COPY hosts ./hosts
COPY deployments ./deployments
COPY simulator ./simulator
RUN pip install --no-cache-dir .
COPY . .
# The mount points exist, owned by `app`, before the volumes are first mounted: a new named
# volume takes the ownership of the directory it is mounted on.
RUN useradd --create-home app \
    && mkdir -p /app/.run/simfleet /var/lib/controlplane/audit-checkpoints \
    && chown -R app /app/.run /var/lib/controlplane
USER app
EXPOSE 8000
CMD ["gunicorn", "controlplane.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
