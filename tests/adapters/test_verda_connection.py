"""Verda: ssh root@ip:22 (dstack's DataCrunch backend), from the SDK's
instance fixture; none while `ip` is null."""

from __future__ import annotations

from gpucloud.models import Connection
from tests.adapters._verda_support import (  # noqa: F401 (fixtures)
    INSTANCE_ID,
    api_fixture,
    instance_body,
    provider_fixture,
    reply,
    run_fixture,
)


def test_the_sdk_example_is_root_at_its_ip(api, run, provider):
    api.on("GET", f"/instances/{INSTANCE_ID}", reply(200, instance_body()))
    assert run(provider.get(INSTANCE_ID)).connection == Connection(
        method="ssh", host="1.2.3.4", port=22, user="root")


def test_no_ip_yet_is_no_connection(api, run, provider):
    api.on("GET", f"/instances/{INSTANCE_ID}",
           reply(200, instance_body(status="provisioning", ip=None)))
    assert run(provider.get(INSTANCE_ID)).connection is None
