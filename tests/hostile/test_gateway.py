"""The demo gateway checks the key first, then the body, and answers a bad one with an
OpenAI-style 400: never a 500 with a traceback."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from demo_app.gateway import GatewayConfig, create_gateway_app
from demo_app.profiles import get_profile
from tests.hostile.servers import serving

KEY = "k-test"
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def gateway() -> Iterator[str]:
    # The app behind it is never reached: every request here is refused first.
    app = create_gateway_app(get_profile("loopback"), "http://127.0.0.1:9", GatewayConfig([KEY]))
    with serving(app) as url:
        yield url + "/v1/chat/completions"


def _post(url: str, content: bytes, key: str | None = KEY) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    return httpx.post(url, content=content, headers=headers, timeout=30)


_BAD_BODIES = {
    "max_tokens text": (b'{"messages": [], "max_tokens": "abc"}', "max_tokens"),
    "max_tokens list": (b'{"messages": [], "max_tokens": [1]}', "max_tokens"),
    "max_tokens 1e400": (b'{"messages": [], "max_tokens": 1e400}', None),
    "max_tokens true": (b'{"messages": [], "max_tokens": true}', "max_tokens"),
    "max_tokens 0": (b'{"messages": [], "max_tokens": 0}', "max_tokens"),
    "100,000-deep JSON": (b"[" * 100_000 + b"]" * 100_000, None),
    "not JSON": (b"{", None),
    "a list": (b"[1]", None),
    "no messages": (b'{"model": "m"}', "messages"),
    "stream text": (b'{"messages": [], "stream": "yes"}', "stream"),
}


@pytest.mark.parametrize("case", sorted(_BAD_BODIES))
def test_a_bad_body_with_a_good_key_gets_an_openai_style_400(gateway: str, case: str):
    body, param = _BAD_BODIES[case]
    answer = _post(gateway, body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    assert error["param"] == param
    assert "Traceback" not in answer.text


@pytest.mark.parametrize("case", sorted(_BAD_BODIES))
def test_a_bad_body_without_a_key_gets_401_before_the_body_is_read(gateway: str, case: str):
    answer = _post(gateway, _BAD_BODIES[case][0], key=None)
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_api_key"
    assert _post(gateway, _BAD_BODIES[case][0], key="wrong").status_code == 401


def test_a_body_over_the_limit_gets_413(gateway: str):
    answer = _post(gateway, b'{"messages": [], "pad": "' + b"x" * 2_000_000 + b'"}')
    assert answer.status_code == 413
    assert "error" in answer.json()
