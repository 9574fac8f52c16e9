"""The Grafana dashboard, its provisioning, Prometheus and docker-compose agree with each
other and with the metrics a live collector really serves (there is no Docker here)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlparse

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from collector import BackgroundCollector
from tests.collector.test_live_metrics import send_chat_trace, wait_for

REPO = Path(__file__).resolve().parents[1]
GRAFANA = REPO / "collector" / "grafana"
#: PromQL functions and keywords, which look like names in an expression.
_PROMQL_WORDS = {
    "histogram_quantile", "sum", "by", "rate", "scalar", "le", "without", "avg", "max",
    "min", "count", "increase", "irate", "on", "ignoring", "group_left", "group_right",
}  # fmt: skip


def _compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]


def _mounts(service: dict) -> dict[str, str]:
    """Container path -> host path of a service's volumes."""
    out = {}
    for volume in service.get("volumes", []):
        host, container = volume.split(":")[:2]
        out[container] = host
    return out


def _dashboard() -> dict:
    return json.loads((GRAFANA / "dashboards" / "hoptrace.json").read_text())


def _queries(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"]]
    return exprs


def _metric_names(expr: str) -> set[str]:
    """The metric names an expression reads (label names inside braces and by () left out)."""
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\b(by|without)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"label_values\(([a-z_:]+),[^)]*\)", r"\1", expr)
    return {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr) if w not in _PROMQL_WORDS}


def test_prometheus_scrapes_the_hoptrace_collector_of_the_compose_file():
    services = _compose()
    prometheus = services["prometheus"]
    config_path = _arg_value(prometheus["command"], "--config.file")
    host_config = _mounts(prometheus)[config_path]
    config = yaml.safe_load((REPO / host_config).read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    (target,) = job["static_configs"][0]["targets"]
    host, port = target.split(":")
    collector = services["hoptrace-collector"]
    assert host == "hoptrace-collector" and collector["entrypoint"] == ["hoptrace", "collect"]
    command = collector["command"]
    assert command[command.index("--port") + 1] == port and "--live-metrics" in command
    assert "9090:9090" in prometheus["ports"]


def _arg_value(command: list[str], flag: str) -> str:
    for arg in command:
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return command[command.index(flag) + 1]


def test_grafana_is_provisioned_with_the_prometheus_and_the_dashboard():
    services = _compose()
    grafana = _mounts(services["grafana"])
    provisioning = REPO / grafana["/etc/grafana/provisioning"]
    assert provisioning == GRAFANA / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    (source,) = datasources["datasources"]
    url = urlparse(source["url"])
    assert source["type"] == "prometheus" and url.hostname == "prometheus"
    assert f"{url.port}:{url.port}" in services["prometheus"]["ports"]
    providers = yaml.safe_load((provisioning / "dashboards" / "hoptrace.yaml").read_text())
    (provider,) = providers["providers"]
    folder = provider["options"]["path"]
    assert REPO / grafana[folder] == GRAFANA / "dashboards"
    dashboard = _dashboard()
    used = {t["datasource"]["uid"] for p in dashboard["panels"] for t in p["targets"]}
    assert used == {source["uid"]}
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith(folder) and (GRAFANA / "dashboards" / Path(home).name).exists()


def test_the_dashboard_shows_shares_percentiles_tokens_and_errors():
    queries = " ".join(_queries(_dashboard()))
    assert (
        "hoptrace_stage_seconds_total" in queries
        and "hoptrace_trace_duration_seconds_sum" in queries
    )
    for metric in ("hoptrace_trace_duration_seconds_bucket", "hoptrace_trace_ttft_seconds_bucket"):
        for quantile in ("0.5", "0.9"):
            assert f"histogram_quantile({quantile}, sum by (le, route) (rate({metric}" in queries
            assert f"histogram_quantile({quantile}, sum by (le, model) (rate({metric}" in queries
    assert "hoptrace_tokens_total" in queries and "hoptrace_trace_errors_total" in queries


def test_every_metric_and_label_the_dashboard_queries_is_served_by_a_live_collector(tmp_path):
    with BackgroundCollector(tmp_path / "spans.db", live_metrics=True) as collector:
        send_chat_trace(collector.endpoint, error=True)
        wait_for(
            collector.endpoint + "/metrics",
            "hoptrace_live_traces_attributed_total",
            {"how": "complete"},
            1,
        )
        text = httpx.get(collector.endpoint + "/metrics").text
    served: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            served.setdefault(sample.name, set()).update(sample.labels)
    queries = _queries(_dashboard())
    wanted = set().union(*map(_metric_names, queries))
    assert len(wanted) >= 8
    assert wanted <= set(served), wanted - set(served)
    for expr in queries:  # every label a query filters or groups on exists on its metrics
        labels = set(re.findall(r"([a-z_]+)=~", expr))
        for group in re.findall(r"by \(([^)]*)\)", expr):
            labels |= {x.strip() for x in group.split(",")} - {"le"}
        names = _metric_names(expr)
        filtered = set(re.findall(r"([a-z_]+)=~", expr))
        for name in names:  # the dashboard's filters apply to every metric they are on
            if "{" in expr:
                assert filtered <= served[name] or "hoptrace_live" in name, (expr, name)
        on_some = set().union(*(served[name] for name in names))
        assert labels <= on_some, (expr, labels - on_some)
