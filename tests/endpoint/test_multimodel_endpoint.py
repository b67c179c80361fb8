"""The local endpoint's multi-model and inference-component emulations (endpoint/multimodel.py,
components.py, targets.py): what a client sees (the wait, the wait header, ModelNotReadyException,
the ValidationErrors SageMaker gives, through both transports), what the server counts per model
and per component, the MME CloudWatch metrics, and one cache shared by two gunicorn workers whose
hits equal `lru_simulation` of the same sequence. Loads are tens of milliseconds (compressed clocks)."""

from __future__ import annotations

import argparse
import http.client
import random
import time
from datetime import UTC, datetime

import gevent
from gevent.pywsgi import WSGIServer
from locust.env import Environment

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sm_locust.cli.serve import add_parser, config_from_args
from sm_locust.endpoint.app import EndpointApp
from sm_locust.endpoint.components import ComponentSpec, parse_components
from sm_locust.endpoint.counters import SharedCounters
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.metrics import MetricsPublisher, ResourceUsage, build_datums
from sm_locust.endpoint.modelcache import lru_simulation, model_names
from sm_locust.endpoint.multimodel import WAIT_HEADER, MultiModelConfig
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from tests.conftest import SAMPLE_PAYLOAD
from tests.fakes import signed_client

BODY = SAMPLE_PAYLOAD.read_bytes()
NAMES = model_names(8)


def _config(*flags: str):
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return config_from_args(parser.parse_args(["serve", *flags]))


@pytest.fixture
def serve_app():
    """EndpointApp(config) behind gevent's WSGI server in this process; yields (app, url)."""
    servers = []

    def start(config: EndpointConfig):
        config.validate()
        app = EndpointApp(config)
        server = WSGIServer(("127.0.0.1", 0), app, log=None)
        server.start()
        servers.append(server)
        return app, f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.stop()


def runtime(url: str):
    return boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1",
                        config=Config(retries={"mode": "standard", "total_max_attempts": 1}, max_pool_connections=16))


def invoke(client, **kw) -> tuple[float, dict | str]:
    """(ms, the response's HTTP headers) or (ms, the error code)."""
    t0 = time.perf_counter()
    try:
        response = client.invoke_endpoint(EndpointName="mme", Body=BODY, ContentType="application/json", **kw)
        response["Body"].read()
        return (time.perf_counter() - t0) * 1000.0, response["ResponseMetadata"]["HTTPHeaders"]
    except ClientError as exc:
        return (time.perf_counter() - t0) * 1000.0, exc.response["Error"]["Code"]


def mme(**kw) -> EndpointConfig:
    return EndpointConfig(multi_model=MultiModelConfig(**{"model_count": 8, **kw}))


def wait_ms(headers) -> float | None:
    value = headers.get(WAIT_HEADER.lower()) if isinstance(headers, dict) else None
    return float(value) if value is not None else None


# -- flags ------------------------------------------------------------------------------------------------------


def test_flags_build_the_emulations_and_round_trip_through_local_endpoint():
    config = _config("--multi-model", "--model-count", "1000", "--model-size-mb", "50-150", "--instance-memory-mb",
                     "2048", "--model-load-ms", "30", "--model-download-ms", "20", "--model-cache-setting", "disabled",
                     "--instance-disk-mb", "1000000")
    mm = config.multi_model
    assert (mm.model_count, mm.model_size_mb, mm.memory_mb, mm.load_ms, mm.cache_setting) == (1000, "50-150", 2048, 30,
                                                                                              "Disabled")
    assert all(50 <= s <= 150 for s in mm.sizes()) and len(set(mm.sizes())) > 100 and mm.sizes() == mm.sizes()
    command = LocalEndpoint(config).command()
    assert _config(*command[command.index("serve") + 5:]).multi_model == mm  # after --host H --port P
    components = _config("--inference-components", "a:2, b-1:1:30").inference_components
    assert components == (ComponentSpec("a", 2), ComponentSpec("b-1", 1, 30.0))
    command = LocalEndpoint(EndpointConfig(inference_components=components)).command()
    assert _config(*command[command.index("serve") + 5:]).inference_components == components
    assert _config().multi_model is None and _config().inference_components is None


