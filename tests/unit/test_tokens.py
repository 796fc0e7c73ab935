"""RefreshingTokenAuth: renewal ahead of expiry, refresh with fallback, one
renewal under concurrency (threads and asyncio), 401 -> one renewal + one
retry, and no token in any repr, str, log or exception.

Everything runs through real httpx clients with respx at the transport, so
token requests travel the same way API requests do."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import respx
from pydantic import SecretStr

from gpucloud.errors import (
    APIResponseValidationError,
    AuthenticationError,
    InternalServerError,
)
from gpucloud.transport.tokens import (
    TOKEN_REQUEST_EXTENSION,
    RefreshingTokenAuth,
    Token,
    TokenSource,
)

TOKEN_URL = "https://auth.test/token"
API = "https://api.test/things"
CLIENT_SECRET = "client-secret-xyz"


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeSource(TokenSource):
    """A provider-neutral OAuth2-ish source: JSON grant bodies, {access, refresh, expires_in}."""

    def __init__(self, can_refresh: bool = True) -> None:
        self.can_refresh = can_refresh

    def _post(self, body: dict) -> httpx.Request:
        return httpx.Request("POST", TOKEN_URL, json=body,
                             extensions={TOKEN_REQUEST_EXTENSION: True})

    def initial_request(self) -> httpx.Request:
        return self._post({"grant": "initial", "secret": CLIENT_SECRET})

    def refresh_request(self, token: Token) -> httpx.Request | None:
        if not self.can_refresh or token.refresh_token is None:
            return None
        return self._post({"grant": "refresh", "refresh": token.refresh_token.get_secret_value()})

    def parse(self, response: httpx.Response, now: float) -> Token:
        if response.status_code == 401:
            raise AuthenticationError("fake: bad client", provider="fake", status_code=401)
        if response.is_error:
            raise InternalServerError("fake: token endpoint failed", provider="fake",
                                      status_code=response.status_code)
        body = response.json()
        if "access" not in body:
            raise APIResponseValidationError("fake: no access token", provider="fake")
        return Token(SecretStr(body["access"]),
                     SecretStr(body["refresh"]) if body.get("refresh") else None,
                     now + body["expires_in"] if body.get("expires_in") is not None else None)


class TokenServer:
    """Hands out access-1, access-2, ... with rotating refresh tokens; records grants."""

    def __init__(self, lifetime: int | None = 3600, delay: float = 0.0) -> None:
        self.lifetime = lifetime
        self.delay = delay
        self.grants: list[dict] = []
        self.answers: list[httpx.Response] = []  # queued overrides (refusals, errors)
        self._lock = threading.Lock()

    def _answer(self, request: httpx.Request) -> httpx.Response:
        assert request.extensions.get(TOKEN_REQUEST_EXTENSION) is True
        assert "authorization" not in request.headers  # no bearer on the token endpoint
        with self._lock:
            self.grants.append(json.loads(request.content))
            if self.answers:
                return self.answers.pop(0)
            n = len(self.grants)
        return httpx.Response(200, json={"access": f"access-{n}", "refresh": f"refresh-{n}",
                                         "expires_in": self.lifetime})

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.delay:
            time.sleep(self.delay)
        return self._answer(request)

    async def asynchronous(self, request: httpx.Request) -> httpx.Response:
        if self.delay:
            await asyncio.sleep(self.delay)  # let the other requests pile up behind the lock
        return self._answer(request)


class ApiServer:
    """Answers 200 to access tokens it accepts; 401 to the rest (or as scripted)."""

    def __init__(self, refuse: int = 0) -> None:
        self.refuse = refuse  # answer this many requests with 401 whatever the token
        self.seen: list[str] = []
        self.bodies: list[bytes] = []
        self.revoked: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        header = request.headers.get("authorization", "")
        with self._lock:
            self.seen.append(header)
            self.bodies.append(request.content)
            if self.refuse > 0:
                self.refuse -= 1
                return httpx.Response(401, json={"error": "expired"})
        if not header.startswith("Bearer ") or header[7:] in self.revoked:
            return httpx.Response(401, json={"error": "bad token"})
        return httpx.Response(200, json={"ok": True})


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tokens() -> TokenServer:
    return TokenServer()


@pytest.fixture
def api() -> ApiServer:
    return ApiServer()


@pytest.fixture
def router(tokens, api):
    with respx.mock(assert_all_called=False) as mock:
        mock.post(TOKEN_URL).mock(side_effect=tokens)
        mock.route(url__startswith=API).mock(side_effect=api)
        yield mock


@pytest.fixture
def auth(clock) -> RefreshingTokenAuth:
    return RefreshingTokenAuth(FakeSource(), leeway=60.0, clock=clock)


@pytest.fixture
def client(router, auth):
    with httpx.Client(auth=auth) as c:
        yield c


def test_first_request_gets_a_token_and_reuses_it(client, auth, tokens, api, clock):
    for _ in range(3):
        assert client.get(API).status_code == 200
    assert tokens.grants == [{"grant": "initial", "secret": CLIENT_SECRET}]
    assert api.seen == ["Bearer access-1"] * 3
    assert auth.token_expires_at == clock.now + 3600


def test_refresh_ahead_of_expiry_with_the_refresh_token(client, auth, tokens, api, clock):
    client.get(API)
    clock.now += 3600 - 60 - 1  # 61 s left: still fresh with a 60 s leeway
    client.get(API)
    assert len(tokens.grants) == 1
    clock.now += 1  # 60 s left: renew now, before the API would refuse it
    client.get(API)
    assert tokens.grants[1] == {"grant": "refresh", "refresh": "refresh-1"}
    assert api.seen[-1] == "Bearer access-2"
    assert auth.token_expires_at == clock.now + 3600


def test_rotated_refresh_token_is_stored_and_used_next_time(client, tokens, clock):
    client.get(API)
    clock.now += 3600
    client.get(API)
    clock.now += 3600
    client.get(API)
    assert [g.get("refresh") for g in tokens.grants] == [None, "refresh-1", "refresh-2"]


@pytest.mark.parametrize("status", [400, 401])
def test_refused_refresh_falls_back_to_the_initial_grant(client, tokens, api, clock, status):
    client.get(API)
    clock.now += 3600
    tokens.answers.append(httpx.Response(status, json={"error": "invalid_grant"}))
    assert client.get(API).status_code == 200
    assert [g["grant"] for g in tokens.grants] == ["initial", "refresh", "initial"]
    assert api.seen[-1] == "Bearer access-3"


def test_a_failing_refresh_that_is_not_a_refusal_raises(client, tokens, api, clock):
    client.get(API)
    clock.now += 3600
    tokens.answers.append(httpx.Response(503, text="down"))
    with pytest.raises(InternalServerError):
        client.get(API)
    assert [g["grant"] for g in tokens.grants] == ["initial", "refresh"]
    assert len(api.seen) == 1  # the API request was never sent with a stale token


def test_bad_client_credentials_raise_the_source_error(client, tokens, api):
    tokens.answers.append(httpx.Response(401, json={"error": "invalid_client"}))
    with pytest.raises(AuthenticationError):
        client.get(API)
    assert api.seen == []


def test_a_source_that_cannot_refresh_uses_the_initial_grant(router, tokens, clock):
    auth = RefreshingTokenAuth(FakeSource(can_refresh=False), clock=clock)
    with httpx.Client(auth=auth) as client:
        client.get(API)
        clock.now += 3600
        client.get(API)
    assert [g["grant"] for g in tokens.grants] == ["initial", "initial"]


def test_a_token_without_lifetime_is_renewed_only_on_401(router, tokens, api, clock):
    tokens.lifetime = None
    auth = RefreshingTokenAuth(FakeSource(), clock=clock)
    with httpx.Client(auth=auth) as client:
        client.get(API)
        clock.now += 10 ** 7
        client.get(API)
        assert len(tokens.grants) == 1 and auth.token_expires_at is None
        api.revoked.add("access-1")
        assert client.get(API).status_code == 200
    assert len(tokens.grants) == 2


def test_401_renews_once_and_retries_once_with_the_body(client, tokens, api):
    client.get(API)
    api.revoked.add("access-1")  # the server forgot the token before its expiry
    response = client.post(API, json={"launch": "x"})
    assert response.status_code == 200
    assert [g["grant"] for g in tokens.grants] == ["initial", "refresh"]
    assert api.seen[1:] == ["Bearer access-1", "Bearer access-2"]
    assert api.bodies[1] == api.bodies[2] == b'{"launch":"x"}'


def test_401_twice_returns_the_401_without_looping(client, tokens, api):
    api.refuse = 10
    response = client.get(API)
    assert response.status_code == 401
    assert len(api.seen) == 2  # the request and one retry
    assert [g["grant"] for g in tokens.grants] == ["initial", "refresh"]


def test_401_after_another_request_renewed_retries_without_a_token_request(auth, clock):
    auth.set_token(Token(SecretStr("old"), SecretStr("r-old"), clock.now + 3600))
    flow = auth.sync_auth_flow(httpx.Request("GET", API))
    first = next(flow)
    assert first.headers["authorization"] == "Bearer old"
    # Meanwhile another request got a 401 and renewed the token.
    auth.set_token(Token(SecretStr("new"), SecretStr("r-new"), clock.now + 3600))
    retry = flow.send(httpx.Response(401, request=first))
    assert retry.url == API and retry.headers["authorization"] == "Bearer new"
    with pytest.raises(StopIteration):
        flow.send(httpx.Response(200, request=retry))


def test_sync_concurrency_renews_exactly_once(router, api, clock):
    tokens = TokenServer(delay=0.05)
    router.routes[0].side_effect = tokens
    auth = RefreshingTokenAuth(FakeSource(), clock=clock)
    # Everyone finds the token expired.
    auth.set_token(Token(SecretStr("stale"), SecretStr("r-stale"), clock.now - 1))
    with httpx.Client(auth=auth) as client, ThreadPoolExecutor(max_workers=32) as pool:
        statuses = list(pool.map(lambda _: client.get(API).status_code, range(100)))
    assert statuses == [200] * 100
    assert tokens.grants == [{"grant": "refresh", "refresh": "r-stale"}]
    assert set(api.seen) == {"Bearer access-1"} and len(api.seen) == 100


def test_async_concurrency_renews_exactly_once(router, api, clock):
    tokens = TokenServer(delay=0.05)
    router.routes[0].side_effect = tokens.asynchronous
    auth = RefreshingTokenAuth(FakeSource(), clock=clock)
    auth.set_token(Token(SecretStr("stale"), SecretStr("r-stale"), clock.now - 1))

    async def main() -> list[int]:
        async with httpx.AsyncClient(auth=auth) as client:
            responses = await asyncio.gather(*(client.get(API) for _ in range(100)))
        return [r.status_code for r in responses]

    assert asyncio.run(main()) == [200] * 100
    assert tokens.grants == [{"grant": "refresh", "refresh": "r-stale"}]
    assert set(api.seen) == {"Bearer access-1"} and len(api.seen) == 100


def test_async_401_renews_once_and_does_not_loop(router, tokens, api, clock):
    auth = RefreshingTokenAuth(FakeSource(), clock=clock)
    api.refuse = 10

    async def main() -> int:
        async with httpx.AsyncClient(auth=auth) as client:
            return (await client.get(API)).status_code

    assert asyncio.run(main()) == 401
    assert len(api.seen) == 2
    assert [g["grant"] for g in tokens.grants] == ["initial", "refresh"]


def test_one_auth_serves_several_event_loops(router, tokens, api, clock):
    auth = RefreshingTokenAuth(FakeSource(), clock=clock)

    async def once() -> int:
        async with httpx.AsyncClient(auth=auth) as client:
            return (await client.get(API)).status_code

    assert asyncio.run(once()) == 200
    clock.now += 3600  # the second loop must renew under its own asyncio.Lock
    assert asyncio.run(once()) == 200
    assert [g["grant"] for g in tokens.grants] == ["initial", "refresh"]


def test_tokens_never_appear_in_reprs_logs_or_errors(client, auth, tokens, api, clock, caplog):
    caplog.set_level(logging.DEBUG)
    client.get(API)
    clock.now += 3600
    client.get(API)
    api.refuse = 2
    client.get(API)
    tokens.answers.append(httpx.Response(500, text="access-3 refresh-3"))
    clock.now += 3600
    with pytest.raises(InternalServerError) as info:
        client.get(API)
    token = auth._token
    assert token is not None and token.access_token.get_secret_value() == "access-3"
    visible = " ".join([caplog.text, repr(auth), str(auth), repr(token), str(token),
                        str(info.value), repr(info.value)])
    for secret in ("access-1", "access-2", "access-3", "refresh-1", "refresh-2", "refresh-3",
                   CLIENT_SECRET):
        assert secret not in visible
    assert "token obtained by refresh" in caplog.text  # the log does say what happened
    assert auth.redact("got access-3 and refresh-3") == "got [secure] and [secure]"


def test_token_repr_and_staleness():
    token = Token(SecretStr("a"), None, 100.0)
    assert repr(token) == "Token(access_token=[secure], refresh_token=None, expires_at=100.0)"
    assert token.stale(40.0, 60.0) and not token.stale(39.9, 60.0)
    assert not Token(SecretStr("a")).stale(10 ** 12, 60.0)
