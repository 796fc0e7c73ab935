"""Vast.ai: ssh as root to `public_ipaddr` and the host port mapped to 22/tcp
(direct), else to the proxy `ssh_host`:`ssh_port`, as vast-cli's ssh-url
reads them. Golden against the spec's example bodies."""

from __future__ import annotations

from gpucloud.models import Connection
from tests.adapters._vastai_support import (  # noqa: F401 (fixtures)
    LIST,
    SHOWN,
    api_fixture,
    page,
    provider_fixture,
    reply,
    run_fixture,
    show,
    sleeps_fixture,
)


def test_the_list_example_maps_22_tcp_directly(api, run, provider):
    api.on("GET", LIST, reply(200, page([7], None)))
    [instance] = run(provider.list_instances())
    assert instance.connection == Connection(method="ssh", host="192.0.2.45", port=20000,
                                             user="root")


def test_direct_first_then_the_proxy_the_runtype_also_asked_for(api, run, provider):
    # The list example was created with direct SSH and the proxy as fallback
    # (image_runtype "ssh ssh_direc ssh_proxy") and has both endpoints.
    data = page([7], None)
    assert data["instances"][0]["image_runtype"] == "ssh ssh_direc ssh_proxy"
    api.on("GET", LIST, reply(200, data))
    [instance] = run(provider.list_instances())
    assert (instance.connection.host, instance.connection.port) == ("192.0.2.45", 20000)
    # No 22/tcp mapping (the direct port is not there): the proxy.
    del data["instances"][0]["ports"]["22/tcp"]
    api.on("GET", LIST, reply(200, data))
    [instance] = run(provider.list_instances())
    assert (instance.connection.host, instance.connection.port) == ("ssh123.vast.ai", 10600)


def test_the_show_example_has_no_mapping_so_the_proxy(api, run, provider):
    api.on("GET", f"/api/v0/instances/{SHOWN}/", reply(200, show()))
    assert run(provider.get(SHOWN)).connection == Connection(
        method="ssh", host="ssh2281.vast.ai", port=10882, user="root")


def test_a_jupyter_runtype_proxies_one_port_up(api, run, provider):
    api.on("GET", f"/api/v0/instances/{SHOWN}/",
           reply(200, show(image_runtype="jupyter_proxy")))
    assert run(provider.get(SHOWN)).connection.port == 10883


def test_loading_without_any_endpoint_has_none(api, run, provider):
    api.on("GET", f"/api/v0/instances/{SHOWN}/",
           reply(200, show(actual_status="loading", ssh_host=None, ssh_port=None, ports=None)))
    assert run(provider.get(SHOWN)).connection is None