@pytest.mark.parametrize("flags, needle", [
    (["--model-count", "10"], "--model-count shapes the multi-model emulation; add --multi-model"),
    (["--multi-model", "--model-size-mb", "3000", "--instance-memory-mb", "2048"],
     "a 3000 MB model does not fit in 2048 MB of instance memory"),
    (["--multi-model", "--model-size-mb", "big"], "is not a size in MB"),
    (["--multi-model", "--instance-disk-mb", "100"], "the disk (100 MB) must hold what memory holds"),
    (["--multi-model", "--inference-components", "a:1"],
     "--multi-model cannot be combined with --inference-components"),
    (["--multi-model", "--serverless-memory-mb", "2048"], "cannot be combined with --serverless-*"),
    (["--inference-components", "a:1", "--max-concurrency", "4"], "--max-concurrency (the copies are the concurrency)"),
    (["--inference-components", "a:0"], "at least 1 copy"),
    (["--inference-components", "a_b:1"], "is not an inference component name"),
    (["--inference-components", "a:1,a:2"], "names 'a' twice"),
    (["--inference-components", "a"], "write NAME:COPIES"),
])
def test_bad_flags_are_one_line_usage_errors(flags, needle):
    with pytest.raises(UsageError) as info:
        _config(*flags)
    assert needle in info.value.message and "\n" not in info.value.message


def test_the_model_count_is_bounded_wherever_the_emulation_is_built():
    """serve's parser refuses --model-count 0 / 1e9 (tests/cli/test_bad_input.py); a config built another way
    (a sweep's `model_count`) is held to the same bound: a billion models reached 8 GB and never got ready."""
    from sm_locust.endpoint.multimodel import MultiModelConfig

    for count, needle in ((0, "at least 1"), (1_000_001, "at most 1,000,000, got 1,000,001")):
        with pytest.raises(ValueError, match=needle):
            MultiModelConfig(model_count=count).validate()


# -- multi-model: what a client sees --------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_cold_model_waits_download_and_load_then_hits_and_evictions_keep_it_on_disk(serve_app):
    app, url = serve_app(mme(model_size_mb="100", memory_mb=200, download_ms=400, load_ms=40))
    client = runtime(url)
    ms, headers = invoke(client, TargetModel=NAMES[0])
    assert ms >= 440 and wait_ms(headers) >= 440  # downloaded, then loaded
    ms, headers = invoke(client, TargetModel=NAMES[0])
    assert wait_ms(headers) is None  # in memory: a hit, no header
    invoke(client, TargetModel=NAMES[1])
    invoke(client, TargetModel=NAMES[2])  # memory holds two: NAMES[0] (least recently used) is unloaded
    _, headers = invoke(client, TargetModel=NAMES[0])
    assert wait_ms(headers) >= 40  # still on disk: loaded, not downloaded (the counts below: 3 downloads, 4 loads)
    stats = app.targets.stats()
    assert stats["models"][NAMES[0]] == {"requests": 3, "cold": 2, "hits": 1}
    mm = stats["multi_model"]
    assert (mm["loaded_models"], mm["downloads"], mm["loads"], mm["unloads"]) == (2, 3, 4, 2)
    counters = app.counters.snapshot()
    assert (counters["model_cache_lookups"], counters["model_cache_hits"]) == (5, 1)
    assert counters["model_downloading_time_us_window_count"] == 3
    assert counters["model_loading_time_us_window_count"] == 4 and counters["model_unloading_time_us_window_count"] == 2
    assert counters["model_loading_wait_time_us_window_count"] == 4  # one per request that waited
    assert counters["successes"] == 5


