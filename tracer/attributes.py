"""Span attribute and event names hoptrace writes and reads (``docs/analysis.md``).

Every key is a constant here; no module spells one inline.
"""

from __future__ import annotations

__all__ = [
    "BENCH_ARRIVALS",
    "BENCH_CONCURRENCY",
    "BENCH_QUEUE_NS",
    "BENCH_RATE",
    "BENCH_SEND_LAG_NS",
    "BENCH_STATUS",
    "CANCELLED",
    "CANONICAL_STAGES",
    "CHUNKS",
    "CHUNK_EVENT",
    "CONTENT_KEYS",
    "CONTENT_PREFIXES",
    "DERIVED_NETWORK",
    "DERIVED_OTHER",
    "EVENT_NAME",
    "EVENT_TIME_PREFIX",
    "FALLBACK_REASON",
    "FALLBACK_TIER",
    "FIRST_TOKEN_EVENT",
    "GEN_AI_CACHED_TOKENS",
    "GEN_AI_CACHE_CREATION_TOKENS",
    "GEN_AI_CACHE_READ_TOKENS",
    "GEN_AI_CACHE_WRITE_TOKENS",
    "GEN_AI_COMPLETION_TOKENS",
    "GEN_AI_DETAILS_EVENT",
    "GEN_AI_INPUT_TOKENS",
    "GEN_AI_LATENCY_DECODE",
    "GEN_AI_LATENCY_EXECUTE",
    "GEN_AI_LATENCY_FORWARD",
    "GEN_AI_LATENCY_INFERENCE",
    "GEN_AI_LATENCY_PREFILL",
    "GEN_AI_LATENCY_QUEUE",
    "GEN_AI_LATENCY_SCHEDULER",
    "GEN_AI_LATENCY_TTFT",
    "GEN_AI_MAX_TOKENS",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_TOKENS",
    "GEN_AI_PROMPT_TOKENS",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REASONING_TOKENS",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_REQUEST_STREAM",
    "GEN_AI_REQUEST_TEMPERATURE",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_TIME_TO_FIRST_CHUNK",
    "HOST_CPUS",
    "HOST_CPU_BUSY",
    "HOST_NAME",
    "HTTP_RESPONSE_STATUS_CODE",
    "INFERENCE",
    "INFERENCE_DECODE",
    "INFERENCE_KV_TRANSFER",
    "INFERENCE_PREFILL",
    "INFERENCE_QUEUE",
    "JAEGER_SPAN_KIND",
    "JAEGER_TRACE_STATE",
    "LEGACY_CHUNK_EVENT",
    "LLMD_DECODE_MS",
    "LLMD_KV_TRANSFER_MS",
    "LLMD_PREFILL_MS",
    "LLMD_TRUE_TTFT_MS",
    "LLM_REQUEST_TYPE",
    "OPENINFERENCE_CACHE_READ_TOKENS",
    "OPENINFERENCE_COMPLETION_TOKENS",
    "OPENINFERENCE_FIRST_TOKEN_EVENT",
    "OPENINFERENCE_MODEL_NAME",
    "OPENINFERENCE_PROMPT_TOKENS",
    "OPENINFERENCE_SPAN_KIND",
    "POOL_NAME",
    "POOL_SIZE",
    "POOL_WAIT_NS",
    "PROCESS_CPUS",
    "PROCESS_CPU_NS",
    "PROCESS_CPU_TOTAL_NS",
    "RUN",
    "SAMPLE_RATE",
    "SAMPLING_PROBABILITY",
    "SERVICE_INSTANCE_ID",
    "SERVICE_NAME",
    "SPANS_DROPPED",
    "STAGE",
    "STREAM_CLOSED_EARLY",
    "TGI_INFERENCE_TIME",
    "TGI_QUEUE_TIME",
    "TGI_VALIDATION_TIME",
    "TRITON_COMPUTE_END",
    "TRITON_COMPUTE_START",
    "TRITON_QUEUE_START",
    "is_content_key",
]

