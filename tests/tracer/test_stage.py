"""The stage decorator and context manager, on all six shapes."""

from __future__ import annotations

import asyncio
import inspect

import httpx
import pytest
from fastapi import Depends, FastAPI
from opentelemetry.trace import StatusCode

import tracer
from tracer import attributes as attrs
from tracer.testing import capture_spans


def test_stage_marks_sync_function_and_keeps_result():
    @tracer.stage("auth", tier="gold")
    def check(key: str) -> str:
        return key.upper()

    with capture_spans() as spans:
        assert check("k") == "K"
    span = spans.named("check")  # not test_...<locals>.check: Jaeger shows this name
    assert span.attributes[attrs.STAGE] == "auth"
    assert span.attributes["tier"] == "gold"


def test_stage_marks_coroutine():
    @tracer.stage("context")
    async def build() -> int:
        await asyncio.sleep(0)
        return 7

    with capture_spans() as spans:
        assert asyncio.run(build()) == 7
    assert spans.stages() == ["context"]


def test_stage_generator_records_first_token_and_chunks():
    @tracer.stage("inference")
    def stream():
        yield "a"
        yield "b"
        yield "c"

    with capture_spans() as spans:
        assert list(stream()) == ["a", "b", "c"]
    span = spans.named(stream.__name__)
    assert span.attributes[attrs.CHUNKS] == 3
    events = [e for e in span.events if e.name == attrs.FIRST_TOKEN_EVENT]
    assert len(events) == 1
    ttfc = span.attributes[attrs.GEN_AI_TIME_TO_FIRST_CHUNK]
    assert ttfc == pytest.approx((events[0].timestamp - span.start_time) / 1e9)
    assert span.start_time <= events[0].timestamp <= span.end_time


def test_stage_async_generator_ends_span_when_closed_early():
    @tracer.stage("return")
    async def stream():
        for i in range(10):
            yield i

    async def consume() -> list[int]:
        out = []
        gen = stream()
        async for item in gen:
            out.append(item)
            if item == 1:
                break
        await gen.aclose()
        return out

    with capture_spans() as spans:
        assert asyncio.run(consume()) == [0, 1]
    span = spans.named(stream.__name__)
    assert span.attributes[attrs.STREAM_CLOSED_EARLY] is True
    assert span.attributes[attrs.CHUNKS] == 2
    assert span.end_time is not None


def test_stage_sync_context_manager_yields_span_and_records_error():
    with capture_spans() as spans:
        with pytest.raises(KeyError) as info:
            with tracer.stage("postprocess") as span:
                span.set_attribute("checked", True)
                raise KeyError("missing field")
    assert info.type is KeyError  # re-raised unchanged
    span = spans.named("postprocess")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["checked"] is True
    assert any(e.name == "exception" for e in span.events)


def test_stage_async_context_manager_nests_under_current_span():
    async def run() -> None:
        with tracer.stage("gateway"):
            async with tracer.stage("auth"):
                await asyncio.sleep(0)

    with capture_spans() as spans:
        asyncio.run(run())
    gateway, auth = spans.named("gateway"), spans.named("auth")
    assert auth.parent.span_id == gateway.context.span_id


def test_stage_reraises_user_exception_unchanged_from_coroutine():
    class Boom(Exception):
        pass

    err = Boom("x")

    @tracer.stage("inference")
    async def fail():
        raise err

    with capture_spans() as spans:
        with pytest.raises(Boom) as info:
            asyncio.run(fail())
    assert info.value is err
    assert spans.named(fail.__name__).status.status_code == StatusCode.ERROR


def test_stage_generator_forwards_thrown_exception_to_inner_generator():
    seen = []

    @tracer.stage("auth")
    def dependency():
        try:
            yield "key"
        except ValueError as exc:
            seen.append(str(exc))
            raise

    gen = dependency()
    assert next(gen) == "key"
    with pytest.raises(ValueError):
        gen.throw(ValueError("endpoint failed"))
    assert seen == ["endpoint failed"]


