"""A provider session keeps no cookies and parses no answer for them: every
provider authenticates each request with its key, and a session sends each
request as its adapter built it, so a cookie an answer sets (a load
balancer's, a bot screen's) is never sent back; looking for one in every
answer (httpx builds a urllib request and an email message to do it) is
work for nothing. Lambda answers through respx at the HTTP transport, from
the contract fixtures."""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
from pathlib import Path

import httpx
import respx

from gpucloud import AsyncClient, Client

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lambda"
BASE = "https://cloud.lambda.ai/api/v1"
MACHINE = json.loads((FIXTURES / "get_instance_200.json").read_text())
IDENT = MACHINE["data"]["id"]
# An answer that sets a cookie, as a load balancer in front of an API may.
SET_COOKIE = {"Set-Cookie": "lb-affinity=abc123; Path=/; Secure; HttpOnly"}


def _count_cookie_parsing(monkeypatch) -> list[object]:
    parsed: list[object] = []
    real = http.cookiejar.CookieJar.extract_cookies

    def extract(self, response, request):
        parsed.append(response)
        return real(self, response, request)

    monkeypatch.setattr(http.cookiejar.CookieJar, "extract_cookies", extract)
    return parsed


def test_a_cookie_an_answer_sets_is_not_sent_back_nor_parsed(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "sk-cookies-0123456789")
    parsed = _count_cookie_parsing(monkeypatch)
    with respx.mock(assert_all_called=True) as router:
        route = router.get(f"{BASE}/instances/{IDENT}").mock(
            return_value=httpx.Response(200, json=MACHINE, headers=SET_COOKIE))
        client = Client(["lambda"])
        for _ in range(3):
            assert client.get(f"lambda/{IDENT}").id == IDENT
    assert route.call_count == 3
    assert all("cookie" not in request.headers for request, _ in route.calls)
    assert parsed == []


def test_the_async_client_keeps_no_cookies_either(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "sk-cookies-0123456789")
    parsed = _count_cookie_parsing(monkeypatch)

    async def main() -> None:
        async with AsyncClient(["lambda"]) as client:
            for _ in range(3):
                assert (await client.get(f"lambda/{IDENT}")).id == IDENT

    with respx.mock(assert_all_called=True) as router:
        route = router.get(f"{BASE}/instances/{IDENT}").mock(
            return_value=httpx.Response(200, json=MACHINE, headers=SET_COOKIE))
        asyncio.run(main())
    assert route.call_count == 3
    assert all("cookie" not in request.headers for request, _ in route.calls)
    assert parsed == []
