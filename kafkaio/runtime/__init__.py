"""The reactor runtime: sans-I/O request managers and the one I/O driver that runs them."""

from __future__ import annotations

from kafkaio.runtime.requests import PollResult, RequestManager, UnsentRequest

__all__ = ["PollResult", "RequestManager", "UnsentRequest"]
