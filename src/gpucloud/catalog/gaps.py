"""Providers the bundled catalog has nothing for, in one offers query.

Not an error, and rarely news: a provider that never sold an 8x A100 has
nothing to list for one, every time. The SDK keeps one warning per provider
(``Client.warnings``, and so ``--json``, say each); the CLI says them all in
one line on stderr, which ``--quiet`` or ``[defaults] quiet_missing = true``
silences.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CatalogGap:
    provider: str
    what: str  # the request, e.g. "8x H100" or "1x H100 in FIN-01"
    warning: str  # its text in Client.warnings
    credentials_help: bool  # live offers would come with this provider's credentials


def summary(gaps: list[CatalogGap]) -> str:
    """One line for every provider missing from the catalog for one request."""
    names = ", ".join(g.provider for g in gaps)
    helped = [g.provider for g in gaps if g.credentials_help]
    text = f"no {gaps[0].what} in the bundled catalog of {names}"
    if helped:
        text += ("; add credentials for live offers" if len(helped) == len(gaps)
                 else f"; add credentials of {', '.join(helped)} for live offers")
    return text + " (--quiet or [defaults] quiet_missing = true hides this)"
