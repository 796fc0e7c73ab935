"""Which providers may run a job, decided at plan time from what each adapter
declares (``Capabilities``), before anything is sent.

* ``nodes: 1`` runs where the adapter runs a job's container to completion
  (``jobs``); elsewhere a machine is only for use over SSH.
* ``nodes > 1`` runs only where the adapter says how: "native" (the provider
  places the nodes itself) or "batch" (gpucloud launches the nodes as one
  batch in one region). A provider that says "none" is never a candidate: a
  multi-node job must never run silently on one machine.
* ``placement.interconnect: infiniband`` with ``nodes > 1`` runs only where the
  provider places the nodes itself ("native"): there the fabric is the
  provider's to give (a cluster's RDMA resource, a cluster product built on
  InfiniBand, the sandbox's simulation). A "batch" provider launches separate
  machines one by one, and no call of theirs requests or guarantees InfiniBand
  between two of them, so it is refused rather than promised.
* ``volumes`` with ``nodes > 1`` run where the provider places the nodes (and
  mounts the volume on each) itself, or on a "batch" provider whose volumes
  mount on many machines at once (``Capabilities.shared_volumes``: Lambda's
  filesystems, Verda's shared filesystems): each node is launched with them
  attached and its start over ssh mounts them. Another batch provider's
  volume could be on one machine only, so the job would run without its
  data on the others: refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from gpucloud.errors import SpecError, option
from gpucloud.jobs.spec import JobSpec
from gpucloud.models import Offer
from gpucloud.providers.capabilities import Capabilities


def _capabilities(provider: str) -> Capabilities:
    """What the adapter declares; nothing (every flag off) without an adapter,
    or for a broken plugin, which can run nothing."""
    from gpucloud.providers.registry import adapter_class

    try:
        cls = adapter_class(provider)
    except (ImportError, AttributeError):
        return Capabilities()
    return Capabilities() if cls is None else cls.capabilities


def mode(provider: str) -> str:
    """The adapter's ``multi_node`` ("none" without an adapter)."""
    return _capabilities(provider).multi_node


def shares_volumes(provider: str) -> bool:
    """The adapter's ``shared_volumes`` (False without an adapter)."""
    return _capabilities(provider).shared_volumes


def can_run(spec: JobSpec, provider: str) -> bool:
    if spec.nodes == 1:
        return _capabilities(provider).jobs
    placed = mode(provider)
    if placed == "native":
        return True
    return placed == "batch" and spec.placement.interconnect != "infiniband" and (
        not spec.volumes or shares_volumes(provider))


def able(spec: JobSpec, names: Iterable[str] | None = None) -> list[str]:
    """The providers (all with an adapter, or ``names``) that can run the job."""
    from gpucloud.providers.registry import adapter_names

    return [n for n in (adapter_names() if names is None else names) if can_run(spec, n)]


def refusal(spec: JobSpec, providers: Iterable[str]) -> SpecError:
    """The one-line refusal naming why the providers cannot, and those that can."""
    refused = sorted(set(providers))
    if spec.nodes == 1:
        return SpecError(
            f"a one-node job cannot run on {', '.join(refused)}: "
            f"{'it runs' if len(refused) == 1 else 'they run'} no job's container to "
            f"completion; providers that can: {', '.join(able(spec)) or 'none installed'}",
            hint=f"pick one with {option('provider', '--provider')} (provider: in the job "
                 "file), or create a machine there and run the container over SSH; "
                 "nothing was sent")
    batch = [p for p in refused if mode(p) == "batch"]  # infiniband or volumes refuse these
    none = [p for p in refused if p not in batch]
    infiniband = spec.placement.interconnect == "infiniband"
    cannot = " and ".join((["cannot request or guarantee InfiniBand between them"]
                           if infiniband else [])
                          + (["cannot mount one volume on every node"] if spec.volumes and
                             not all(shares_volumes(p) for p in batch) else []))
    why = ([f"{', '.join(none)} {'has' if len(none) == 1 else 'have'} no multi-node support"]
           if none else []) + (
        [f"{', '.join(batch)} {'launches' if len(batch) == 1 else 'launch'} separate machines "
         f"and {cannot}"] if batch else [])
    asked = " and ".join((["interconnect: infiniband"] if infiniband else [])
                         + (["volumes"] if spec.volumes else []))
    return SpecError(
        f"a {spec.nodes}-node job{f' with {asked}' if asked else ''} "
        f"cannot run on {', '.join(refused)}: {'; '.join(why)}; providers that can: "
        f"{', '.join(able(spec)) or 'none installed'}",
        hint=f"pick one with {option('provider', '--provider')} (provider: in the job file)"
             + (", or interconnect: any" if infiniband else "")
             + (", or no volumes" if spec.volumes else "")
             + ", or set nodes: 1; nothing was sent")


def retries_note(spec: JobSpec, provider: str) -> tuple[str, ...]:
    """The plan's note where a multi-node job's ``retries`` cannot apply."""
    if spec.nodes == 1 or not spec.retries or _capabilities(provider).multi_node_retries:
        return ()
    return (f"retries: {spec.retries} does not apply to a multi-node job on {provider}: "
            "a lost node fails the whole job (no node runs its command again alone); "
            "submit it again to resume from its checkpoint",)


def check_named(spec: JobSpec, provider: str | None) -> None:
    """Refuse a named provider that cannot run the job, before any offer is read."""
    if provider is not None and not can_run(spec, provider):
        raise refusal(spec, [provider])


def offer_filter(spec: JobSpec, refused: set[str]) -> Callable[[Offer], bool]:
    """Keeps the offers of providers that can run the job, and of those only the
    offers their adapter places nodes on (``Provider.takes_nodes``: RunPod's
    clusters run on its secure cloud only); the providers of those dropped are
    added to ``refused`` (to name them should nothing be left)."""
    from gpucloud.providers.registry import adapter_class

    known: dict[str, Any] = {}  # provider: its adapter class, or False: cannot run the job

    def fits(offer: Offer) -> bool:
        if offer.provider not in known:
            known[offer.provider] = can_run(spec, offer.provider) and \
                adapter_class(offer.provider)
        if not known[offer.provider]:
            refused.add(offer.provider)
            return False
        return spec.nodes == 1 or bool(known[offer.provider].takes_nodes(offer))
    return fits


__all__ = ["able", "can_run", "check_named", "mode", "offer_filter", "refusal",
           "retries_note", "shares_volumes"]
