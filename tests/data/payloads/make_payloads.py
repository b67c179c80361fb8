"""A payload function for tests/payloads/test_payloads.py: yields every kind of item a function may give."""

import numpy as np

from sm_locust.invocation import Invocation


def mixed():
    yield {"feat_ids": np.arange(39, dtype=np.int64).reshape(1, 39), "feat_vals": np.ones((1, 39), np.float32)}
    yield b'{"instances": [[1, 2]]}'
    yield Invocation(body=b"1,2", content_type="text/csv")
    yield {"Body": "3,4", "ContentType": "text/csv", "Weight": 5}


def endless():
    while True:
        yield b"x"


def broken():
    raise RuntimeError("database is down")
