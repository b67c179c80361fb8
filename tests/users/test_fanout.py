"""Fan-out (`--split K`): parts prepared before the test in every format, and one split call
recorded as one logical request plus its parts, against the local endpoint."""

from __future__ import annotations

import base64

import gevent
import locust  # noqa: F401  (gevent patching before boto3)
from locust import task
from locust.env import Environment
from locust.exception import StopUser

import numpy as np
import orjson
import pytest

from sm_locust import SageMakerUser
from sm_locust.endpoint import codecs
from sm_locust.endpoint.model import sample_rows
from sm_locust.errors import UsageError
from sm_locust.invocation import INVOKE_ENDPOINT, Invocation
from sm_locust.payloads import load_payloads
from sm_locust.payloads.split import PARTS, check_split, split_invocations
from sm_locust.serializers import create_serializer, part_slices
from sm_locust.users.fanout import INVOKE_ENDPOINT_SPLIT, invoke_split

IDS, VALS = sample_rows(10, seed=7)
RANKING = {"feat_ids": IDS, "feat_vals": VALS}


def decoded_rows(parts: tuple[Invocation, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The rows the local endpoint reads from the parts, in part order."""
    pieces = [codecs.decode_request(p.body, p.content_type, p.custom_attributes) for p in parts]
    for p, (ids, _) in zip(parts, pieces, strict=True):
        assert p.rows == ids.shape[0]
    return np.vstack([ids for ids, _ in pieces]), np.vstack([vals for _, vals in pieces])


def test_part_sizes_differ_by_at_most_one():
    assert [s.stop - s.start for s in part_slices(10, 3, "x")] == [4, 3, 3]
    assert [s.stop - s.start for s in part_slices(500, 10, "x")] == [50] * 10
    with pytest.raises(UsageError, match="x: 2 rows cannot be split into 3 parts"):
        part_slices(2, 3, "x")


@pytest.mark.parametrize("bad", [0, -1, 65, 2.5, True, "3"])
def test_split_must_be_a_whole_number_in_range(bad):
    with pytest.raises(UsageError, match="--split must be a whole number"):
        check_split(bad)


@pytest.mark.parametrize("serializer", ["json", "protobuf", "npy", "numpy-raw", "csv"])
def test_serializer_built_bodies_split_their_rows_before_encoding(tmp_path, serializer):
    np.savez(tmp_path / "rows.npz", feat_ids=IDS, feat_vals=VALS)
    pool = load_payloads(tmp_path / "rows.npz", serializer=serializer, batch_size=10, max_bodies=1, split=3)
    (whole,) = pool.invocations
    parts = whole.extra[PARTS]
    assert [p.rows for p in parts] == [4, 3, 3]
    assert all(p.content_type == whole.content_type and PARTS not in p.extra for p in parts)
    ids, vals = decoded_rows(parts)
    whole_ids, whole_vals = codecs.decode_request(whole.body, whole.content_type, whole.custom_attributes)
    np.testing.assert_array_equal(ids, whole_ids)
    np.testing.assert_allclose(vals, whole_vals, rtol=1e-6)
    if serializer == "numpy-raw":
        assert [p.custom_attributes for p in parts] == ["shape=4,78;dtype=float32", "shape=3,78;dtype=float32",
                                                        "shape=3,78;dtype=float32"]


def _bodies() -> dict[str, tuple[bytes, str, str | None]]:
    packed = np.hstack([IDS, VALS]).astype(np.float32)
    rows = [{"feat_ids": i.tolist(), "feat_vals": v.tolist()} for i, v in zip(IDS, VALS, strict=True)]
    return {
        "json-instances": (orjson.dumps({"instances": rows, "signature_name": "s"}), "application/json", None),
        "json-inputs": (create_serializer("json").serialize(RANKING), "application/json", None),
        "csv-header": (create_serializer("csv", header=True).serialize(RANKING), "text/csv", None),
        "npy": (create_serializer("npy").serialize(packed), "application/x-npy", None),
        "protobuf": (create_serializer("protobuf", model_name="m").serialize(RANKING), "X-protobuf", None),
        "numpy-raw": (packed.tobytes(), "application/octet-stream", "shape=N,78;dtype=float32"),
    }


@pytest.mark.parametrize("kind", list(_bodies()))
def test_bodies_read_as_bytes_split_in_their_own_format(kind):
    body, content_type, attributes = _bodies()[kind]
    (whole,) = split_invocations([Invocation(body=body, content_type=content_type, custom_attributes=attributes,
                                             target_variant="blue")], 4)
    parts = whole.extra[PARTS]
    assert [p.rows for p in parts] == [3, 3, 2, 2]
    assert all(p.target_variant == "blue" and p.content_type == content_type for p in parts)
    ids, vals = decoded_rows(parts)
    np.testing.assert_array_equal(ids, IDS)
    np.testing.assert_allclose(vals, VALS, rtol=1e-6)
    if kind == "json-instances":
        assert all(orjson.loads(p.body)["signature_name"] == "s" for p in parts)
    if kind == "protobuf":
        from sm_locust.serializers.tfs_proto import decode_predict_request

        assert {decode_predict_request(p.body).model_name for p in parts} == {"m"}


def test_functions_split_the_objects_they_return(tmp_path):
    (tmp_path / "gen.py").write_text(
        "from sm_locust.endpoint.model import sample_rows\n"
        "def batches():\n"
        "    ids, vals = sample_rows(6, seed=1)\n"
        "    yield {'feat_ids': ids, 'feat_vals': vals}\n"
    )
    pool = load_payloads(f"{tmp_path / 'gen.py'}:batches", serializer="protobuf", split=2)
    assert [p.rows for p in pool.next().extra[PARTS]] == [3, 3]


def test_what_cannot_be_split_says_why_before_the_test(tmp_path):
    (tmp_path / "img.png").write_bytes(b"\x89PNG....")
    with pytest.raises(UsageError,
                       match=r"img.png body 1: cannot split a image/png body into rows; --split works with JSON"):
        load_payloads(tmp_path / "img.png", split=2)
    (tmp_path / "one.json").write_bytes(b'{"instances": [{"feat_ids": [1], "feat_vals": [0.5]}]}')
    with pytest.raises(UsageError, match="1 row cannot be split into 2 parts"):
        load_payloads(tmp_path / "one.json", split=2)
    (tmp_path / "flat.json").write_bytes(b'{"data": 1}')
    with pytest.raises(UsageError, match='needs an "instances" list'):
        load_payloads(tmp_path / "flat.json", split=2)
    raw = Invocation(body=np.zeros(78, np.float32).tobytes(), content_type="application/octet-stream")
    with pytest.raises(UsageError, match="shape= custom attributes"):
        split_invocations([raw], 2)


# -- on the wire: one logical request + its parts ----------------------------------------------

BODY_50 = orjson.dumps({"instances": [{"feat_ids": i.tolist(), "feat_vals": v.tolist()}
                                      for i, v in zip(*sample_rows(50, seed=3), strict=True)]})


def split_user(url: str, calls: int, k: int, validator=None):
    (whole,) = split_invocations([Invocation(body=BODY_50)], k)

    class Splitter(SageMakerUser):
        endpoint_name = "ep"
        endpoint_url = url

        def on_start(self):
            self.calls = 0
            self.client.validator = validator

        @task
        def invoke(self):
            if self.calls >= calls:
                raise StopUser()
            self.calls += 1
            invoke_split(self.client, whole)

    return Splitter


def run_users(env: Environment, users: int) -> None:
    runner = env.create_local_runner()
    runner.start(users, spawn_rate=users)
    with gevent.Timeout(30):
        while runner.user_count or not env.stats.total.num_requests:
            gevent.sleep(0.05)
    runner.quit()


@pytest.fixture
def endpoint(module_endpoint):
    """The module's default endpoint: the tests only send to it (its counts read as differences)."""
    return module_endpoint


@pytest.mark.e2e
def test_a_split_call_is_one_logical_request_and_k_parts(endpoint):
    served_before = endpoint.stats()["requests"]
    env = Environment(user_classes=[split_user(endpoint.url, calls=10, k=5)])
    run_users(env, users=2)
    logical = env.stats.entries[("ep", INVOKE_ENDPOINT_SPLIT)]
    parts = env.stats.entries[("ep/part", INVOKE_ENDPOINT)]
    assert logical.num_requests == 20 and logical.num_failures == 0
    assert parts.num_requests == 100 and parts.num_failures == 0
    assert endpoint.stats()["requests"] - served_before == 100  # the parts are what the endpoint saw
    assert logical.max_response_time >= parts.min_response_time  # waits for the last part
    assert logical.total_content_length == parts.total_content_length


@pytest.mark.e2e
def test_a_failing_part_fails_the_logical_request_under_its_code(endpoint_factory):
    ep = endpoint_factory(throttle_ratio=0.3, seed=5)
    env = Environment(user_classes=[split_user(ep.url, calls=10, k=4)])
    run_users(env, users=2)
    logical = env.stats.entries[("ep", INVOKE_ENDPOINT_SPLIT)]
    parts = env.stats.entries[("ep/part", INVOKE_ENDPOINT)]
    assert logical.num_requests == 20 and parts.num_requests == 80
    assert 0 < logical.num_failures <= parts.num_failures <= 4 * logical.num_failures
    split_errors = {str(e.error).split(":")[0] for e in env.stats.errors.values() if e.method == INVOKE_ENDPOINT_SPLIT}
    assert split_errors == {"ThrottlingException"}


@pytest.mark.e2e
def test_validation_runs_on_every_part(endpoint):
    class Strict:
        def validate(self, body, content_type, invocation):
            from sm_locust.invocation import InvocationError

            return InvocationError("InvalidResponse", "nope") if invocation.rows == 13 else None

    env = Environment(user_classes=[split_user(endpoint.url, calls=3, k=4, validator=Strict())])
    run_users(env, users=1)
    # 50 rows in 4 parts: 13, 13, 12, 12 -> two parts rejected per call, each logical call fails
    assert env.stats.entries[("ep/part", INVOKE_ENDPOINT)].num_failures == 6
    assert env.stats.entries[("ep", INVOKE_ENDPOINT_SPLIT)].num_failures == 3
    assert {str(e.error) for e in env.stats.errors.values()} == {"InvalidResponse: nope"}


def test_base64_payload_parts_keep_the_decoded_body(tmp_path):
    line = {"Body": base64.b64encode(BODY_50).decode(), "BodyEncoding": "base64"}
    (tmp_path / "a.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    parts = load_payloads(tmp_path / "a.jsonl", split=2).next().extra[PARTS]
    assert [p.rows for p in parts] == [25, 25]
