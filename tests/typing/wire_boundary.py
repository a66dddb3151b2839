"""Static tests of the typed wire boundary, checked by ``make typecheck`` (mypy strict), never
run: a request's response type reaches its sender and its handler, not ``Any``.

``assert_type`` fails on ``Any``; a ``type: ignore`` that stops being needed fails too
(``warn_unused_ignores``), so a handler taking the wrong response type must stay an error.
"""

from __future__ import annotations

from typing_extensions import assert_type

from kafkaio.net.connection import Connection
from kafkaio.net.state import ConnectionMachine
from kafkaio.protocol import messages as m
from kafkaio.runtime.completion import Completion
from kafkaio.runtime.requests import UnsentRequest


async def send_returns_the_response_class(conn: Connection) -> None:
    assert_type(await conn.send(m.MetadataRequest()), m.MetadataResponse)
    assert_type(await conn.send(m.FindCoordinatorRequest()), m.FindCoordinatorResponse)
    sent = conn.submit(m.ListOffsetsRequest(), 9)
    assert_type(sent, Completion[m.ListOffsetsResponse])
    assert_type(sent.value, m.ListOffsetsResponse | None)
    assert_type(conn.submit_no_response(m.ProduceRequest()), Completion[None])


def the_machine_completes_the_senders_type(machine: ConnectionMachine) -> None:
    waiter: Completion[m.MetadataResponse] = Completion()
    machine.send(m.MetadataRequest(), 12, 0.0, 1.0, waiter)
    wrong: Completion[m.FetchResponse] = Completion()
    machine.send(m.MetadataRequest(), 12, 0.0, 1.0, wrong)  # type: ignore[misc]


def handlers_get_their_response_class_or_none() -> None:
    def on_metadata(
        now: float, response: m.MetadataResponse | None, error: BaseException | None
    ) -> None:
        if response is not None:
            assert_type(response.brokers, list[m.MetadataResponse.MetadataResponseBroker])

    def on_fetch(now: float, response: m.FetchResponse | None, error: BaseException | None) -> None:
        pass

    def never_none(now: float, response: m.MetadataResponse, error: BaseException | None) -> None:
        pass

    UnsentRequest(None, m.MetadataRequest(), on_metadata)
    UnsentRequest(None, m.MetadataRequest(), on_fetch)  # type: ignore[arg-type]
    # the driver passes None with an error: a handler must say so
    UnsentRequest(None, m.MetadataRequest(), never_none)  # type: ignore[arg-type]


async def the_hand_off_completes_with_the_response_class(conn: Connection) -> None:
    done = conn.submit(m.FetchRequest(), 16)
    assert_type(done, Completion[m.FetchResponse])
    assert_type(done.value, m.FetchResponse | None)
    assert_type(await done.wait(), m.FetchResponse)
