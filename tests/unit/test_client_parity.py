"""Client and AsyncClient offer the same public methods with the same
parameters (names, kinds, defaults), so neither can drift from the other; the
provider namespaces likewise. What differs is only how an answer comes: a
coroutine, an async iterator, ``aclose`` for ``close``."""

from __future__ import annotations

import inspect

import pytest

from gpucloud import AsyncClient, Client
from gpucloud.client.provider_calls import AsyncProviderCalls, ProviderCalls

# Same job, named for its world: closing sessions, and the context managers.
RENAMED = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}
# Answered at once, from memory, on both (nothing to await).
NOT_AWAITED = {"providers", "provider", "logs"}


def public(cls: type) -> dict[str, object]:
    members = {}
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name not in RENAMED and name not in RENAMED.values():
            continue
        members[name] = member
    return members


def shape(member: object) -> object:
    if isinstance(member, property):
        return "property"
    params = list(inspect.signature(member).parameters.values())
    return [(p.name, p.kind, p.default) for p in params]


@pytest.mark.parametrize("sync, asynchronous", [(Client, AsyncClient),
                                                (ProviderCalls, AsyncProviderCalls)])
def test_the_same_public_methods_with_the_same_parameters(sync, asynchronous):
    ours, theirs = public(sync), public(asynchronous)
    expected = {RENAMED.get(name, name) for name in ours}
    assert set(theirs) == expected, set(theirs) ^ expected
    for name, member in ours.items():
        if name in RENAMED:
            continue
        assert shape(theirs[name]) == shape(member), name


def test_the_async_methods_are_coroutines_and_the_sync_ones_are_not():
    for name, member in public(AsyncClient).items():
        if isinstance(member, property) or name in NOT_AWAITED:
            continue
        if name in ("follow_logs", "iter_list"):  # answers as it comes: an async iterator
            assert inspect.isasyncgenfunction(member)
            continue
        assert inspect.iscoroutinefunction(member), name
    assert not any(inspect.iscoroutinefunction(m) for m in public(Client).values()
                   if not isinstance(m, property))


def test_logs_and_follow_logs_answer_alike_on_both():
    # logs(follow=False) -> str (awaited on AsyncClient); follow=True and
    # follow_logs -> an iterator of lines (async on AsyncClient).
    sync_logs = inspect.get_annotations(Client.follow_logs)["return"]
    async_logs = inspect.get_annotations(AsyncClient.follow_logs)["return"]
    assert sync_logs == "Iterator[str]" and async_logs == "AsyncIterator[str]"
    assert "Iterator[str]" in inspect.get_annotations(Client.logs)["return"]
    assert "AsyncIterator[str]" in inspect.get_annotations(AsyncClient.logs)["return"]


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_both_clients_have_the_volume_calls(cls):
    for name in ("volumes", "volume", "plan_volume", "create_volume", "delete_volume"):
        assert callable(getattr(cls, name, None)), (cls.__name__, name)
    assert list(inspect.signature(cls.create_volume).parameters) == [
        "self", "name", "size_gb", "region", "provider"]
