"""Benchmarks of kafkaio hot paths; run with ``python -m benchmarks``."""