#: The stage a span belongs to (string).
STAGE = "hoptrace.stage"
#: Event added when the first token or chunk passes through a streaming span.
FIRST_TOKEN_EVENT = "hoptrace.first_token"
#: Number of chunks a streaming span passed on (int).
CHUNKS = "hoptrace.chunks"
#: True when the consumer closed a stream before it was exhausted.
STREAM_CLOSED_EARLY = "hoptrace.stream.closed_early"
#: Which fallback tier served a request (``primary``, ``fallback_model``, ``cached``, ``rule``).
FALLBACK_TIER = "hoptrace.fallback_tier"
#: Names the run (demo, bench, load test) a request belongs to; ``--run`` filters on it.
RUN = "hoptrace.run"
#: Why a request fell back to a lower tier (the error text of the tier above).
FALLBACK_REASON = "hoptrace.fallback_reason"
#: The exception type that cancelled a stage (a client gone, a timeout).
CANCELLED = "hoptrace.cancelled"
#: How a bench request ended: ``200``, another status, ``timeout``, ``protocol``, ...
BENCH_STATUS = "hoptrace.bench.status"
#: The concurrency level a bench request ran at (a closed loop of that many clients).
BENCH_CONCURRENCY = "hoptrace.bench.concurrency"
#: The rate (requests/s) an open-loop bench request was sent at (``bench --rate``):
#: its arrivals did not wait for earlier answers.
BENCH_RATE = "hoptrace.bench.rate"
#: The open loop's arrival process: ``poisson``, ``constant`` or ``gamma``.
BENCH_ARRIVALS = "hoptrace.bench.arrivals"
#: ns from the request's intended send time to its actual send (its wait for a slot of
#: ``--max-concurrency`` included).
BENCH_SEND_LAG_NS = "hoptrace.bench.send_lag_ns"
#: ns the request waited for a slot of the bench's ``--max-concurrency``.
BENCH_QUEUE_NS = "hoptrace.bench.queue_ns"
#: On each bench request span: the host's busy CPU time (ns, all cores together, since
#: boot) when the request ended; with ``HOST_CPUS`` (there: the cores the bench may
#: use), a load model's CPU demand per request and capacity (docs/whatif.md).
HOST_CPU_BUSY = "hoptrace.host.cpu_busy_ns"
#: On the resource of a batch of spans: how many spans the sending process dropped
#: (a full queue, a failed export, a span it could not read) since the last batch that
#: was sent with this count (int). ``hoptrace collect`` adds these up in ``/healthz``
#: (``spans_dropped_by_senders``).
SPANS_DROPPED = "hoptrace.spans_dropped"

# What a model of the load reads (docs/analysis.md, section 10; tracer/instrument/load.py).
#: Server span: CPU time (user + system, every thread) the serving process spent from
#: the span's start to its end, ns (int). With concurrent requests it includes the CPU
#: of the others running meanwhile: it bounds one request's demand from above.
PROCESS_CPU_NS = "hoptrace.process.cpu_ns"
#: Server span: the serving process's cumulative CPU time at the span's end, ns (int).
#: Two spans of one ``service.instance.id`` give the process's CPU over the window
#: between their ends (the difference), hence its busy cores and CPU per request.
PROCESS_CPU_TOTAL_NS = "hoptrace.process.cpu_total_ns"
#: Resource and server spans: the CPUs the process may run on (its affinity, bounded
#: by its cgroup v2 ``cpu.max`` quota), cores as a double (a quota can be fractional).
PROCESS_CPUS = "hoptrace.process.cpus"
#: Resource and server spans: the host's logical CPUs, shared by every process on ``host.name``.
HOST_CPUS = "hoptrace.host.cpus"
#: The finite pool whose slot the span held (``gateway``, ``engine``).
POOL_NAME = "hoptrace.pool.name"
#: The pool's number of slots (int).
POOL_SIZE = "hoptrace.pool.size"
#: How long the request waited for a slot of the pool, ns (int; 0: one was free).
POOL_WAIT_NS = "hoptrace.pool.wait_ns"

# Standard resource, span and HTTP keys.
SERVICE_NAME = "service.name"
#: A span's sampling probability as other samplers record it (0..1; OpenTelemetry
#: Java's ``SamplingAttributes``, specification pull request 570).
SAMPLING_PROBABILITY = "sampling.probability"
#: Honeycomb's sample rate: the span stands for this many (1 in N).
SAMPLE_RATE = "SampleRate"
#: Resource and server spans: the process's unique id among the instances of its
#: service (a UUID v4).
SERVICE_INSTANCE_ID = "service.instance.id"
#: Resource and server spans: the host the process runs on (``socket.gethostname()``).
HOST_NAME = "host.name"
#: The span kind tag of Jaeger's JSON (``client``, ``server``, ...).
JAEGER_SPAN_KIND = "span.kind"
#: The tag Jaeger keeps an OTLP span's trace state in (opentelemetry-collector-contrib
#: ``pkg/translator/jaeger``, ``tagW3CTraceState``).
JAEGER_TRACE_STATE = "w3c.tracestate"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"

# GenAI semantic conventions (experimental).
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
#: Seconds from the span's start to its first chunk.
GEN_AI_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
#: Prompt tokens read from the provider's or engine's prefix cache (int).
GEN_AI_CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
#: Prompt tokens written to the provider's cache (int), part of ``input_tokens``: the
#: registry's key. ``cache_write`` is in no release of the registry; it is still read
#: where an early draft's instrumentation wrote it (docs/conventions.md).
GEN_AI_CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_CACHE_WRITE_TOKENS = "gen_ai.usage.cache_write.input_tokens"
#: Cached prompt tokens under other names: the usage field ``cached_tokens`` (llm-d's
#: gateway span; many SDK instrumentations), OpenInference's prompt details.
GEN_AI_CACHED_TOKENS = "gen_ai.usage.cached_tokens"
OPENINFERENCE_CACHE_READ_TOKENS = "llm.token_count.prompt_details.cache_read"
#: Output tokens spent on reasoning (int).
GEN_AI_REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
#: The GenAI event that repeats an operation's attributes (usage, time to first chunk):
#: as a span event or as a log record tied to the span.
GEN_AI_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
#: A log record's event name, as an attribute (before OTLP's ``event_name`` field).
EVENT_NAME = "event.name"