@pytest.mark.e2e
def test_concurrent_requests_for_a_cold_model_share_one_load(serve_app):
    app, url = serve_app(mme(download_ms=100, load_ms=100))
    client = runtime(url)
    jobs = [gevent.spawn(invoke, client, TargetModel=NAMES[3]) for _ in range(6)]
    gevent.joinall(jobs, timeout=10, raise_error=True)
    waits = [wait_ms(j.value[1]) for j in jobs]
    # every one waited for a load, and the first the whole 200 ms of it (a busy machine spreads the
    # arrivals, so a later one may wait less): one download and one load for the six (below)
    assert all(w is not None for w in waits) and max(waits) >= 200
    mm = app.targets.stats()["multi_model"]
    assert (mm["downloads"], mm["loads"]) == (1, 1)
    assert app.targets.stats()["models"][NAMES[3]] == {"requests": 6, "cold": 6, "hits": 0}


@pytest.mark.e2e
def test_a_load_longer_than_the_timeout_is_model_not_ready_and_goes_on(serve_app):
    app, url = serve_app(mme(download_ms=0, load_ms=600, ready_timeout_s=0.3))
    client = runtime(url)
    ms, code = invoke(client, TargetModel=NAMES[0])
    assert code == "ModelNotReadyException" and ms >= 300  # at the timeout, not after the load
    ms, headers = invoke(client, TargetModel=NAMES[0])  # the load went on: this one waits only its rest
    assert isinstance(headers, dict)
    ms, headers = invoke(client, TargetModel=NAMES[0])
    assert wait_ms(headers) is None
    assert app.targets.stats()["models"][NAMES[0]] == {"requests": 3, "cold": 2, "hits": 1}
    mm = app.targets.stats()["multi_model"]
    assert (mm["downloads"], mm["loads"]) == (1, 1)  # one load, which the second request joined
    assert app.counters.snapshot()["ModelNotReadyException"] == 1


@pytest.mark.e2e
def test_cache_setting_disabled_loads_for_every_request(serve_app):
    app, url = serve_app(mme(download_ms=30, load_ms=30, cache_setting="Disabled"))
    client = runtime(url)
    for _ in range(3):
        _, headers = invoke(client, TargetModel=NAMES[0])
        assert wait_ms(headers) >= 60
    mm = app.targets.stats()["multi_model"]
    assert (mm["downloads"], mm["loads"], mm["unloads"], mm["loaded_models"]) == (3, 3, 3, 0)


@pytest.mark.e2e
def test_what_sagemaker_refuses_is_a_validation_error(serve_app):
    _, url = serve_app(mme())
    client = runtime(url)
    with pytest.raises(ClientError) as info:
        client.invoke_endpoint(EndpointName="mme", Body=BODY)
    assert info.value.response["Error"]["Code"] == "ValidationError"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "is missing a target model header" in info.value.response["Error"]["Message"]
    for kw, needle in [({"TargetModel": "model-0009.tar.gz"}, "Failed to download model data"),
                       ({"TargetModel": NAMES[0], "InferenceComponentName": "a"}, "is not allowed")]:
        with pytest.raises(ClientError) as info:
            client.invoke_endpoint(EndpointName="mme", Body=BODY, **kw)
        assert info.value.response["Error"]["Code"] == "ValidationError" and needle in str(info.value), kw
    _, single = serve_app(EndpointConfig())
    with pytest.raises(ClientError) as info:
        runtime(single).invoke_endpoint(EndpointName="plain", Body=BODY, TargetModel=NAMES[0])
    assert info.value.response["Error"]["Message"] == ("Endpoint plain is not a multi-model endpoint and does not "
                                                       "support target model header.")


