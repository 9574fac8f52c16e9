"""docker-compose.yml and the Collector config agree (there is no Docker engine here)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import yaml

REPO = Path(__file__).resolve().parents[1]


def _load():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    text = (REPO / "collector" / "otelcol-config.yaml").read_text()
    # As docker-compose runs it: no HOPTRACE_* variable set, every ${env:NAME:-default}
    # is its default (the real Collector reads it so: tests/backends/test_configs.py).
    config = yaml.safe_load(re.sub(r"\$\{env:[A-Z_]+:-([^}]*)\}", r"\1", text))
    assert "${" not in str(config)
    return compose["services"], config


def _arg(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_services_export_to_the_collectors_otlp_http_receiver():
    services, config = _load()
    http = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    host, port = http.rsplit(":", 1)
    assert host == "0.0.0.0"  # reachable from other containers (localhost since v0.104)
    for name in ("gateway", "app", "model"):
        url = urlparse(services[name]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"])
        assert url.hostname == "otel-collector" and str(url.port) == port
        assert services[name]["environment"]["OTEL_SERVICE_NAME"] == name
        assert _arg(services[name]["command"], "--host") == "0.0.0.0"


def test_collector_exports_to_jaeger_a_mounted_file_and_the_hoptrace_collector():
    services, config = _load()
    jaeger = config["exporters"]["otlp/jaeger"]["endpoint"]
    assert jaeger == "jaeger:4317" and "jaeger" in services
    assert config["exporters"]["otlp/jaeger"]["tls"]["insecure"] is True
    pipeline = config["service"]["pipelines"]["traces"]
    assert set(pipeline["exporters"]) == {"otlp/jaeger", "file", "otlphttp/hoptrace"}
    hoptrace = urlparse(config["exporters"]["otlphttp/hoptrace"]["endpoint"])
    command = services["hoptrace-collector"]["command"]
    assert hoptrace.hostname == "hoptrace-collector"
    assert str(hoptrace.port) == _arg(command, "--port") and _arg(command, "--host") == "0.0.0.0"
    assert pipeline["receivers"] == ["otlp"]
    file_dir = str(Path(config["exporters"]["file"]["path"]).parent)
    volumes = services["otel-collector"]["volumes"]
    assert any(v.split(":")[1] == file_dir for v in volumes)
    config_mount = [v for v in volumes if v.startswith("./collector/otelcol-config.yaml")]
    assert (
        config_mount and config_mount[0].split(":")[1] in services["otel-collector"]["command"][0]
    )
    assert "16686:16686" in services["jaeger"]["ports"]


def test_each_upstream_points_at_a_service_and_its_port():
    services, _ = _load()
    for name, target in (("gateway", "app"), ("app", "model")):
        url = urlparse(_arg(services[name]["command"], "--upstream"))
        assert url.hostname == target
        assert str(url.port) == _arg(services[target]["command"], "--port")
    assert "8000:8000" in services["gateway"]["ports"]


def test_the_client_benchmarks_the_gateway_once_it_is_healthy():
    services, config = _load()
    client = services["client"]
    assert client["entrypoint"] == ["hoptrace", "bench"]
    url = urlparse(client["command"][0])
    assert url.hostname == "gateway" and url.path == "/v1"
    assert str(url.port) == _arg(services["gateway"]["command"], "--port")
    assert _arg(client["command"], "--api-key") == _arg(services["gateway"]["command"], "--api-key")
    assert client["depends_on"]["gateway"]["condition"] == "service_healthy"
    probe = " ".join(services["gateway"]["healthcheck"]["test"])
    assert f":{_arg(services['gateway']['command'], '--port')}/" in probe
    http = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    endpoint = urlparse(client["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert endpoint.hostname == "otel-collector" and str(endpoint.port) == http.rsplit(":", 1)[1]
    assert client["environment"]["OTEL_SERVICE_NAME"] == "client"


def _required(go_mod: str, module: str) -> str:
    text = (REPO / "backends" / go_mod / "go.mod").read_text()
    return re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", text, re.M).group(1)


def test_the_images_are_the_releases_the_tests_build_and_run():
    # scripts/build-backends builds these from their Go modules (docs/backends.md); the
    # tests run those builds, so compose pulls the same releases.
    services, _ = _load()
    images = {name: s["image"].rsplit(":", 1)[1] for name, s in services.items() if "image" in s}
    script = (REPO / "scripts" / "build-backends").read_text()
    jaeger_v2 = re.search(r"version\.latestVersion=v(\S+)", script).group(1)
    assert _required("jaeger", "github.com/jaegertracing/jaeger") == "v1.75.0"
    assert images["jaeger"] == jaeger_v2 == "2.12.0"
    otelcol = _required("otelcol", "go.opentelemetry.io/collector/otelcol")
    assert images["otel-collector"] == otelcol.lstrip("v")
    # Prometheus 3.x.y is the Go module's v0.3xx.y (v0.316.0: 3.16.0).
    prom = re.fullmatch(
        r"v0\.3(\d\d)\.(\d+)", _required("prometheus", "github.com/prometheus/prometheus")
    )
    assert images["prometheus"] == f"v3.{int(prom.group(1))}.{prom.group(2)}"
