"""Building a request parses its URL (the better part of the work) once while
the same URL is asked again: the reaper's fresh read of a machine and then its
delete, extend's read and write, a wait's polls. The requests are the same."""

from __future__ import annotations

import httpx
import pytest

from gpucloud.catalog.bundled import load_catalogs
from gpucloud.providers.lambdalabs.adapter import LambdaProvider


@pytest.fixture
def parses(monkeypatch):
    """Every URL httpx parses from text (httpx._urls calls its parser by this name)."""
    from httpx import _urls

    seen: list[str] = []
    real = _urls.urlparse

    def urlparse(url="", **kwargs):
        seen.append(url)
        return real(url, **kwargs)

    monkeypatch.setattr(_urls, "urlparse", urlparse)
    return seen


def test_a_machines_read_then_its_delete_parse_its_url_once(parses):
    provider = LambdaProvider(load_catalogs()["lambda"])
    read = provider.request("GET", "/instances/0920582c7ff041399e34823a0be62549")
    parses.clear()
    again = provider.request("GET", "/instances/0920582c7ff041399e34823a0be62549")
    delete = provider.request("DELETE", "/instances/0920582c7ff041399e34823a0be62549")
    assert [u for u in parses if u] == []
    assert str(read.url) == str(again.url) == str(delete.url) \
        == provider.base_url + "/instances/0920582c7ff041399e34823a0be62549"
    assert delete.method == "DELETE" and delete.extensions["gpucloud_kind"] == "idempotent"


def test_other_urls_and_query_parameters_are_parsed_as_before():
    provider = LambdaProvider(load_catalogs()["lambda"])
    listed = provider.request("GET", "/instances", params={"cursor": "a b"})
    assert str(listed.url) == provider.base_url + "/instances?cursor=a+b"
    other = provider.request("GET", "/instances/other")
    assert str(other.url) == provider.base_url + "/instances/other"
    with pytest.raises(httpx.InvalidURL):
        provider.request("GET", "/instances/\n")
