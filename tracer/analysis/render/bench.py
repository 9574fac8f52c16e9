"""A bench sweep as JSON (``docs/bench.md``) and as a table with its knee."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracer.analysis.aggregate import Stats
from tracer.analysis.render.json_out import number, stats_dict
from tracer.analysis.render.sections import Section, fmt_ms

if TYPE_CHECKING:  # tracer.bench imports httpx: not for every report
    from tracer.analysis.checks.sweep import LevelSlo, SweepSlo
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
    """Each level's judgement, by the level's ``id`` (the SLO judges them in
    concurrency order, which an open loop's levels, of one cap, share)."""
    if result.slo is None:
        return {}
    ordered = sorted(result.levels, key=lambda lv: lv.concurrency)
    return {id(lv): judged for lv, judged in zip(ordered, result.slo.levels, strict=True)}


def _open_dict(lv: Any) -> dict[str, Any]:
    """An open-loop level's own keys (none for a closed loop's)."""
    if lv.rate_per_s is None:
        return {}
    figures = lv.open_loop() or {}
    return {
        "rate_per_s": number(lv.rate_per_s),
        "arrivals": lv.arrivals,
        "max_concurrency": lv.concurrency or None,
        "answers_per_s": number(lv.answer_rate()),
        **{key: stats_dict(figures.get(key), _KEYS) for key in _OPEN_KEYS},
    }


_OPEN_KEYS = ("e2e_from_intended_ms", "send_lag_ms", "queue_ms")


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
                "slo": _level_slo(judged.get(id(lv))),
                **_open_dict(lv),
            }
            for lv in result.levels
        ],
        "slo": _sweep_slo(result.slo),
        "rate_knee": None
        if result.rate_knee is None
        else {
            "rate_per_s": number(result.rate_knee.rate_per_s),
            "answers_per_s": number(result.rate_knee.requests_per_s),
            "from_rate_per_s": _maybe(result.rate_knee.from_rate_per_s),
        },
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
                str(lv.concurrency) if lv.rate_per_s is None else f"{lv.rate_per_s:g}/s",
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
                *_slo_cells(judged.get(id(lv)), result.slo is not None),
            ]
        )
    for lv in result.levels:
        for status, example in lv.error_examples().items():
            head.notes.append(f"{_level_name(lv)} {status}: {example}")
    opened = [lv for lv in result.levels if lv.rate_per_s is not None]
    if opened:
        head.headers[0] = "rate"
        head.notes.append(_rate_knee_note(result))
        _open_notes(result, head, judged)
        return [head, _open_section(opened)]
    head.notes.append(_knee_note(result))
    if result.slo is not None:
        head.notes.append(_slo_note(result.slo))
    head.notes.extend(result.notes)
    head.notes.append(
        f"traces carry hoptrace.run = {result.run}-c<concurrency> (warm-up: {result.run}-warmup)"
    )
    return [head]


def _level_name(lv: Any) -> str:
    return f"c={lv.concurrency}" if lv.rate_per_s is None else f"{lv.rate_per_s:g}/s"


def _open_notes(result: BenchResult, head: Section, judged: dict[int, LevelSlo]) -> None:
    """An open-loop sweep's notes under its table."""
    if result.slo is not None:
        target = result.slo.attainment_target
        met = [lv.rate_per_s or 0.0 for lv in result.levels if judged[id(lv)].attainment >= target]
        where = f"the highest rate that meets it is {max(met):g}/s" if met else "no rate meets it"
        head.notes.append(
            f"SLO {result.slo.slo.describe()}: {where} (at least {target * 100:g}% of its "
            "requests succeed within every limit)"
        )
    head.notes.extend(result.notes)
    head.notes.append(
        f"traces carry hoptrace.run = {result.run}-r<rate> (warm-up: {result.run}-warmup) and "
        "hoptrace.bench.rate: the load model replays them as an open loop"
    )


def _open_section(levels: list[Any]) -> Section:
    """Per open-loop level: latency from the intended send time beside the actual
    send's, how late the client sent, and the wait for a slot."""
    out = Section(
        "Open loop: latency from each request's intended send time",
        ["rate", "arrivals", "answers/s", "P50 ms", "P90 ms", "P50 from intended",
         "P90 from intended", "send lag P50", "send lag P99", "queue P50", "queue P90"],
    )  # fmt: skip
    for lv in levels:
        figures = lv.open_loop() or {}
        e2e = lv.e2e() if lv.ok else None
        late, lag, queue = (figures.get(k) for k in _OPEN_KEYS)
        out.rows.append(
            [f"{lv.rate_per_s:g}/s", lv.arrivals or "-", f"{lv.answer_rate():,.2f}",
             _cell(e2e, "p50"), _cell(e2e, "p90"), _cell(late, "p50"), _cell(late, "p90"),
             _cell(lag, "p50"), _cell(lag, "p99"), _cell(queue, "p50"), _cell(queue, "p90")]
        )  # fmt: skip
    out.notes.append(
        "from intended: end to end from when the schedule meant to send the request (no "
        "coordinated omission); send lag: how late the client sent it, its wait for a "
        "slot of --max-concurrency aside; queue: that wait"
    )
    return out


def _rate_knee_note(result: BenchResult) -> str:
    from tracer.analysis.checks.sweep import FOLLOW_SHARE

    knee = result.rate_knee
    if knee is None:
        return (
            f"no knee: at every rate the answers came at least {FOLLOW_SHARE:.0%} as fast "
            "as the requests were sent, or the latency did not grow through the level"
        )
    below = f" ({knee.from_rate_per_s:g}/s was followed)" if knee.from_rate_per_s else ""
    return (
        f"knee at {knee.rate_per_s:g} requests/s: answered at {knee.requests_per_s:,.2f}/s, "
        f"below {FOLLOW_SHARE:.0%} of the rate sent, while the latency from the intended send "
        f"time grew through the level{below}; from here the queue grows"
    )


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
    from tracer.analysis.checks.sweep import FLAT_SHARE, LATENCY_GROWTH

    knee = result.knee
    if knee is None and len(result.levels) < 2:
        return "no knee: one concurrency level; give --concurrency two or more (1,2,4,8)"
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
