"""RunPod: a pod's ssh endpoint is the spec's `ssh.direct`, else the public
ip/port `runtime.ports` maps to 22/tcp, as root; never the proxy. Golden
against the spec's Pod example (tests/fixtures/runpod/v2_get_pod_200_pod.json)."""

from __future__ import annotations

from gpucloud.models import Connection
from tests.adapters._runpod_support import (  # noqa: F401 (fixtures)
    POD,
    POD_ID,
    api,
    pod_body,
    provider,
    reply,
    run,
    sleeps,
)


def test_the_spec_example_is_its_direct_endpoint(api, run, provider):
    api.on("GET", POD, reply(200, pod_body()))
    assert run(provider.get(POD_ID)).connection == Connection(
        method="ssh", host="195.26.233.3", port=34446, user="root")


def test_without_ssh_direct_the_22_tcp_mapping_counts(api, run, provider):
    raw = pod_body(ssh={"proxy": pod_body()["ssh"]["proxy"], "direct": None},
                   runtime={"ports": [
                       {"private": 8888, "public": 8888, "type": "http", "ip": None},
                       {"private": 22, "public": 41022, "type": "tcp", "ip": "203.0.113.9"}]})
    api.on("GET", POD, reply(200, raw))
    assert run(provider.get(POD_ID)).connection == Connection(
        method="ssh", host="203.0.113.9", port=41022, user="root")


def test_provisioning_has_no_connection_not_the_proxy(api, run, provider):
    raw = pod_body(status="PROVISIONING", runtime=None,
                   ssh={"proxy": pod_body()["ssh"]["proxy"], "direct": None})
    api.on("GET", POD, reply(200, raw))
    assert run(provider.get(POD_ID)).connection is None
