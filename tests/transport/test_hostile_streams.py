"""Hostile streams end at once and in bounded memory: a frame claiming 4 GB, a bad CRC followed by endless bytes
(the fast client stops reading, the boto3 client's drain is bounded), and an event that never ends (the token
parser looks at each byte once and refuses a line past MAX_LINE_BYTES)."""

from __future__ import annotations

import struct
from binascii import crc32

from sm_locust.llm.tokens import LINE_TOO_LONG, MAX_LINE_BYTES, MAX_SERVER_COUNT, StreamTokens, count_stream
from sm_locust.transport import eventstream
from sm_locust.transport.boto3 import DRAIN_BYTES, _drain
from sm_locust.transport.fast import read_event_stream


class Endless:
    """A response body: `head`, then bytes without end; counts what was read."""

    def __init__(self, head: bytes):
        self.head, self.read_bytes = head, 0

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            raise AssertionError("read to the end of an endless body")
        out, self.head = self.head[:n], self.head[n:]
        out += b"x" * (n - len(out))
        self.read_bytes += len(out)
        return out


def test_a_frame_claiming_4_gb_is_refused_without_reading_it():
    body = Endless(struct.pack(">II", 0xFFFFFFF0, 0))
    error = read_event_stream(body, lambda payload, now: None, "http://x")
    assert error is not None and error.code == "InvalidPayloadLength" and "4,294,967,280 bytes" in error.message
    assert body.read_bytes == 4


def test_a_frame_at_the_bound_is_read_and_one_past_it_is_not():
    at = Endless(struct.pack(">II", eventstream.MAX_FRAME, 0))
    read_event_stream(at, lambda payload, now: None, "http://x")  # read whole, then botocore's CRC check fails
    assert at.read_bytes == eventstream.MAX_FRAME
    past = Endless(struct.pack(">II", eventstream.MAX_FRAME + 1, 0))
    assert read_event_stream(past, lambda payload, now: None, "http://x").code == "InvalidPayloadLength"
    assert past.read_bytes == 4


def test_a_bad_crc_followed_by_endless_bytes_ends_the_read():
    good = eventstream.encode_payload_part(b'{"token": {"text": "a"}}\n')
    bad = bytearray(eventstream.encode_payload_part(b"hello"))
    bad[-1] ^= 0xFF
    parts: list[bytes] = []
    body = Endless(good + bytes(bad))
    error = read_event_stream(body, lambda payload, now: parts.append(payload), "http://x")
    assert error is not None and error.code == "ChecksumMismatch"
    assert len(parts) == 1 and body.read_bytes == len(good) + len(bad)


def test_the_boto3_drain_reads_at_most_its_bound_then_closes():
    class Raw:
        def stream(self):
            while True:
                yield b"x" * 4096

    class Body:
        closed = False
        _raw_stream = Raw()

        def close(self):
            self.closed = True

    body = Body()
    _drain(body)
    assert body.closed and DRAIN_BYTES == 1 << 20


def test_a_rest_at_the_drain_bound_is_read_to_its_end_and_the_connection_kept():
    class Raw:
        def __init__(self, size):
            self.size = size

        def stream(self):
            yield b"x" * self.size

    class Body:
        closed = False

        def __init__(self, size):
            self._raw_stream = Raw(size)

        def close(self):
            self.closed = True

    at, past = Body(DRAIN_BYTES), Body(DRAIN_BYTES + 1)
    _drain(at)
    _drain(past)
    assert (at.closed, past.closed) == (False, True)


def test_an_event_that_never_ends_is_an_in_band_error_at_its_bound():
    at = StreamTokens()
    at.feed(b'{"token": {"text": "' + b"x" * (MAX_LINE_BYTES - 40))
    assert at.error is None
    past = StreamTokens()
    past.feed(b'{"token": {"text": "')
    for _ in range(MAX_LINE_BYTES // 65536 + 1):
        past.feed(b"}" * 65536)  # every part could close an object: the line is still scanned once
    assert past.error is not None and past.error.code == LINE_TOO_LONG
    assert past.feed(b'x"}}\n{"token": {"id": 7, "text": "b"}}\n') == 1  # the next line counts again


def test_a_line_split_anywhere_counts_the_same():
    stream = (b'data: {"token": {"id": 1, "text": "a\\\\"}}\n\n{"token": {"id": 2, "text": "}\\" {"}}'
              b'{"token": {"id": 3, "text": "\\\\\\""}}\n')
    whole = count_stream([stream])
    assert whole.counted == 3
    for cut in range(1, len(stream)):
        split = count_stream([stream[:cut], stream[cut:]])
        assert split.counted == 3, cut
        assert split.error is None


def test_a_server_count_that_is_not_a_number_of_tokens_is_ignored():
    lines = [b'{"token": {"id": 1, "text": "a"}}\n', b'{"token": {"id": 2, "text": "b"}}\n']
    for bad in (b"Infinity", b"NaN", b"1e300", b"-Infinity", str(MAX_SERVER_COUNT + 1).encode()):
        count = count_stream([*lines, b'{"generated_text": "ab", "details": {"generated_tokens": ' + bad + b"}}\n"])
        assert count.server_output is None and count.output_tokens == 2, bad
    at = count_stream([*lines, b'{"details": {"generated_tokens": ' + str(MAX_SERVER_COUNT).encode() + b"}}\n"])
    assert at.server_output == MAX_SERVER_COUNT


def test_crc_of_the_test_frame_is_what_botocore_checks():
    frame = eventstream.encode_payload_part(b"x")
    assert struct.unpack(">I", frame[-4:])[0] == crc32(frame[:-4]) & 0xFFFFFFFF


def test_a_closed_line_that_is_not_json_is_not_decoded_again_on_every_part(monkeypatch):
    """`{}` then a stray `}` per part: decoding the whole line at each part would cost quadratic time."""
    from sm_locust.llm import tokens

    calls = []
    original = StreamTokens._complete
    monkeypatch.setattr(StreamTokens, "_complete", lambda self, rest: calls.append(1) or original(self, rest))
    stream = tokens.StreamTokens()
    stream.feed(b'{"token": {"id": 1, "text": "a"}} }')
    for _ in range(1000):
        stream.feed(b"}")
    assert len(calls) == 1
    assert stream.feed(b'\n{"token": {"id": 2, "text": "b"}}') == 1  # the next line is taken at once again