def test_stage_keeps_signature_for_fastapi_endpoint_and_dependency():
    @tracer.stage("auth")
    async def api_key(x_key: str = "none"):
        yield x_key

    app = FastAPI()

    @app.get("/items/{item_id}")
    @tracer.stage("context")
    async def read(item_id: int, q: str = "", key: str = Depends(api_key)) -> dict:
        return {"item": item_id, "q": q, "key": key}

    assert list(inspect.signature(read).parameters) == ["item_id", "q", "key"]
    assert inspect.isasyncgenfunction(api_key)

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.get("/items/3", params={"q": "z", "x_key": "abc"})

    with capture_spans() as spans:
        response = asyncio.run(call())
    assert response.status_code == 200
    assert response.json() == {"item": 3, "q": "z", "key": "abc"}
    assert sorted(spans.stages()) == ["auth", "context"]


def test_stage_rejects_empty_name():
    with pytest.raises(ValueError, match="stage name"):
        tracer.stage("")


def test_genai_helpers_set_semantic_convention_attributes():
    with capture_spans() as spans:
        with tracer.stage("inference", **tracer.genai_request("chat", "m1", max_tokens=16)):
            tracer.record_usage(input_tokens=12, output_tokens=16, finish_reasons=["stop"])
    span = spans.named("inference")
    assert span.attributes[attrs.GEN_AI_OPERATION_NAME] == "chat"
    assert span.attributes[attrs.GEN_AI_REQUEST_MODEL] == "m1"
    assert span.attributes[attrs.GEN_AI_MAX_TOKENS] == 16
    assert span.attributes[attrs.GEN_AI_INPUT_TOKENS] == 12
    assert span.attributes[attrs.GEN_AI_OUTPUT_TOKENS] == 16
    assert tuple(span.attributes[attrs.GEN_AI_RESPONSE_FINISH_REASONS]) == ("stop",)


def test_genai_helpers_record_what_one_set_attribute_per_key_records():
    usage = {
        "input_tokens": 12,
        "output_tokens": 16,
        "response_model": "m1",
        "finish_reasons": ["stop"],
    }
    latency = {
        "time_to_first_token_s": 0.07,
        "queue_s": 0.004,
        "prefill_s": 0.06,
        "decode_s": 1.18,
        "e2e_s": 1.3,
    }
    with capture_spans() as spans:
        with tracer.stage("inference", span_name="helpers", max_tokens=1) as span:
            span.set_attribute(attrs.GEN_AI_INPUT_TOKENS, 1)  # set again below: moves last
            tracer.record_engine_latency(**latency)
            tracer.record_usage(**usage)
        with tracer.stage("inference", span_name="by hand", max_tokens=1) as span:
            span.set_attribute(attrs.GEN_AI_INPUT_TOKENS, 1)
            for key, value in [
                (attrs.GEN_AI_LATENCY_TTFT, 0.07),
                (attrs.GEN_AI_LATENCY_QUEUE, 0.004),
                (attrs.GEN_AI_LATENCY_PREFILL, 0.06),
                (attrs.GEN_AI_LATENCY_DECODE, 1.18),
                (attrs.GEN_AI_LATENCY_E2E, 1.3),
                (attrs.GEN_AI_LATENCY_INFERENCE, 0.06 + 1.18),
                (attrs.GEN_AI_INPUT_TOKENS, 12),
                (attrs.GEN_AI_OUTPUT_TOKENS, 16),
                (attrs.GEN_AI_RESPONSE_MODEL, "m1"),
                (attrs.GEN_AI_RESPONSE_FINISH_REASONS, ["stop"]),
            ]:
                span.set_attribute(key, value)
    helpers, by_hand = spans.named("helpers"), spans.named("by hand")
    assert list(helpers.attributes.items()) == list(by_hand.attributes.items())
    assert len(helpers.attributes) == 12


def test_public_all_is_sorted_and_importable():
    import collector
    import tracer.analysis

    for module in (tracer, tracer.analysis, collector):
        assert list(module.__all__) == sorted(module.__all__)
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_one_stage_object_entered_by_two_concurrent_tasks_ends_each_tasks_own_span():
    # Task a enters first and leaves first while task b is still inside: a shared stack
    # on the instance would end b's span when a leaves, and a's span when b leaves.
    block = tracer.stage("context")

    async def main() -> None:
        a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def a() -> None:
            async with block as span:
                span.set_attribute("who", "a")
                a_in.set()
                await b_in.wait()
            a_out.set()

        async def b() -> None:
            await a_in.wait()
            async with block as span:
                span.set_attribute("who", "b")
                b_in.set()
                await a_out.wait()
                # a has left: b's span is still open and still the current one
                assert span.is_recording()
                assert tracer_span_is_current(span)

        await asyncio.gather(a(), b())

    def tracer_span_is_current(span) -> bool:
        from opentelemetry import trace

        return trace.get_current_span() is span

    with capture_spans() as spans:
        asyncio.run(main())
    ended = {s.attributes["who"]: s for s in spans.spans}
    assert set(ended) == {"a", "b"}
    assert ended["a"].end_time < ended["b"].end_time


