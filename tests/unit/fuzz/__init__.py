"""Hostile-input fuzzing: protocol and record decoders, fake brokers, atheris scripts."""
