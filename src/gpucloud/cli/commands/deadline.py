"""Commands about deadlines: extend one, reap them all."""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Optional

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import app, fail
from gpucloud.cli.commands.instance import _confirm


@app.command()
def extend(
    ref: str = typer.Argument(..., metavar="REF",
                              help="provider/id, the machine's name, or a unique id prefix."),
    by: Optional[str] = typer.Option(None, "--by", metavar="DURATION",
                                     help="How much later, e.g. 2h, 30m (from the current "
                                          "deadline)."),
    until: Optional[str] = typer.Option(None, "--until", metavar="TIME",
                                        help="New deadline, ISO-8601 with a zone, e.g. "
                                             "2026-12-01T18:00Z."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_output: bool = params.JSON,
) -> None:
    """Move a machine's deadline later, on the provider and in the journal.

    Shows what the extra time costs and asks first: a later deadline is more spend.
    """
    from gpucloud.catalog import pricing
    from gpucloud.client import Client
    from gpucloud.safety.deadlines import new_deadline

    client = Client()
    instance = client.get(ref)
    now = output.utcnow()
    # The absolute target, computed once at the provider's precision and sent
    # as --until: a retry of this command moves nothing twice.
    precision = client.provider(instance.provider).deadline_precision
    target = new_deadline(instance, by, until, now, precision)
    start = max(instance.shutdown_at or now, now)
    extra = pricing.duration_hours(target - start)
    if instance.shutdown_at is None:
        cost = "sets a deadline where there was none"
    elif instance.price_per_hour is None:
        cost = f"adds {output.span(target - start)} at an unknown price"
    else:
        cost = (f"adds {output.span(target - start)}, about "
                f"{output.usd(instance.price_per_hour * extra)} at "
                f"{output.usd(instance.price_per_hour)}/h")
    if instance.shutdown_at is not None and instance.shutdown_at <= now:
        cost += f"; it was {output.span(now - instance.shutdown_at)} overdue, so from now"
    if not json_output:
        output.err(f"{instance.ref}: deadline {output.iso(instance.shutdown_at) or 'none'} -> "
                   f"{output.iso(target)} ({cost})")
    # The budget is checked before asking: never ask to confirm what is then
    # refused (exit 7). client.extend checks it again (the SDK path).
    client.check_extension(instance, target, now=now)
    shown = client.warnings
    if not json_output:
        for warning in shown:
            output.warn(warning)
    if instance.shutdown_at is not None:
        _confirm(f"Extend {instance.ref} to {output.iso(target)}?", yes, json_output,
                 "extending a deadline")
    updated = client.extend(instance, until=target)
    if json_output:
        output.emit_json({"instance": output.dump(updated), "previous_shutdown_at":
                          output.iso(instance.shutdown_at), "warnings": client.warnings})
        return
    for warning in client.warnings:
        if warning not in shown:
            output.warn(warning)
    left = output.time_left(updated) or "-"
    was = ("had no deadline" if instance.shutdown_at is None
           else "was overdue" if instance.shutdown_at <= now else "")
    output.out(f"extended {updated.ref}: deadline {output.iso(updated.shutdown_at)} "
               f"(in {left})" + (f"; it {was}" if was else ""))


def _report_text(report: Any) -> None:
    for warning in report.warnings:
        output.warn(warning)
    for action in report.actions:
        i = action.instance
        what = {"terminated": "terminated", "would_terminate": "would terminate",
                "extended": "kept (deadline moved since the listing)",
                "failed": "FAILED to terminate", "gone": "already gone"}[action.action]
        late = output.span(timedelta(seconds=action.overdue_seconds))
        line = (f"{what}: {i.ref} ({i.name or '-'}), deadline {output.iso(i.shutdown_at)}"
                + (f", {late} overdue" if action.action != "extended" else ""))
        if getattr(action, "reason", None):  # a node of a multi-node job that lost one
            line = f"{what}: {i.ref} ({i.name or '-'}), a node of a job that lost one: " \
                   f"{action.reason}"
        output.out(line + (f": {action.error}" if action.error else ""))
    if report.unclaimed:
        from gpucloud.cli.commands.reconcile import _unclaimed_line

        for u in report.unclaimed:
            output.out(_unclaimed_line(u) + " (reported, not reaped)")
    done = sum(1 for a in report.actions if a.action in ("terminated", "would_terminate"))
    verb = "would terminate" if report.dry_run else "terminated"
    output.err(f"{output.iso(report.at)} reap: {report.checked} gpucloud machine(s) on "
               f"{', '.join(report.providers) or 'no provider'}; {verb} {done}")


def _install(json_output: bool, write: bool, target: str | None = None) -> None:
    from gpucloud.safety import reaper_install
    from gpucloud.machine import remote_install
    from gpucloud.client import Client
    from gpucloud.config.credentials import env_vars

    client = Client()
    statuses = [s for s in client.providers() if not s.simulated]
    chosen = [s for s in statuses if s.credentials] or statuses
    variables: list[str] = []
    for status in chosen:
        variables.extend(env_vars(status.name, client.provider(status.name).auth_kind))
    from gpucloud.config.settings import state_url

    if state_url(client.config) is not None:
        # Team mode: the reapers write the team's ledger; the URL and the
        # reaper role's password come from the Secret like the keys.
        variables.extend(("GPUCLOUD_STATE_URL", "PGPASSWORD"))
    source = remote_install.source(client.config)
    if target == "kubernetes":
        _install_deployment(client, variables, source, json_output, write)
        return
    files = reaper_install.render(variables, source)
    written = reaper_install.write(files, Path.cwd()) if write else []
    if json_output:
        output.emit_json({"systemd": {"service": files.service, "timer": files.timer,
                                      "environment_file": str(files.env_file),
                                      "environment_template": files.env_template,
                                      "unit_dir": str(files.unit_dir)},
                          "kubernetes_cronjob": files.cronjob,
                          "written": [str(p) for p in written],
                          "install_source": source.as_json()})
        return
    _say_source(source, "CronJob")
    if write:
        for path in written:
            output.out(f"wrote {path}")
        output.out(f"next: fill in {files.env_file} (chmod 600), then\n"
                   "  systemctl --user daemon-reload && systemctl --user enable --now "
                   f"{reaper_install.TIMER}\n"
                   f"or on a cluster: see the two commands at the top of "
                   f"{reaper_install.CRONJOB}")
        return
    output.out(f"# --- {files.unit_dir / reaper_install.SERVICE}\n{files.service}")
    output.out(f"# --- {files.unit_dir / reaper_install.TIMER}\n{files.timer}")
    output.out(f"# --- {files.env_file}  (chmod 600; fill in the keys)\n{files.env_template}")
    output.out(f"# --- {reaper_install.CRONJOB}\n{files.cronjob}")
    output.err("`gpucloud reap --install --write` writes these files; no key is ever written "
               "into them")


def _say_source(source: Any, runs: str) -> None:
    """Where the reaper's machine gets gpucloud, and any caveat of that source."""
    output.err(f"gpucloud will be installed on the machine from: {source.describe()}"
               + (f"; the {runs} runs the image {source.image} ([remote] image)"
                  if source.image else ""))
    caveat = source.caveat()
    if caveat:
        output.warn(caveat)


def _install_deployment(client: Any, variables: list[str], source: Any, json_output: bool,
                        write: bool) -> None:
    """`reap --install kubernetes`: elected reapers as a Deployment, with their
    Lease's ServiceAccount and RBAC."""
    from gpucloud.client.reaper_election import lease_namespace
    from gpucloud.safety import reaper_install

    namespace = lease_namespace(client.config) or "default"
    text = reaper_install.render_deployment(variables, source, namespace)
    written = [reaper_install.write_deployment(text, Path.cwd())] if write else []
    if json_output:
        output.emit_json({"kubernetes_deployment": text, "namespace": namespace,
                          "written": [str(p) for p in written],
                          "install_source": source.as_json()})
        return
    _say_source(source, "Deployment")
    if write:
        output.out(f"wrote {written[0]}")
        output.out(f"next: see the two commands at the top of {reaper_install.DEPLOYMENT}")
        return
    output.out(f"# --- {reaper_install.DEPLOYMENT}\n{text}")
    output.err("`gpucloud reap --install kubernetes --write` writes this file; no key is ever "
               "written into it")


@app.command()
def reap(
    target: Optional[str] = typer.Argument(None, metavar="[TARGET]",
                                           help="With --install: kubernetes prints only the "
                                                "Kubernetes Deployment of elected reapers "
                                                "(its Lease, ServiceAccount and RBAC)."),
    provider: Optional[str] = params.PROVIDER,
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would be terminated; "
                                                          "terminate nothing."),
    watch: Optional[str] = typer.Option(None, "--watch", metavar="INTERVAL",
                                        help="Run again every INTERVAL (e.g. 60s) until "
                                             "interrupted; --json then prints one line per pass."),
    lease: Optional[str] = typer.Option(None, "--lease", metavar="KIND",
                                        help="With --watch: elect one acting reaper among "
                                             "several: kubernetes (a Lease), database (the "
                                             "team database) or none. Default: database when "
                                             "a team state URL is set, else none."),
    install: bool = typer.Option(False, "--install",
                                 help="Print a systemd user timer and a Kubernetes CronJob "
                                      "that run the reaper every minute."),
    write: bool = typer.Option(False, "--write", help="With --install: write the files "
                                                      "instead of printing them."),
    json_output: bool = params.JSON,
) -> None:
    """Terminate every gpucloud machine past its deadline, on every provider with credentials.

    Works from the providers' own records (tags, labels, env, description), not the
    local journal: any machine with the same credentials can run it.
    """
    if write and not install:
        fail(2, "usage", "--write goes with --install", "gpucloud reap --install --write",
             json_output)
    if target is not None and not install:
        fail(2, "usage", f"unexpected argument {target!r}: a TARGET goes with --install",
             "gpucloud reap --install kubernetes", json_output)
    if install:
        if target not in (None, "kubernetes"):
            fail(2, "usage", f"unknown install target {target!r}",
                 "gpucloud reap --install kubernetes (or --install alone: every form)",
                 json_output)
        _install(json_output, write, target)
        return
    from gpucloud.catalog import pricing
    from gpucloud.client import Client

    if lease is not None and watch is None:
        fail(2, "usage", "--lease goes with --watch: a single pass elects nobody",
             "gpucloud reap --watch 60s --lease kubernetes", json_output)
    interval = pricing.parse_duration(watch).total_seconds() if watch is not None else None
    elector = None
    if interval is not None:
        elector = _elector(lease, interval, json_output)
    client = Client()
    if elector is not None:
        failed = _watch_elected(client, elector, interval or 0.0, dry_run, provider,
                                json_output)
    else:
        failed = _watch_alone(client, interval, dry_run, provider, json_output)
    if failed:
        raise typer.Exit(10)


