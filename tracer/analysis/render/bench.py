"""A bench sweep as JSON (``docs/bench.md``) and as a table with its knee."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracer.analysis.aggregate import Stats
from tracer.analysis.render.json_out import number, stats_dict
from tracer.analysis.render.sections import Section, fmt_ms

if TYPE_CHECKING:  # tracer.bench imports httpx: not for every report
    from tracer._sweep import LevelSlo, SweepSlo
    from tracer.bench import BenchResult

__all__ = ["bench_dict", "bench_sections"]

_KEYS = ("n", "mean", "p50", "p90", "p99")


def _level_slo(level: LevelSlo | None) -> dict[str, Any] | None:
    if level is None:
        return None
    return {
        "requests": level.requests,
        "meeting": level.meeting,
        "attainment": number(level.attainment),
        "goodput_per_s": number(level.goodput_per_s),
        "attainment_by_metric": {m: number(v) for m, v in level.attainment_by_metric},
    }


def _sweep_slo(sweep: SweepSlo | None) -> dict[str, Any] | None:
    if sweep is None:
        return None
    return {
        "limits_ms": {m: number(v) for m, v in sweep.slo.limits_ms},
        "attainment_target": number(sweep.attainment_target),
        "max_concurrency": sweep.max_concurrency,
    }


def _slo_by_level(result: BenchResult) -> dict[int, LevelSlo]:
    return {} if result.slo is None else {lv.concurrency: lv for lv in result.slo.levels}


def bench_dict(result: BenchResult) -> dict[str, Any]:
    """The JSON shape of ``hoptrace bench --format json``."""
    judged = _slo_by_level(result)
    return {
        "url": result.url,
        "max_tokens": result.max_tokens,
        "stream": result.stream,
        "run": result.run,
        "levels": [
            {
                "concurrency": lv.concurrency,
                "run": lv.run,
                "requests": len(lv.samples),
                "ok": len(lv.ok),
                "errors": lv.errors(),
                "error_examples": lv.error_examples(),
                "e2e_ms": stats_dict(lv.e2e(), _KEYS),
                "ttfc_ms": stats_dict(lv.ttfc(), _KEYS) if result.stream else None,
                "itl_ms": stats_dict(lv.itl(), _KEYS) if result.stream else None,
                "output_tokens_per_s": number(lv.output_tokens_per_s()),
                "requests_per_s": number(lv.requests_per_s()),
                "slo": _level_slo(judged.get(lv.concurrency)),
            }
            for lv in result.levels
        ],
        "slo": _sweep_slo(result.slo),
        "knee": None
        if result.knee is None
        else {
            "concurrency": result.knee.concurrency,
            "p90_ratio": number(result.knee.p90_ratio),
            "stage": result.knee.stage,
            "stage_growth_ms": None
            if result.knee.stage_growth_ms is None
            else number(result.knee.stage_growth_ms),
            "from_concurrency": result.knee.from_concurrency,
            "p50_ratio": _maybe(result.knee.p50_ratio),
            "marginal_share": _maybe(result.knee.marginal_share),
        },
        "notes": list(result.notes),
    }


def _cell(s: Stats | None, key: str) -> str:
    return "-" if s is None or not s.n else fmt_ms(getattr(s, key))


def bench_sections(result: BenchResult) -> list[Section]:
    """The table of a sweep, one row per level, with the knee and the notes under it."""
    head = Section(
        f"Benchmark {result.url} (max_tokens {result.max_tokens}, "
        f"{'streaming' if result.stream else 'not streaming'})",
        [
            "concurrency",
            "ok/requests",
            "errors",
            "P50 ms",
            "P90 ms",
            "P99 ms",
            "TTFC P50",
            "TTFC P90",
            "ITL P50",
            "ITL P90",
            "tokens/s",
            "req/s",
            *(["goodput/s", "SLO met"] if result.slo is not None else []),
        ],
    )
    judged = _slo_by_level(result)
    for lv in result.levels:
        e2e = lv.e2e() if lv.ok else None
        ttfc = lv.ttfc() if result.stream else None
        itl = lv.itl() if result.stream else None
        head.rows.append(
            [
                str(lv.concurrency),
                f"{len(lv.ok)}/{len(lv.samples)}",
                ", ".join(f"{k}: {v}" for k, v in lv.errors().items()) or "-",
                _cell(e2e, "p50"),
                _cell(e2e, "p90"),
                _cell(e2e, "p99"),
                _cell(ttfc, "p50"),
                _cell(ttfc, "p90"),
                _cell(itl, "p50"),
                _cell(itl, "p90"),
                f"{lv.output_tokens_per_s():,.1f}",
                f"{lv.requests_per_s():,.2f}",
                *_slo_cells(judged.get(lv.concurrency), result.slo is not None),
            ]
        )
    for lv in result.levels:
        for status, example in lv.error_examples().items():
            head.notes.append(f"c={lv.concurrency} {status}: {example}")
    head.notes.append(_knee_note(result))
    if result.slo is not None:
        head.notes.append(_slo_note(result.slo))
    head.notes.extend(result.notes)
    head.notes.append(
        f"traces carry hoptrace.run = {result.run}-c<concurrency> (warm-up: {result.run}-warmup)"
    )
    return [head]


def _slo_cells(level: LevelSlo | None, judged: bool) -> list[str]:
    if not judged:
        return []
    if level is None:
        return ["-", "-"]
    return [f"{level.goodput_per_s:,.2f}", f"{level.attainment * 100:.1f}%"]


def _slo_note(sweep: SweepSlo) -> str:
    target = f"{sweep.attainment_target * 100:g}%"
    best = sweep.max_concurrency
    where = (
        f"the highest level that meets it is {best}" if best is not None else "no level meets it"
    )
    return (
        f"SLO {sweep.slo.describe()}: {where} (a level meets it when at least {target} "
        "of its requests succeed within every limit; goodput/s counts those requests per "
        "second)"
    )


def _maybe(value: float | None) -> float | None:
    return None if value is None else number(value)


def _knee_note(result: BenchResult) -> str:
    from tracer._sweep import FLAT_SHARE, LATENCY_GROWTH

    knee = result.knee
    if knee is None:
        return (
            f"no knee: at every level the added clients each bought at least "
            f"{FLAT_SHARE:.0%} of one client's requests/s at the lowest level, or "
            f"latency stayed under {LATENCY_GROWTH:g}x the lowest level's"
        )
    text = f"knee at concurrency {knee.concurrency}"
    if knee.from_concurrency is not None and knee.marginal_share is not None:
        text += (
            f": the clients added from {knee.from_concurrency} each bought "
            f"{knee.marginal_share:.0%} of one client's requests/s at the lowest level"
        )
    from tracer.analysis.render.sections import fmt_ratio

    grown = f"P90 is {fmt_ratio(knee.p90_ratio)}"
    if knee.p50_ratio is not None:
        grown = f"P50 is {fmt_ratio(knee.p50_ratio)} and P90 {fmt_ratio(knee.p90_ratio)}"
    text += f" while {grown} the lowest level's; more clients wait in the service from here"
    if knee.stage:
        text += f"; the stage that grew most: {knee.stage}"
    return text
