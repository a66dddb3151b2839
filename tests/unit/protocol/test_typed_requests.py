"""Every request class names its response class (``Request[XResponse]``), which is how
``Connection.send`` and ``UnsentRequest`` handlers get typed responses under mypy."""

from __future__ import annotations

import typing

import pytest

from kafkaio.protocol import messages as m
from kafkaio.protocol.api import Request
from kafkaio.share import protocol as share_v1

m.load_all()


def _response_of(request_class: type) -> str:
    (base,) = [b for b in request_class.__orig_bases__ if typing.get_origin(b) is Request]
    (argument,) = typing.get_args(base)
    return argument.__forward_arg__ if isinstance(argument, typing.ForwardRef) else argument


@pytest.mark.parametrize("api_key", sorted(m.REQUESTS))
def test_each_generated_request_names_its_own_response(api_key: int) -> None:
    request, response = m.REQUESTS[api_key]
    assert issubclass(request, Request)
    assert _response_of(request) == response.__name__
    assert not issubclass(response, Request)


def test_the_share_v1_stopgap_requests_name_their_responses() -> None:
    pairs = {
        share_v1.ShareGroupHeartbeatRequestV1: "ShareGroupHeartbeatResponseV1",
        share_v1.ShareFetchRequestV1: "ShareFetchResponseV1",
        share_v1.ShareAcknowledgeRequestV1: "ShareAcknowledgeResponseV1",
    }
    for request, response in pairs.items():
        assert _response_of(request) == response
        assert hasattr(share_v1, response)


def test_the_base_adds_no_instance_state() -> None:
    request = m.MetadataRequest()
    assert not hasattr(request, "__dict__")
    assert Request.__slots__ == ()