def _one_pass(client: Any, interval: float | None, dry_run: bool, provider: str | None,
              json_output: bool, extra: dict[str, Any]) -> bool:
    """One reap pass, reported; True when a delete failed."""
    from gpucloud.errors import GpuCloudError

    try:
        # A watch also reports unclaimed machines (never ends them for that).
        report = client.reap(dry_run=dry_run, provider=provider,
                             unclaimed=interval is not None)
    except GpuCloudError as exc:
        if interval is None:
            raise
        # A daemon outlives a bad minute: say so and try again next pass.
        if json_output:
            output.emit_json({"error": {"code": exc.code, "message": exc.message,
                                        "hint": exc.hint}, **extra})
        else:
            output.warn(f"reap pass failed: {exc.message}")
        return False
    if json_output:
        output.emit_json({**output.dump(report), **extra})
    else:
        _report_text(report)
    return any(a.action == "failed" for a in report.actions)


def _watch_alone(client: Any, interval: float | None, dry_run: bool, provider: str | None,
                 json_output: bool) -> bool:
    failed = False
    while True:
        failed = _one_pass(client, interval, dry_run, provider, json_output, {})
        if interval is None:
            return failed
        sys.stdout.flush()
        time.sleep(interval)


def _elector(kind: str | None, interval: float, json_output: bool) -> Any:
    """The elector for --lease (None: no election, the loop of a lone reaper)."""
    from gpucloud.client.reaper_election import KINDS, elector
    from gpucloud.safety.reaper_watch import MIN_INTERVAL, lease_seconds

    if kind is not None and kind not in KINDS:
        fail(2, "usage", f"unknown --lease kind {kind!r}",
             f"--lease takes {', '.join(KINDS)}", json_output)
    if kind == "none":
        return None
    if kind is not None and interval < MIN_INTERVAL:
        fail(2, "usage", f"--lease needs --watch of at least {MIN_INTERVAL:g}s: a lease "
             "lasts whole seconds", "gpucloud reap --watch 60s --lease kubernetes", json_output)
    chosen = elector(kind, interval, lease_seconds=lease_seconds(max(interval, MIN_INTERVAL)))
    return None if chosen.kind == "none" else chosen


