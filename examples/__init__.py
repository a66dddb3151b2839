"""Runnable kafkaio examples (``python -m examples.<name> --help``)."""
