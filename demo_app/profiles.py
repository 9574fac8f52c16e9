"""Named latency profiles: delays injected where loopback is too fast to be realistic."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from tracer._errors import ConfigError

__all__ = ["ALIASES", "CALLS_FIELDS", "PROFILES", "STAGE_FIELDS", "Profile", "get_profile"]


@dataclass(frozen=True)
class Profile:
    """Milliseconds per leg and stage; each network leg is one way.

    The model takes ``prefill_ms`` plus ``per_token_ms`` per output token, divided by
    the model server's speedup. ``jitter`` is the relative spread (0.1 = +-10%).
    ``retrieval_ms`` and ``keyword_ms``: after ``context_ms``, context assembly runs a
    retrieval and a keyword search in parallel (sub-stages ``context.retrieval`` and
    ``context.keyword``; none when both are 0), as a RAG chain does. ``repeat`` and
    ``candidates``: how many times the app calls the model for an answer.
    """

    name: str
    client_ms: float
    net_client_gateway_ms: float
    gateway_ms: float
    auth_ms: float
    net_gateway_app_ms: float
    context_ms: float
    net_app_model_ms: float
    prefill_ms: float
    per_token_ms: float
    postprocess_ms: float
    return_ms: float
    jitter: float = 0.1
    retrieval_ms: float = 0.0
    keyword_ms: float = 0.0
    #: the app calls the model this many times in sequence (a self-check round before
    #: the answer: 2), the last call giving the answer
    repeat: int = 1
    #: the app calls the model this many times in parallel, waits for all and keeps
    #: one answer (best-of-N)
    candidates: int = 1

    def outside_model_ms(self) -> float:
        """Time outside the model per request (both network legs counted)."""
        legs = 2 * (self.net_client_gateway_ms + self.net_gateway_app_ms + self.net_app_model_ms)
        return (
            legs
            + self.client_ms
            + self.gateway_ms
            + self.auth_ms
            + self.context_ms
            + max(self.retrieval_ms, self.keyword_ms)
            + self.postprocess_ms
            + self.return_ms
        )

    def as_dict(self) -> dict[str, float | str]:
        """The profile as a dict (sent to the services)."""
        return asdict(self)


PROFILES = {
    # A wide-area deployment: the client far from the gateway (60 ms one way), about
    # 600 ms outside the model against 1000 ms of inference (32 tokens).
    "wan": Profile("wan", 40, 60, 50, 70, 25, 90, 15, 200, 25, 60, 40),
    # A fast, in-region deployment.
    "lan": Profile("lan", 5, 2, 5, 5, 1, 20, 1, 120, 15, 10, 5),
    # lan with a RAG chain: context assembly runs retrieval (60 ms) and keyword search
    # (35 ms) in parallel, so the keyword search is hidden until retrieval gets faster.
    "rag": Profile("rag", 5, 2, 5, 5, 1, 5, 1, 120, 15, 10, 5, 0.1, 60, 35),
    # Nothing injected: what loopback and the code really cost.
    "loopback": Profile("loopback", 0, 0, 0, 0, 0, 0, 0, 20, 2, 0, 0, 0.0),
    # No model time either: only the chain's own code runs, so what tracing adds to it
    # stands out of the timer noise (the tracing-cost measurement uses it).
    "bare": Profile("bare", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0),
}


#: Old names still taken (not listed in help): ``seed`` is ``wan``.
ALIASES = {"seed": "wan"}

#: The profile fields each stage's time comes from (what ``NAME,STAGE=K`` divides by K).
STAGE_FIELDS = {
    "client": ("client_ms",),
    "gateway": ("gateway_ms",),
    "auth": ("auth_ms",),
    "context": ("context_ms", "retrieval_ms", "keyword_ms"),
    "context.retrieval": ("retrieval_ms",),
    "context.keyword": ("keyword_ms",),
    "inference": ("prefill_ms", "per_token_ms"),
    "inference.prefill": ("prefill_ms",),
    "inference.decode": ("per_token_ms",),
    "postprocess": ("postprocess_ms",),
    "return": ("return_ms",),
    "network": ("net_client_gateway_ms", "net_gateway_app_ms", "net_app_model_ms"),
}


#: Profile changes that set how many calls the app makes for an answer.
CALLS_FIELDS = ("repeat", "candidates")
#: The most calls of either.
MAX_CALLS = 64


def get_profile(name: str) -> Profile:
    """The profile called ``name``, or ``NAME,STAGE=K,...``: that profile with each
    STAGE K times faster (``lan,inference.prefill=10,auth=0.5``), to measure for real
    what a what-if projects; ``repeat=N`` (the model called N times in sequence) and
    ``candidates=N`` (N times in parallel, one answer kept) make the calls a what-if's
    ``--repeat`` and ``--fanout`` project (``lan,inference=10,repeat=2``).

    Raises:
        ConfigError: no such profile, stage or factor, or a bad number of calls.
    """
    base, *changes = [part.strip() for part in name.split(",")]
    try:
        profile = PROFILES[ALIASES.get(base, base)]
    except KeyError:
        raise ConfigError(f"profile must be one of {', '.join(PROFILES)}, got {base!r}") from None
    for change in changes:
        stage, _, factor = change.partition("=")
        if stage in CALLS_FIELDS:
            if not factor.isdigit() or not 1 <= int(factor) <= MAX_CALLS:
                raise ConfigError(
                    f"a profile's {stage}=N must be a whole number from 1 to {MAX_CALLS}, "
                    f"got {change!r}"
                )
            profile = replace(
                profile, name=f"{profile.name},{stage}={factor}", **{stage: int(factor)}
            )
            continue
        try:
            k = float(factor)
        except ValueError:
            k = 0.0
        if stage not in STAGE_FIELDS or not 0 < k < float("inf"):
            raise ConfigError(
                f"a profile change must be STAGE=K with STAGE one of "
                f"{', '.join(STAGE_FIELDS)} and K a positive number, or repeat=N or "
                f"candidates=N, got {change!r}"
            )
        profile = replace(
            profile,
            name=f"{profile.name},{stage}={factor}",
            **{f: getattr(profile, f) / k for f in STAGE_FIELDS[stage]},
        )
    return profile
