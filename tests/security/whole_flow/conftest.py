"""The webhook receiver, endpoint and worker of the notification tests, for the whole flow."""

from tests.notifications.conftest import (  # noqa: F401  (fixtures used by the tests here)
    make_endpoint,
    receiver,
    webhook_queue,
    webhook_worker,
)
