"""``hoptrace demo`` and ``hoptrace serve``: the demo chain from the command line."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import click

from tracer._errors import ConfigError

__all__ = ["register"]


def _wait_for_traces(store_path: Path, trace_ids: set[str], deadline_s: float = 20.0) -> None:
    """Poll the store, with a deadline, until every trace has spans of all three services.

    Each service process exports on its own batch timer, so a trace is complete only
    when gateway, app and model spans have all arrived.
    """
    import sqlite3

    needed = {(t, svc) for t in trace_ids for svc in ("gateway", "app", "model")}
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with sqlite3.connect(str(store_path)) as conn:
            rows = conn.execute(
                "SELECT DISTINCT trace_id, service FROM spans "
                "WHERE service IN ('gateway', 'app', 'model') AND stage IS NOT NULL"
            ).fetchall()
        if needed <= set(rows):
            return
        time.sleep(0.2)


def _subset(traceset: Any, trace_ids: set[str]) -> Any:
    from tracer.analysis import TraceSet

    return TraceSet({t: s for t, s in traceset.traces.items() if t in trace_ids}, traceset.warnings)


def register(group: click.Group) -> None:
    """Add ``demo`` and ``serve`` to the command group."""
    from tracer.cli import _emit, store_option

    @group.command()
    @click.option("--requests", default=40, show_default=True, help="Measured requests per run.")
    @click.option("--warmup", default=8, show_default=True, help="Warm-up requests per run.")
    @click.option("--concurrency", default=8, show_default=True)
    @click.option(
        "--speedup",
        default=100.0,
        show_default=True,
        help="How many times faster the candidate model is.",
    )
    @click.option(
        "--profile",
        default="seed",
        show_default=True,
        help="Latency profile: seed, lan or loopback.",
    )
    @click.option("--stream/--no-stream", default=True, show_default=True)
    @store_option
    @click.option(
        "--format",
        "fmt",
        type=click.Choice(("table", "markdown", "json", "html")),
        default="table",
        show_default=True,
        help="html: one page with both runs, the projection and the waterfalls (use -o).",
    )
    @click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE.")
    def demo(
        requests: int,
        warmup: int,
        concurrency: int,
        speedup: float,
        profile: str,
        stream: bool,
        store: str | None,
        fmt: str,
        output: str | None,
    ) -> None:
        """Run the traced demo chain twice (model as is, then K times faster) and show
        where the speedup went."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        import tracer
        from collector import default_store_path
        from demo_app.chain import Chain
        from demo_app.client import run_requests
        from demo_app.profiles import get_profile
        from tracer.analysis import analyze, compare, load, render, what_if

        if requests <= 0 or concurrency <= 0 or warmup < 0 or speedup <= 0:
            raise ConfigError(
                "--requests, --concurrency and --speedup must be positive, --warmup not negative"
            )
        get_profile(profile)
        store_path = Path(store) if store else default_store_path()
        os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "200")
        err = Console(stderr=True)
        demo_id = uuid.uuid4().hex[:8]
        started = time.monotonic()
        ids: dict[str, set[str]] = {}
        with Chain(store_path, profile=profile) as chain:
            tracer.setup(service_name="client", endpoint=chain.collector.endpoint)
            try:
                with Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    console=err,
                    transient=False,
                ) as progress:
                    for run, k in (("baseline", 1.0), ("candidate", speedup)):
                        chain.configure_model(speedup=k)
                        label = f"{demo_id}:{run}"
                        if warmup:
                            task = progress.add_task(f"{run}: warm-up", total=warmup)
                            run_requests(
                                chain.base_url,
                                chain.api_key,
                                requests=warmup,
                                concurrency=concurrency,
                                run=label + ":warmup",
                                stream=stream,
                                on_done=lambda _r, t=task: progress.advance(t),
                            )
                        task = progress.add_task(f"{run} (model x{k:g})", total=requests)
                        results = run_requests(
                            chain.base_url,
                            chain.api_key,
                            requests=requests,
                            concurrency=concurrency,
                            run=label,
                            stream=stream,
                            on_done=lambda _r, t=task: progress.advance(t),
                        )
                        ids[run] = {r.trace_id for r in results if r.status == 200}
                        failed = [r for r in results if r.status != 200 or r.error]
                        if failed:
                            err.print(
                                f"{run}: {len(failed)} requests failed "
                                f"(first: {failed[0].status} {failed[0].error})"
                            )
                tracer.force_flush()
                _wait_for_traces(store_path, ids["baseline"] | ids["candidate"])
            finally:
                tracer.shutdown()
        # Only this demo's traces: the default store keeps every earlier run too.
        traces = load([store_path], since=f"{time.monotonic() - started + 60:.0f}s")
        base = analyze(_subset(traces, ids["baseline"]))
        cand = analyze(_subset(traces, ids["candidate"]))
        projection = what_if(_subset(traces, ids["baseline"]), "inference", speedup)
        comparison = compare(base, cand)
        if fmt == "json":
            _emit(
                render.dumps(
                    {
                        "baseline": render.analysis_dict(base),
                        "candidate": render.analysis_dict(cand),
                        "whatif": render.whatif_dict(projection),
                        "compare": render.comparison_dict(comparison),
                        "store": str(store_path),
                    }
                ),
                output,
            )
            return
        if fmt == "html":
            page = render.Report(
                title=f"hoptrace demo: the model {speedup:g}x faster (profile {profile})",
                source=f"{store_path}, runs {demo_id}:baseline and {demo_id}:candidate",
                analysis=cand,
                whatif=projection,
                comparison=comparison,
                waterfalls=render.exemplar_waterfalls(cand, _subset(traces, ids["candidate"])),
            )
            _emit(render.to_html(page), output)
            return
        sections = render.analysis_sections(
            base, title=f"Baseline: the model as it is ({base.traces} traces, profile {profile})"
        )
        sections += render.analysis_sections(
            cand, title=f"Candidate: the model {speedup:g}x faster ({cand.traces} traces)"
        )
        sections += render.whatif_sections(projection)
        sections += render.comparison_sections(comparison)
        measured = base.e2e.p50 / cand.e2e.p50 if cand.e2e.p50 else float("inf")
        summary = render.Section("The answer")
        summary.notes.append(
            f"model {speedup:g}x faster: projected end-to-end {projection.realized['p50']:.2f}x "
            f"at P50 ({projection.after.p50:,.0f} ms), measured {measured:.2f}x "
            f"({base.e2e.p50:,.0f} -> {cand.e2e.p50:,.0f} ms)"
        )
        rest = [g for g in cand.groups if g.name != "inference"][:4]
        summary.notes.append(
            "where the time went after the speedup: "
            + ", ".join(f"{g.name} {g.share * 100:.0f}%" for g in rest)
        )
        summary.notes.append(
            f"P50 / P90 exemplar traces: {cand.exemplars['p50']} / {cand.exemplars['p90']} "
            "(Jaeger: http://localhost:16686/trace/<id>)"
        )
        summary.notes.append(
            f"spans are in {store_path}: hoptrace analyze {store_path} --run '{demo_id}:baseline'; "
            f"pictures: hoptrace report {store_path} --run '{demo_id}:candidate' -o report.html"
        )
        sections.append(summary)
        text = render.to_markdown(sections) if fmt == "markdown" else render.to_table(sections)
        _emit(text, output)

    @group.command()
    @click.option("--port", default=8000, show_default=True, help="Gateway port.")
    @click.option("--otlp-port", default=4318, show_default=True)
    @click.option("--api-key", default="hoptrace-demo-key", show_default=True)
    @click.option("--rate-limit", default=0.0, help="Requests per second per key (burst = RPS).")
    @click.option("--speedup", default=1.0, show_default=True)
    @click.option("--profile", default="seed", show_default=True)
    @store_option
    @click.option(
        "--max-concurrency",
        default=0,
        show_default=True,
        help="Gateway worker pool size (0: unlimited); small pools show a knee in bench.",
    )
    @click.option(
        "--upstream",
        help="An OpenAI-compatible base URL to use instead of the "
        "simulated model (vLLM, llama.cpp, Ollama), e.g. http://127.0.0.1:8080/v1",
    )
    def serve(
        port: int,
        otlp_port: int,
        api_key: str,
        rate_limit: float,
        speedup: float,
        profile: str,
        store: str | None,
        max_concurrency: int,
        upstream: str | None,
    ) -> None:
        """Start the traced chain and the collector, and stay up until Ctrl-C."""
        from collector import default_store_path
        from demo_app.chain import Chain
        from demo_app.profiles import get_profile

        get_profile(profile)
        store_path = Path(store) if store else default_store_path()
        os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "500")
        chain = Chain(
            store_path,
            profile=profile,
            speedup=speedup,
            api_key=api_key,
            rate_limit=rate_limit,
            otlp_port=otlp_port,
            upstream=upstream,
            max_concurrency=max_concurrency,
        )
        chain.ports["gateway"] = port
        with chain:
            click.echo(
                f"OpenAI base URL:  {chain.base_url}\nAPI key:          {api_key}\n"
                f"OTLP collector:   {chain.collector.endpoint} (store {store_path})\n"
                "Ctrl-C to stop",
                err=True,
            )
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                click.echo("stopping", err=True)