class _Terminated(BaseException):
    """SIGTERM (a Deployment's pod stopping): leave the loop, release the lease (a
    BaseException, like Ctrl-C's, so that no handler of a pass swallows it)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated()


def _watch_elected(client: Any, elector: Any, interval: float, dry_run: bool,
                   provider: str | None, json_output: bool) -> bool:
    """Passes every `interval` by whichever reaper leads; the rhythm and why it
    hands over within two intervals: gpucloud.safety.reaper_watch."""
    import signal

    from gpucloud.safety.kube_lease import identity
    from gpucloud.safety.reaper_watch import Renewing, poll_seconds

    poll = poll_seconds(interval)
    me = getattr(elector, "identity", None) or identity()
    failed = False
    leading_before = False
    next_pass = next_standby = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        while True:
            leading = elector.lead()
            now = time.monotonic()
            if leading and (not leading_before or now >= next_pass):
                if not leading_before and not json_output:
                    output.err(f"{output.iso(output.utcnow())} reap: {elector.describe()}")
                next_pass = now + interval
                with Renewing(elector, poll) as renewing:
                    # As a lone watch: the last pass decides the exit status.
                    failed = _one_pass(client, interval, dry_run, provider, json_output,
                                       {"leader": me, "lease": elector.kind})
                if renewing.lost:
                    leading = False  # the next try says who leads now
            elif not leading and now >= next_standby:
                next_standby = now + interval
                holder = getattr(elector, "holder", None)
                holder = None if holder == me else holder  # "not leading" by an error: unknown
                if json_output:
                    output.emit_json({"standby": True, "leader": holder,
                                      "lease": elector.kind, "identity": me,
                                      "at": output.iso(output.utcnow())})
                else:
                    output.err(f"{output.iso(output.utcnow())} reap: standing by: "
                               f"{elector.describe()}")
            leading_before = leading
            sys.stdout.flush()
            wait = poll if not leading else max(0.0, min(poll, next_pass - time.monotonic()))
            time.sleep(wait)
    except _Terminated:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one release, not two
        elector.release()
        signal.signal(signal.SIGTERM, previous)
    return failed
