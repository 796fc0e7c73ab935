"""Lambda: the ssh endpoint of a machine is ubuntu@ip:22, read from the spec's
Instance example (tests/fixtures/lambda/get_instance_200.json); none before
the machine has an address."""

from __future__ import annotations

from gpucloud.models import Connection
from tests.adapters._lambda_support import (  # noqa: F401 (fixtures)
    INSTANCE_ID,
    api,
    instance_body,
    provider,
    reply,
    run,
    sleeps,
)


def test_the_spec_example_is_ubuntu_at_its_ip(api, run, provider):
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, instance_body(status="active")))
    instance = run(provider.get(INSTANCE_ID))
    assert instance.connection == Connection(method="ssh", host="198.51.100.2", port=22,
                                             user="ubuntu")
    assert instance.ip == "198.51.100.2"


def test_no_address_while_booting(api, run, provider):
    raw = instance_body(status="booting")
    del raw["data"]["ip"]  # the spec: absent before the instance boots
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, raw))
    assert run(provider.get(INSTANCE_ID)).connection is None


def test_an_address_that_could_be_an_ssh_option_is_no_address(api, run, provider):
    raw = instance_body(status="active", ip="-oProxyCommand=touch /tmp/pwned")
    api.on("GET", f"/api/v1/instances/{INSTANCE_ID}", reply(200, raw))
    assert run(provider.get(INSTANCE_ID)).connection is None
