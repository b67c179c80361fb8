"""docker-compose.yml proved without Docker: its services' commands run as local processes.

There is no Docker engine here, so the test reads docker-compose.yml, interpolates it the way
Compose does (`${VAR:-default}`, `${VAR-default}`), rewrites service hostnames to 127.0.0.1,
container ports to free local ports and volume paths to temporary folders, then starts the demo
topology (CloudWatch stand-in, local endpoint, master, 2 workers) headless to the end. The compose
file itself is validated against the Compose Specification's JSON schema, vendored in
tests/data/compose/ (see the README there for its origin).
"""

from __future__ import annotations

import json

import jsonschema
import yaml

from tests.fakes import wait_exit
from tests.topology import (
    COMPOSE_FILE,
    ROOT,
    SCHEMA_FILE,
    demo_topology,
    endpoint_stats,
    interpolate,
    load_compose,
    start_cluster,
)


def test_compose_file_is_valid_against_the_compose_spec_schema():
    schema = json.loads(SCHEMA_FILE.read_text())
    validator = jsonschema.Draft201909Validator(schema)
    document = yaml.safe_load(COMPOSE_FILE.read_text())
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    # the schema is not a no-op: it rejects a broken service
    broken = dict(document, services={"master": {"image": "x", "ports": {"not": "a list"}, "restart": 3}})
    assert list(validator.iter_errors(broken))


def test_compose_topology_rules():
    compose = load_compose({})
    services = compose["services"]
    assert set(services) >= {"master", "worker", "endpoint", "cloudwatch"}
    assert services["endpoint"]["profiles"] == ["demo"] and services["cloudwatch"]["profiles"] == ["demo"]
    # only the web UI is published, and only on the host's loopback
    published = {name: s.get("ports", []) for name, s in services.items() if s.get("ports")}
    assert list(published) == ["master"] and all(p.startswith("127.0.0.1:") for p in published["master"])
    assert "container_name" not in services["worker"]  # --scale worker=N needs that
    # the master's /metrics (--publish prometheus) is what the second published port reaches
    publish = services["master"]["environment"]["SM_LOCUST_PUBLISH"]
    assert publish == "prometheus:0.0.0.0:9646" and "127.0.0.1:9646:9646" in published["master"]
    # credentials: never a literal value, only pass-through from the environment or a read-only mount
    for name in ("master", "worker"):
        raw = yaml.safe_load(COMPOSE_FILE.read_text())["services"][name]["environment"]
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            assert raw[key] is None, (name, key)  # pass-through, never a value
        assert any(v.endswith("/home/locust/.aws:ro") for v in raw and services[name]["volumes"])
    assert any(v.endswith(":/reports") for v in services["master"]["volumes"])
    assert "serve" in services["endpoint"]["command"] and "0.0.0.0" in services["endpoint"]["command"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "AWS_SECRET" not in dockerfile and "COPY . " not in dockerfile and "USER locust" in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".aws", ".env", "reports"} <= set(ignored)


def test_interpolation_follows_compose_rules():
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("${SET:-d} ${EMPTY:-d} ${UNSET:-d}", env) == "x d d"
    assert interpolate("${SET-d} ${EMPTY-d} ${UNSET-d}", env) == "x  d"


# -- the topology, run ---------------------------------------------------------------------------

def test_compose_services_as_processes_run_headless_to_the_end(tmp_path):
    topo = demo_topology(tmp_path)
    try:
        start_cluster(topo, workers=2)
        master = topo.processes["master"]
        wait_exit(master, 60)
        served = endpoint_stats(topo)
    finally:
        topo.stop_all()
    assert master.returncode == 0, topo.log("master")[-3000:]
    run = tmp_path / "reports" / "run"
    for name in ("summary.json", "timeline.jsonl", "locust_stats.csv", "locust_stats_history.csv",
                 "locust_report.html"):
        assert (run / name).exists(), name
    summary = json.loads((run / "summary.json").read_text())
    assert summary["endpoint"] == "sm-locust-demo"
    totals = summary["totals"]
    assert totals["requests"] > 100 and totals["failures"] == 0
    # the master's merged totals == what the endpoint served, but for requests in flight at the stop
    in_flight = 4 * 2
    assert 0 <= served["requests"] - totals["requests"] <= in_flight, (served["requests"], totals["requests"])
    assert summary["workers"]["expected"] == 2 and summary["workers"]["connected"] == 2
    assert summary["workers"]["lost"] == []
    assert summary["steps"] and summary["steps"][0]["users"] == 4
