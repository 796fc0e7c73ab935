"""The helpers every provider's adapter tests use (support.py) keep their
guards: a request that breaks the provider's OpenAPI document or lacks its
key fails the test; answers are shaped as each provider writes them; a
fixture body changed for one test is a fresh copy."""

from __future__ import annotations

import httpx
import pytest

from tests.adapters import support
from tests.adapters._lambda_support import API, INSTANCE_ID, KEY, SPEC

INSTANCE = f"/api/v1/instances/{INSTANCE_ID}"


def get(path: str, key: str = KEY) -> httpx.Response:
    with httpx.Client(base_url=API) as client:
        return client.get(path, headers={"Authorization": f"Bearer {key}"})


def test_a_request_the_spec_allows_with_the_key_passes() -> None:
    with support.checked_routes(API, SPEC, KEY) as api:
        api.on("GET", INSTANCE, support.replies()(200, {"data": {}}))
        assert get(INSTANCE).json() == {"data": {}}
    assert len(api.requests) == 1 and api.violations == []


def test_a_request_without_the_accounts_key_fails_the_test() -> None:
    with pytest.raises(AssertionError):
        with support.checked_routes(API, SPEC, KEY) as api:
            api.on("GET", INSTANCE, support.replies()(200, {"data": {}}))
            get(INSTANCE, key="someone-elses-key")
    assert api.violations == []  # the spec allows it: the key check is what failed


def test_a_request_the_spec_does_not_know_fails_the_test() -> None:
    with pytest.raises(AssertionError):
        with support.checked_routes(API, SPEC, KEY) as api:
            api.on("GET", "/api/v1/no-such-thing", support.replies()(200, {}))
            get("/api/v1/no-such-thing")
    assert api.violations


def test_answers_are_shaped_as_each_provider_writes_them() -> None:
    request = httpx.Request("GET", API)
    plain = support.replies()
    problems = support.replies(error_content_type="application/problem+json")
    assert plain(500)(request).content == b"" == problems(500)(request).content
    answer = problems(400, {"title": "Bad Request"})(request)
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json() == {"title": "Bad Request"}
    assert plain(400, {"error": 1})(request).headers["content-type"] == "application/json"
    assert problems(200, {"id": 1})(request).headers["content-type"] == "application/json"
    assert plain(502, text="<html>", headers={"x": "1"})(request).text == "<html>"


def test_a_changed_body_is_a_fresh_copy_changed_where_asked() -> None:
    files = support.Fixtures("lambda")
    changed = files.changed("get_instance_200", "data", name="renamed", status="active")
    assert changed["data"]["name"] == "renamed" and changed["data"]["status"] == "active"
    assert files.body("get_instance_200")["data"].get("name") != "renamed"
