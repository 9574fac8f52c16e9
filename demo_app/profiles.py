"""Named latency profiles: delays injected where loopback is too fast to be realistic."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tracer._errors import ConfigError

__all__ = ["PROFILES", "Profile", "get_profile"]


@dataclass(frozen=True)
class Profile:
    """Milliseconds per leg and stage; each network leg is one way.

    The model takes ``prefill_ms`` plus ``per_token_ms`` per output token, divided by
    the model server's speedup. ``jitter`` is the relative spread (0.1 = +-10%).
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

    def outside_model_ms(self) -> float:
        """Time outside the model per request (both network legs counted)."""
        legs = 2 * (self.net_client_gateway_ms + self.net_gateway_app_ms + self.net_app_model_ms)
        return (
            legs
            + self.client_ms
            + self.gateway_ms
            + self.auth_ms
            + self.context_ms
            + self.postprocess_ms
            + self.return_ms
        )

    def as_dict(self) -> dict[str, float | str]:
        """The profile as a dict (sent to the services)."""
        return asdict(self)


PROFILES = {
    # The seed story: about 600 ms outside the model, 1000 ms of inference (32 tokens).
    "seed": Profile("seed", 40, 60, 50, 70, 25, 90, 15, 200, 25, 60, 40),
    # A fast, in-region deployment.
    "lan": Profile("lan", 5, 2, 5, 5, 1, 20, 1, 120, 15, 10, 5),
    # Nothing injected: what loopback and the code really cost.
    "loopback": Profile("loopback", 0, 0, 0, 0, 0, 0, 0, 20, 2, 0, 0, 0.0),
    # No model time either: only the chain's own code runs, so what tracing adds to it
    # stands out of the timer noise (the tracing-cost measurement uses it).
    "bare": Profile("bare", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0),
}


def get_profile(name: str) -> Profile:
    """The profile called ``name``.

    Raises:
        ConfigError: no such profile.
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(f"profile must be one of {', '.join(PROFILES)}, got {name!r}") from None
