"""Coverage-guided fuzzing of the response and record decoders with atheris (run by hand).

``python tests/unit/fuzz/atheris_decoders.py -atheris_runs=200000`` (libFuzzer flags work);
any exception other than a KafkaError subclass, or a hang (-timeout=2), is a crash.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from kafkaio.errors import KafkaError
    from kafkaio.protocol.frames import decode_response
    from kafkaio.records import iter_batches

from tests.unit.fuzz._harness import response_cases  # noqa: E402

CASES = response_cases()


def one_input(data: bytes) -> None:
    if len(data) < 3:
        return
    selector = int.from_bytes(data[:2], "big")
    body = data[2:]
    try:
        if selector % 8 == 0:
            for batch in iter_batches(body, max_decompressed_size=1 << 20):
                for record in batch:
                    _ = (record.key, record.value, record.headers)
        else:
            api_key, _cls, version = CASES[selector % len(CASES)]
            decode_response(api_key, version, b"\x00\x00\x00\x07" + body)
    except KafkaError:
        pass


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