# -- inference components -------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_components_route_by_name_each_on_its_own_copies(serve_app):
    app, url = serve_app(EndpointConfig(service_time_ms=5, inference_components=parse_components("slow:1:100,fast:2")))
    client = runtime(url)
    t0 = time.perf_counter()
    jobs = [gevent.spawn(invoke, client, InferenceComponentName="slow") for _ in range(4)]
    jobs += [gevent.spawn(invoke, client, InferenceComponentName="fast") for _ in range(6)]
    gevent.joinall(jobs, timeout=10, raise_error=True)
    assert all(isinstance(j.value[1], dict) for j in jobs)
    assert time.perf_counter() - t0 >= 0.4  # one copy of `slow`: its four requests one after another
    seen = app.targets.stats()["inference_components"]
    assert seen["slow"] == {"copies": 1, "requests": 4, "busy": 0, "max_busy": 1}
    assert seen["fast"]["requests"] == 6 and 1 <= seen["fast"]["max_busy"] <= 2
    for kw, needle in [({}, "Inference Component Name header is required"),
                       ({"InferenceComponentName": "other"}, "Inference Component other of account"),
                       ({"InferenceComponentName": "fast", "TargetModel": NAMES[0]}, "is not a multi-model endpoint")]:
        with pytest.raises(ClientError) as info:
            client.invoke_endpoint(EndpointName="ic", Body=BODY, **kw)
        assert info.value.response["Error"]["Code"] == "ValidationError" and needle in str(info.value)
    _, single = serve_app(EndpointConfig())
    with pytest.raises(ClientError) as info:
        runtime(single).invoke_endpoint(EndpointName="plain", Body=BODY, InferenceComponentName="fast")
    assert "Inference Component Name header is not allowed" in info.value.response["Error"]["Message"]


# -- both transports --------------------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("transport", ["fast", "boto3"])
def test_both_transports_route_and_name_the_errors_as_botocore_does(serve_app, transport):
    _, mme_url = serve_app(mme(download_ms=0, load_ms=0))
    _, ic_url = serve_app(EndpointConfig(inference_components=parse_components("a:1,b:1")))
    env = Environment()
    env.create_local_runner()
    on_mme = signed_client(transport, env, mme_url, "mme")
    on_ic = signed_client(transport, env, ic_url, "ic")
    assert on_mme.invoke(Invocation(body=BODY, target_model=NAMES[1]), name="model").body.startswith(b'{"predictions"')
    assert on_ic.invoke(Invocation(body=BODY, inference_component="b"), name="component").body
    on_mme.invoke(Invocation(body=BODY), name="no-model")
    on_mme.invoke(Invocation(body=BODY, target_model="model-0099.tar.gz"), name="unknown-model")
    on_ic.invoke(Invocation(body=BODY), name="no-component")
    on_ic.invoke(Invocation(body=BODY, inference_component="zz"), name="unknown-component")
    failures = {e.name: str(e.error) for e in env.stats.errors.values()}
    assert failures["no-model"].startswith("ValidationError: Request ")
    assert failures["no-model"].endswith(" is missing a target model header.")
    assert failures["unknown-model"].startswith("ValidationError: Failed to download model data(bucket: ")
    assert failures["no-component"] == "ValidationError: Inference Component Name header is required for endpoints " \
        "to which you plan to deploy inference components. Please include Inference Component Name header or " \
        "consider using SageMaker models."
    assert failures["unknown-component"] == "ValidationError: Inference Component zz of account 000000000000 not found."
    assert env.stats.get("model", "InvokeEndpoint").num_failures == 0


# -- CloudWatch ----------------------------------------------------------------------------------------------------


