"""An external Kafka cluster for tests, named by an environment variable."""

from __future__ import annotations

import os

EXTERNAL_BOOTSTRAP_ENV = "KAFKAIO_TEST_BOOTSTRAP"


def external_bootstrap() -> str | None:
    """The bootstrap list in ``KAFKAIO_TEST_BOOTSTRAP`` ("host:port,..."), or None if unset."""
    value = os.environ.get(EXTERNAL_BOOTSTRAP_ENV, "").strip()
    return value or None
