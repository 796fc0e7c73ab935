"""An SSH endpoint read from a reply (providers/_connection.py): checked
parts only, built as pydantic's model_construct would build it."""

from __future__ import annotations

import copy
import pickle

from gpucloud.models import Connection, Instance
from gpucloud.providers._connection import _checked_ssh, ssh_endpoint


def test_an_endpoint_is_what_model_construct_would_make():
    made = _checked_ssh("192.0.2.10", 2222, "ubuntu")
    same = Connection.model_construct(method="ssh", host="192.0.2.10", port=2222, user="ubuntu")
    assert type(made) is Connection
    assert made == same and hash(made) == hash(same) and repr(made) == repr(same)
    assert made.model_dump(mode="json") == same.model_dump(mode="json")
    assert made.model_fields_set == same.model_fields_set
    assert made.__pydantic_extra__ == same.__pydantic_extra__
    assert made.__pydantic_private__ == same.__pydantic_private__
    assert pickle.loads(pickle.dumps(made)) == same and copy.deepcopy(made) == same
    assert made.model_copy(update={"port": 22}).port == 22
    # An Instance takes it as it takes a validated one, and prints it alike.
    machine = Instance(provider="lambda", id="i-1", connection=made)
    assert machine.model_dump_json() == Instance(
        provider="lambda", id="i-1", connection=Connection(
            method="ssh", host="192.0.2.10", port=2222, user="ubuntu")).model_dump_json()


def test_only_usable_parts_make_an_endpoint():
    assert ssh_endpoint(" 192.0.2.10 ", "22", "ubuntu") == Connection(
        method="ssh", host="192.0.2.10", port=22, user="ubuntu")
    assert ssh_endpoint("-oProxyCommand=evil", 22, "ubuntu") is None
    assert ssh_endpoint("192.0.2.10", 70000, "ubuntu") is None
    assert ssh_endpoint("192.0.2.10", 22, "root me") is None
    assert ssh_endpoint(None, 22, "ubuntu") is None
