"""`gpucloud state`: where this computer's state lives (the home's file or the
team database), and the one-time copy of a home into a team database."""

from __future__ import annotations

import typer

from gpucloud.cli import output, params
from gpucloud.cli.app import HelpGroup, app

state_app = typer.Typer(cls=HelpGroup, no_args_is_help=True,
                        help="Where the journal, ledger and budget live; copy a home's "
                             "state into a team database.")
app.add_typer(state_app, name="state")


@state_app.command("show")
def show(json_output: bool = params.JSON) -> None:
    """Say which store holds the state (the local file or the team database),
    its schema version, and how much it holds."""
    from gpucloud.config.settings import load_config
    from gpucloud.safety import schema_version
    from gpucloud.safety.state_store import open_journal

    journal = open_journal(load_config())
    launches = journal.all() if journal.exists() else []
    unresolved = [r for r in launches if r.status in ("intent", "ambiguous")]
    doc = {"store": "postgresql" if journal.team is not None else "sqlite",
           "where": journal.where, "schema_version": schema_version.VERSION,
           "launches": len(launches), "unresolved": len(unresolved)}
    if json_output:
        output.emit_json(doc)
        return
    kind = "team database (PostgreSQL)" if journal.team is not None else "local file (SQLite)"
    output.out(f"{kind}: {journal.where}\nschema version {doc['schema_version']}; "
               f"{doc['launches']} launches journaled, {doc['unresolved']} unresolved")


@state_app.command("migrate")
def migrate(
    to: str = typer.Option(..., "--to", metavar="URL",
                           help="The team database: postgresql://host:5432/dbname, no "
                                "password (PGPASSWORD, ~/.pgpass or the keyring give it)."),
    json_output: bool = params.JSON,
) -> None:
    """Copy this home's local journal, ledger and volume records into a team
    database, once (running it again copies nothing twice)."""
    from gpucloud.config.settings import state_db_path
    from gpucloud.config.state_url import check_url
    from gpucloud.safety.journal import Journal
    from gpucloud.safety.state_migrate import migrate as copy
    from gpucloud.safety.store_postgres import PostgresStore

    url = check_url(to, "--to")
    report = copy(state_db_path(), Journal(state_db_path(), PostgresStore(url)))
    if json_output:
        output.emit_json(output.dump(report))
        return
    output.out(f"copied {report.source} into {report.target}:\n"
               f"  launches: {report.launches_copied} copied, {report.launches_present} "
               "already there\n"
               f"  ledger: {report.ledger_rows_copied} rows of {report.machines_copied} "
               f"machines copied; {report.machines_present} machines the team's ledger "
               "already follows were left as they are\n"
               f"  volumes: {report.volumes_copied} copied, {report.volumes_present} "
               "already there")
    output.err("set [state] url in config.toml (or GPUCLOUD_STATE_URL) to use the team "
               "database from now on")