# What other instrumentation and serving engines write (docs/conventions.md has the
# sources). Older OpenLLMetry and vLLM name the token counts prompt/completion.
GEN_AI_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
GEN_AI_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
OPENINFERENCE_PROMPT_TOKENS = "llm.token_count.prompt"
OPENINFERENCE_COMPLETION_TOKENS = "llm.token_count.completion"
OPENINFERENCE_MODEL_NAME = "llm.model_name"
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
#: Older OpenLLMetry's operation key (``chat``, ``completion``).
LLM_REQUEST_TYPE = "llm.request.type"
#: OpenLLMetry writes one event per streamed chunk (new and old name).
CHUNK_EVENT = "gen_ai.content.completion.chunk"
LEGACY_CHUNK_EVENT = "llm.content.completion.chunk"
#: OpenInference's event at the first streamed chunk.
OPENINFERENCE_FIRST_TOKEN_EVENT = "First Token Stream Event"
# vLLM's (and SGLang's) engine request span, seconds (doubles).
GEN_AI_LATENCY_TTFT = "gen_ai.latency.time_to_first_token"
GEN_AI_LATENCY_QUEUE = "gen_ai.latency.time_in_queue"
GEN_AI_LATENCY_PREFILL = "gen_ai.latency.time_in_model_prefill"
GEN_AI_LATENCY_DECODE = "gen_ai.latency.time_in_model_decode"
GEN_AI_LATENCY_INFERENCE = "gen_ai.latency.time_in_model_inference"
GEN_AI_LATENCY_E2E = "gen_ai.latency.e2e"
# vLLM's newer latency keys: totals over the request's steps (no position in time).
GEN_AI_LATENCY_SCHEDULER = "gen_ai.latency.time_in_scheduler"
GEN_AI_LATENCY_FORWARD = "gen_ai.latency.time_in_model_forward"
GEN_AI_LATENCY_EXECUTE = "gen_ai.latency.time_in_model_execute"
# llm-d's P/D proxy (the sidecar that sends a request to prefill, then to decode):
# its request span's phase durations, milliseconds (doubles).
LLMD_PREFILL_MS = "llm_d.pd_proxy.prefill_duration_ms"
LLMD_KV_TRANSFER_MS = "llm_d.pd_proxy.kv_transfer_overhead_ms"
LLMD_DECODE_MS = "llm_d.pd_proxy.decode_duration_ms"
#: The proxy's time to first token (from the request's arrival at the proxy), ms.
LLMD_TRUE_TTFT_MS = "llm_d.pd_proxy.true_ttft_ms"
# TGI's request span fields (Rust Duration Debug strings such as "12.3ms").
TGI_VALIDATION_TIME = "validation_time"
TGI_QUEUE_TIME = "queue_time"
TGI_INFERENCE_TIME = "inference_time"
# Triton's activity events (on the model span and its compute span).
TRITON_QUEUE_START = "QUEUE_START"
TRITON_COMPUTE_START = "COMPUTE_START"
TRITON_COMPUTE_END = "COMPUTE_END"
#: Triton's span for the model's execution, child of the model span.
TRITON_COMPUTE_SPAN = "compute"
#: Decoders keep the time of a phase event (Triton's) as an attribute: this prefix and
#: the event name, Unix nanoseconds.
EVENT_TIME_PREFIX = "hoptrace.event_ns."

#: Canonical stage names in request order.
CANONICAL_STAGES = (
    "client",
    "gateway",
    "auth",
    "guardrail",
    "context",
    "inference",
    "tool",
    "postprocess",
    "return",
)
#: Derived stage for time in a CLIENT span not covered by its remote child.
DERIVED_NETWORK = "network"
#: Derived stage for spans that carry no stage and inherit none.
DERIVED_OTHER = "other"
#: The engine's sub-stages (a name with a dot is a sub-stage of the part before it).
INFERENCE = "inference"
INFERENCE_QUEUE = "inference.queue"
INFERENCE_PREFILL = "inference.prefill"
INFERENCE_DECODE = "inference.decode"
#: Moving the KV cache from the prefill to the decode instance (llm-d's P/D proxy).
INFERENCE_KV_TRANSFER = "inference.kv_transfer"

#: Prompt and completion content that GenAI instrumentations record (OpenTelemetry GenAI,
#: OpenLLMetry, OpenInference). Latency analysis never needs it: the collector drops
#: these keys at ingest unless told to keep them, and no report prints them.
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "input.value",
    "output.value",
)
#: Key prefixes of the same content, one attribute per message part.
CONTENT_PREFIXES = (
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "llm.input_messages.",
    "llm.output_messages.",
)


def is_content_key(key: str) -> bool:
    """True for an attribute that holds prompt or completion text."""
    return key in CONTENT_KEYS or key.startswith(CONTENT_PREFIXES)
