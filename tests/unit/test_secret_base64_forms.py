"""secret_forms: a secret is found inside the base64 of any text that holds
it, whatever its offset, in both alphabets (RFC 4648 sections 4 and 5); what
is left beside the replacement decodes to no piece of the secret; a short
secret is replaced only as itself and its own base64; other text is kept."""

from __future__ import annotations

import base64
import random
import re

import pytest

from gpucloud.transport.redaction import MIN_BASE64_SECRET, REDACTED, scrub, secret_forms

ENCODERS = (base64.b64encode, base64.urlsafe_b64encode)


def _decoded(text: str) -> list[bytes]:
    """Every decoding of every base64 run in ``text``, at each character alignment."""
    out = []
    for run in re.findall(r"[A-Za-z0-9+/_-]{4,}", text):
        for skip in range(4):
            part = run[skip:]
            part = part[:len(part) - len(part) % 4]
            for alt in (None, b"-_"):
                try:
                    out.append(base64.b64decode(part, altchars=alt))
                except ValueError:
                    pass
    return out


@pytest.mark.parametrize("length", [8, 9, 10, 20, 41])
def test_the_secret_at_any_offset_inside_encoded_text_is_replaced(length: int) -> None:
    rng = random.Random(length)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_~?>"
    secret = "".join(rng.choice(alphabet) for _ in range(length)).encode()
    forms = secret_forms([secret.decode()])
    for before in (b"", b"u", b"us", b"user:", b"Bearer-", b"\x00\xff\x10"):
        for after in (b"", b"y", b"\n\n", b"@host:443"):
            for encode in ENCODERS:
                printed = "Authorization: Basic " + encode(before + secret + after).decode()
                shown = scrub(printed, forms)
                assert REDACTED in shown, (before, after, printed)
                pieces = {secret[i:i + 2] for i in range(len(secret) - 1)}
                leaked = [d for d in _decoded(shown.replace(REDACTED, " "))
                          if any(p in d for p in pieces)]
                assert leaked == [], (before, after, shown, leaked)


def test_a_short_secret_is_replaced_only_as_itself_and_its_own_base64() -> None:
    short = "pw-1234"  # under MIN_BASE64_SECRET: its pieces of base64 are a few characters
    assert len(short) < MIN_BASE64_SECRET
    forms = secret_forms([short])
    for encode in ENCODERS:
        whole = encode(short.encode()).decode()
        assert scrub(f"{short} {whole} {whole.rstrip('=')}", forms) == " ".join([REDACTED] * 3)
        inside = encode(b"user:" + short.encode()).decode()
        assert scrub(inside, forms) == inside  # said so in secret_forms' docstring
    wholes = {e(short.encode()).decode().rstrip(strip) for e in ENCODERS for strip in ("", "=")}
    assert forms == {short, *wholes}  # nothing shorter


def test_text_without_the_secret_is_kept() -> None:
    forms = secret_forms(["sk-live~~~???>>>abc1", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123"])
    rng = random.Random(7)
    lines = ["epoch 3 loss=0.2513 lr=3e-4 step 1200/5000",
             "Authorization: Basic " + base64.b64encode(b"alice:correct-horse").decode()]
    # Unrelated base64 of every alignment and length, as a log may hold.
    lines += [base64.b64encode(rng.randbytes(n)).decode() for n in range(1, 200)]
    for line in lines:
        assert scrub(line, forms) == line
