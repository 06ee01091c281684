"""The Celery application: tasks live in each app's tasks.py."""

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, beat_init

from controlplane.redaction import RedactingFilter

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("controlplane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@beat_init.connect
def verify_the_audit_log_now(sender: object, **kwargs: object) -> None:
    """Beat's schedule would first verify the audit log AUDIT_VERIFY_SECONDS after start; queue
    one verification at once, so the audit page says "verified" from the first minute."""
    app.send_task("controlplane.audit.tasks.verify_chain")


def redact_what_workers_log(logger: logging.Logger, **kwargs: Any) -> None:
    """Celery replaces the logging handlers in its processes: each of its handlers hides
    secrets in what it writes (controlplane.redaction), as settings.LOGGING's do."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


after_setup_logger.connect(redact_what_workers_log, weak=False)
after_setup_task_logger.connect(redact_what_workers_log, weak=False)