def _forms(fail: bool):
    """Each form of ``stage`` around the same work: a child span started inside, and
    the current span seen between two items of a stream; ``fail`` raises after."""
    from opentelemetry import trace

    seen: dict[str, object] = {}

    def work() -> None:
        with trace.get_tracer("test").start_as_current_span("child"):
            pass
        if fail:
            raise LookupError("no such key")

    @tracer.stage("s", span_name="function")
    def function():
        work()
        return 1

    @tracer.stage("s", span_name="coroutine")
    async def coroutine():
        work()
        return 1

    @tracer.stage("s", span_name="generator")
    def generator():
        yield 1
        work()
        yield 2

    @tracer.stage("s", span_name="async generator")
    async def async_generator():
        yield 1
        work()
        yield 2

    def block():
        with tracer.stage("s", span_name="block"):
            work()
            return 1

    async def async_block():
        async with tracer.stage("s", span_name="async block"):
            work()
            return 1

    def pull(items):
        out = []
        for item in items:
            seen.setdefault("between items", trace.get_current_span())
            out.append(item)
        return sum(out)

    async def apull(items):
        out = []
        async for item in items:
            seen.setdefault("between items", trace.get_current_span())
            out.append(item)
        return sum(out)

    return seen, {
        "function": function,
        "coroutine": lambda: asyncio.run(coroutine()),
        "generator": lambda: pull(generator()),
        "async generator": lambda: asyncio.run(apull(async_generator())),
        "block": block,
        "async block": lambda: asyncio.run(async_block()),
    }


@pytest.mark.parametrize(
    "form", ["function", "coroutine", "generator", "async generator", "block", "async block"]
)
def test_every_form_runs_the_same_span_sequence(form):
    from opentelemetry import trace

    seen, forms = _forms(fail=False)
    with capture_spans() as spans:
        with trace.get_tracer("test").start_as_current_span("outer") as outer:
            result = forms[form]()
            after = trace.get_current_span()
    assert (result, after) == (3 if "generator" in form else 1, outer)
    span, child = spans.named(form), spans.named("child")
    assert child.parent.span_id == span.context.span_id  # attached while the work runs
    assert span.parent.span_id == outer.get_span_context().span_id
    assert span.status.status_code == StatusCode.UNSET
    assert [s.name for s in spans.spans] == ["child", form, "outer"]  # each ended once
    if "generator" in form:
        assert seen["between items"] is outer  # detached while the caller has the item
        assert span.attributes[attrs.CHUNKS] == 2
        assert [e.name for e in span.events] == [attrs.FIRST_TOKEN_EVENT]
    else:
        assert attrs.CHUNKS not in span.attributes and list(span.events) == []


@pytest.mark.parametrize(
    "form", ["function", "coroutine", "generator", "async generator", "block", "async block"]
)
def test_every_form_records_a_failure_and_ends_its_span(form):
    from opentelemetry import trace

    _, forms = _forms(fail=True)
    with capture_spans() as spans:
        with pytest.raises(LookupError, match="no such key"):
            forms[form]()
        after = trace.get_current_span()
    assert after is trace.INVALID_SPAN  # the context is restored on the way out
    span = spans.named(form)
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "LookupError: no such key"
    assert [e.name for e in span.events if e.name == "exception"] == ["exception"]
    assert span.end_time is not None
    if "generator" in form:
        assert span.attributes[attrs.CHUNKS] == 1


def test_a_cancelled_coroutine_stage_is_marked_cancelled_not_failed():
    @tracer.stage("inference")
    async def wait_forever():
        await asyncio.Event().wait()

    async def main() -> None:
        task = asyncio.create_task(wait_forever())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with capture_spans() as spans:
        asyncio.run(main())
    span = spans.named(wait_forever.__name__)
    assert span.attributes[attrs.CANCELLED] == "CancelledError"
    assert span.status.status_code == StatusCode.UNSET
    assert list(span.events) == []