def test_mme_metrics_as_aws_names_them():
    counters = SharedCounters()
    previous = counters.take_window()
    counters.add(model_cache_lookups=4, model_cache_hits=3)
    counters.add(model_loading_wait_time_us_sum=250_000.0)
    counters.add(model_downloading_time_us_sum=200_000.0)
    counters.add(model_loading_time_us_sum=50_000.0)
    for _ in range(2):
        counters.add(model_unloading_time_us_sum=0.0)
    stamp = datetime(2025, 1, 1, tzinfo=UTC)
    out = build_datums(previous, counters.take_window(), endpoint_name="mme", timestamp=stamp,
                       usage=[ResourceUsage(loaded_models=5), ResourceUsage(cpu_pct=10.0, loaded_models=7)])
    by_name = {d["MetricName"]: (ns, d) for ns, datums in out.items() for d in datums}
    ns, hit = by_name["ModelCacheHit"]
    assert ns == "AWS/SageMaker" and hit["Unit"] == "None"
    assert hit["StatisticValues"] == {"SampleCount": 4.0, "Sum": 3.0, "Minimum": 0.0, "Maximum": 1.0}  # Average 0.75
    for name, total in [("ModelLoadingWaitTime", 250_000.0), ("ModelDownloadingTime", 200_000.0),
                        ("ModelLoadingTime", 50_000.0)]:
        ns, datum = by_name[name]
        assert (ns, datum["Unit"], datum["StatisticValues"]["Sum"]) == ("AWS/SageMaker", "Microseconds", total)
    assert by_name["ModelUnloadingTime"][1]["StatisticValues"]["SampleCount"] == 2.0
    ns, loaded = by_name["LoadedModelCount"]
    assert ns == "/aws/sagemaker/Endpoints" and loaded["Unit"] == "None"
    assert loaded["StatisticValues"] == {"SampleCount": 2.0, "Sum": 12.0, "Minimum": 5.0, "Maximum": 7.0}
    assert loaded["Dimensions"] == [{"Name": "EndpointName", "Value": "mme"}, {"Name": "VariantName",
                                                                                "Value": "AllTraffic"}]


def test_the_publisher_reads_loaded_model_count_with_each_sample():
    sent = []

    class CloudWatch:
        def put_metric_data(self, Namespace, MetricData):  # noqa: N803 - boto3's names
            sent.append((Namespace, MetricData))

    loaded = iter([3, 4])
    publisher = MetricsPublisher(SharedCounters(), endpoint_name="mme", cloudwatch=CloudWatch(),
                                 loaded_models=lambda: next(loaded))
    publisher.sample()
    publisher.sample()
    publisher.publish_once()
    (namespace, [datum]), = sent
    assert namespace == "/aws/sagemaker/Endpoints" and datum["MetricName"] == "LoadedModelCount"
    assert datum["StatisticValues"]["Sum"] == 7.0


# -- one cache for two gunicorn workers ------------------------------------------------------------------------


@pytest.mark.e2e
def test_two_workers_share_one_cache_whose_hits_equal_the_simulation(tmp_path):
    """A seeded Zipf sequence, one request at a time on a new connection each (so both gunicorn workers
    serve them), against 2 workers: the server's hits, loads and per-model counts equal `lru_simulation`
    of the same sequence, which they would not with a cache per worker."""
    config = EndpointConfig(port=0, workers=2, multi_model=MultiModelConfig(
        model_count=40, model_size_mb="100", memory_mb=1000, download_ms=2, load_ms=3))
    names = model_names(40)
    sequence = random.Random(7).choices(names, weights=[1 / r ** 1.1 for r in range(1, 41)], k=300)
    with LocalEndpoint(config, log_path=tmp_path / "endpoint.log") as endpoint:
        host, port = endpoint.url.removeprefix("http://").split(":")
        cold = 0
        for name in sequence:
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            connection.request("POST", "/endpoints/mme/invocations", BODY,
                               {"Content-Type": "application/json", "X-Amzn-SageMaker-Target-Model": name})
            response = connection.getresponse()
            response.read()
            assert response.status == 200
            cold += response.getheader(WAIT_HEADER) is not None
            connection.close()
        stats = endpoint.stats()
    expected = lru_simulation(sequence, 100, memory_mb=1000)
    assert 0 < expected.hits < len(sequence)
    assert stats["multi_model"]["cache_hits"] == expected.hits == len(sequence) - cold
    assert stats["multi_model"]["loads"] == expected.loads and stats["multi_model"]["unloads"] == expected.unloads
    assert {n: c["requests"] for n, c in stats["models"].items()} == {n: sequence.count(n) for n in set(sequence)}
