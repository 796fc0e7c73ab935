"""Which keyring backend holds credentials, and advice that never leads to a
plaintext file unsaid."""

from __future__ import annotations

import keyring
from keyring.backends import chainer
from keyring.backends import fail as failing_backend

from gpucloud.config.credentials import NO_KEYRING_ADVICE, CredentialStore, keyring_backend
from tests.conftest import MemoryKeyring


class PlaintextKeyring(MemoryKeyring):
    """Named as keyrings.alt names its unencrypted file backend."""


def test_the_active_backend_is_named(isolated):
    backend = keyring_backend()
    assert backend.name == "tests.conftest.MemoryKeyring" and not backend.plaintext
    assert backend.warning is None


def test_a_chain_reports_its_first_backend(monkeypatch):
    chain = chainer.ChainerBackend()
    monkeypatch.setattr(chainer.ChainerBackend, "backends", [PlaintextKeyring(), MemoryKeyring()])
    keyring.set_keyring(chain)
    backend = keyring_backend()
    assert backend.name.endswith("PlaintextKeyring") and backend.plaintext
    assert "unencrypted" in backend.warning


def test_the_no_keyring_hint_says_plaintext_is_plaintext():
    keyring.set_keyring(failing_backend.Keyring())
    store = CredentialStore(environ={})
    assert store.find("lambda") is None and store.keyring_problem
    hint = store.how_to_set("lambda")
    assert NO_KEYRING_ADVICE in hint and "encrypted keyring backend" in hint
    assert "PlaintextKeyring would keep the key unencrypted" in hint
