"""Runs a client scenario against a SilentBroker and checks that nothing leaks after it.

Leak checks: asyncio tasks (``asyncio.all_tasks()`` against the set before the client was
made, ignoring the broker's own tasks) and sockets (``/proc/self/fd``); on trio, a task still
running in a client's task group makes the run fail at nursery exit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import sniffio

from kafkaio.errors import KafkaError
from tests.leaks._silent_broker import SilentBroker, open_sockets

GUARD_S = 8.0  # a scenario running longer than this has hung: fail, never wait forever
# How late after its deadline a call may end: scheduling on a busy 2-core machine. A call
# that waits for some unrelated timer (the network task's, a one-second poll) ends later.
SLACK_S = 0.6
EARLY_S = 0.05  # clocks and timer granularity: a call may end this much before its deadline

Scenario = Callable[[SilentBroker], Awaitable[None]]


def _client_tasks(before: set[Any]) -> list[str]:
    current = asyncio.current_task()
    return sorted(
        t.get_name()
        for t in asyncio.all_tasks()
        if t not in before
        and t is not current
        and not t.done()
        and "SilentBroker" not in t.get_name()
        and "serve" not in t.get_name()
    )


def run_scenario(backend: str, scenario: Scenario, *, answer_discovery: bool = True) -> None:
    """Run ``scenario(broker)`` under a hang guard; then assert no task or socket leaked."""

    async def main() -> None:
        sockets_before = open_sockets()
        async with SilentBroker(answer_discovery=answer_discovery) as broker:
            asyncio_backend = sniffio.current_async_library() == "asyncio"
            before = set(asyncio.all_tasks()) if asyncio_backend else set()
            with anyio.fail_after(GUARD_S):
                await scenario(broker)
            await anyio.sleep(0.01)  # let cancelled tasks finish unwinding
            if asyncio_backend:
                assert _client_tasks(before) == [], "tasks left running after close()"
        await anyio.sleep(0.01)
        # Sockets opened during the scenario and still open (earlier tests' garbage may be
        # collected, and its sockets closed, meanwhile: that is not this scenario's leak).
        assert open_sockets() - sockets_before == set(), "sockets left open after close()"

    anyio.run(main, backend=backend)


def typed_error(outcome: Any) -> KafkaError | None:
    """The KafkaError in a call's outcome: raised, returned, or in a result's ``error``."""
    if isinstance(outcome, KafkaError):
        return outcome
    values = outcome.values() if isinstance(outcome, dict) else [outcome]
    for value in values:
        if isinstance(value, KafkaError):
            return value
        error = getattr(value, "error", None)
        if isinstance(error, KafkaError):
            return error
    return None


async def outcome_by(call: Awaitable[Any], deadline_s: float) -> Any:
    """`outcome_of(call)`, asserting the call ended on its deadline (`deadline_s` after it
    began): not before it, and at most SLACK_S after it."""
    started = anyio.current_time()
    outcome = await outcome_of(call)
    elapsed = anyio.current_time() - started
    assert deadline_s - EARLY_S <= elapsed <= deadline_s + SLACK_S, (
        f"the call ended after {elapsed:.3f} s; its deadline was {deadline_s:g} s ({outcome!r})"
    )
    return outcome


async def outcome_of(call: Awaitable[Any]) -> Any:
    """The call's result, or the KafkaError it raised (anything else propagates)."""
    try:
        return await call
    except KafkaError as exc:
        return exc
