"""Where gpucloud keeps its files, and the user's config file.

``GPUCLOUD_HOME``, when set, holds everything: ``config.toml``, the state
database, caches. Unset, config lives in platformdirs' user config dir and
state in its user data dir. No secret is ever read from or written to these
files: keys come from the environment or the keyring.

config.toml:

    [defaults]
    providers = ["lambda", "runpod"]   # what Client() considers by default
    auto_shutdown = "8h"               # deadline of new machines unless given
    quiet_missing = true               # CLI: do not say which providers the bundled
                                       # catalog has nothing for (like --quiet)

    [sandbox]                          # knobs of the simulated cloud
    capacity = 4
    boot_seconds = 2

    [budget]
    monthly = "5000"                   # USD per calendar month (UTC); budget.py
    [budget.users]                     # each user's own share (GPUCLOUD_USER, else
    alice = "2000"                     # the OS user: config/identity.py)
    [budget.projects]                  # each project's (create/submit --project)
    vision = "3000"

    [state]                            # team mode: one journal, ledger and budget
    url = "postgresql://db:5432/gpucloud"  # (GPUCLOUD_STATE_URL wins); no password here

    [remote]                           # where gpucloud comes from on machines
    install = "gpucloud==0.1.0"        # that run it unattended; remote_install.py
    image = "ghcr.io/you/gpucloud:0.1.0"
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from gpucloud.errors import ConfigurationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

APP = "gpucloud"
CONFIG_MAX_DEPTH = 32  # tables and arrays within each other; a real config.toml has 3


def config_dir() -> Path:
    home = os.environ.get("GPUCLOUD_HOME")
    if home:
        return Path(home).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir(APP))


def data_dir() -> Path:
    home = os.environ.get("GPUCLOUD_HOME")
    if home:
        return Path(home).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir(APP))


def cache_dir() -> Path:
    """Files gpucloud can rebuild at any time (parsed catalogs, what the keyring
    detection found): deleting the directory only costs one slower run."""
    home = os.environ.get("GPUCLOUD_HOME")
    if home:
        return Path(home).expanduser() / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP))


def state_db_path() -> Path:
    return data_dir() / "state.sqlite"


def sandbox_db_path() -> Path:
    explicit = os.environ.get("GPUCLOUD_SANDBOX_DB")
    if explicit:
        return Path(explicit).expanduser()
    return data_dir() / "sandbox" / "cloud.sqlite"


# The queue task a process runs for: the worker sets it in each task's
# environment (queue/runners.py), and the client reads it once, when made,
# so that the launches and ledger rows the task causes carry its id.
TASK_ID_ENV = "GPUCLOUD_TASK_ID"


def queue_task_id() -> str | None:
    """The id of the queue task this process runs, or None outside a task."""
    return os.environ.get(TASK_ID_ENV, "").strip() or None


@dataclass(frozen=True)
class Config:
    path: Path
    providers: tuple[str, ...] | None = None
    auto_shutdown: str | None = None
    sandbox: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    budget_monthly: Decimal | None = None  # USD; None: no monthly budget
    # [budget.users] / [budget.projects]: each user's and project's monthly budget, USD.
    budget_users: dict[str, Decimal] = field(default_factory=dict)
    budget_projects: dict[str, Decimal] = field(default_factory=dict)
    remote_install: str | None = None  # [remote] install; None: this version from the index
    remote_image: str | None = None  # [remote] image: a container image holding gpucloud
    quiet_missing: bool = False  # [defaults] quiet_missing: the CLI's --quiet by default
    state_url: str | None = None  # [state] url: the team database (GPUCLOUD_STATE_URL wins)

    @property
    def budgeted(self) -> bool:
        """Whether any monthly budget is set: the home's, a user's or a project's."""
        return self.budget_monthly is not None or bool(self.budget_users) \
            or bool(self.budget_projects)


def load_config(path: Path | None = None) -> Config:
    path = path or config_dir() / "config.toml"
    if not path.is_file():
        return Config(path=path)
    from gpucloud.config.file_limits import MIB, InputLimitError, depth_of, read_limited

    try:
        data = tomllib.loads(read_limited(path, MIB))
        depth_of(data, CONFIG_MAX_DEPTH)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}",
                                 hint="fix the file or move it away") from exc
    except (InputLimitError, RecursionError) as exc:
        # tomllib parses arrays and inline tables by recursion: thousands of
        # nested brackets end in RecursionError, refused like any other limit.
        reason = str(exc) if isinstance(exc, InputLimitError) else \
            f"nested deeper than {CONFIG_MAX_DEPTH} levels, the limit"
        raise ConfigurationError(f"{path} is refused: {reason}",
                                 hint=f"config.toml is at most 1 MiB and {CONFIG_MAX_DEPTH} "
                                      "levels deep; fix the file or move it away") from None
    defaults, sandbox = data.get("defaults", {}), data.get("sandbox", {})
    for section, value in (("defaults", defaults), ("sandbox", sandbox)):
        if not isinstance(value, dict):
            raise ConfigurationError(f"{path}: [{section}] must be a table",
                                     hint=f"write it as a [{section}] section")
    providers = defaults.get("providers")
    if providers is not None and not (
            isinstance(providers, list) and all(isinstance(p, str) for p in providers)):
        raise ConfigurationError(f"{path}: defaults.providers must be a list of names",
                                 hint='e.g. providers = ["lambda", "runpod"]')
    auto_shutdown = defaults.get("auto_shutdown")
    if auto_shutdown is not None and not isinstance(auto_shutdown, str):
        raise ConfigurationError(f"{path}: defaults.auto_shutdown must be a duration string",
                                 hint='e.g. auto_shutdown = "8h"')
    quiet_missing = defaults.get("quiet_missing", False)
    if not isinstance(quiet_missing, bool):
        raise ConfigurationError(f"{path}: defaults.quiet_missing must be true or false",
                                 hint="e.g. quiet_missing = true (no quotes)")
    remote_install, remote_image = _remote(path, data)
    monthly, users, projects = _budget(path, data)
    return Config(path=path, providers=tuple(providers) if providers is not None else None,
                  auto_shutdown=auto_shutdown, sandbox=dict(sandbox), raw=data,
                  budget_monthly=monthly, budget_users=users, budget_projects=projects,
                  remote_install=remote_install, remote_image=remote_image,
                  quiet_missing=quiet_missing, state_url=_state_url(path, data))


def _state_url(path: Path, data: dict[str, Any]) -> str | None:
    """[state] url = "postgresql://host:5432/gpucloud": the team database."""
    section = data.get("state", {})
    if not isinstance(section, dict):
        raise ConfigurationError(f"{path}: [state] must be a table",
                                 hint='write it as a [state] section: '
                                      'url = "postgresql://host:5432/gpucloud"')
    unknown = sorted(set(section) - {"url"})
    if unknown:
        raise ConfigurationError(f"{path}: unknown key state.{unknown[0]}",
                                 hint="the [state] section knows url")
    url = section.get("url")
    if url is None:
        return None
    if not isinstance(url, str):
        raise ConfigurationError(f"{path}: state.url must be a string",
                                 hint='e.g. url = "postgresql://host:5432/gpucloud"')
    from gpucloud.config.state_url import check_url

    return check_url(url, str(path))


def state_url(config: Config) -> str | None:
    """The team database's URL: GPUCLOUD_STATE_URL, else [state] url; None: the
    local state file (an empty GPUCLOUD_STATE_URL also means local)."""
    explicit = os.environ.get("GPUCLOUD_STATE_URL")
    if explicit is not None:
        if not explicit.strip():
            return None
        from gpucloud.config.state_url import check_url

        return check_url(explicit.strip(), "GPUCLOUD_STATE_URL")
    return config.state_url


def _remote(path: Path, data: dict[str, Any]) -> tuple[str | None, str | None]:
    """[remote] install / image: see remote_install.py for the accepted forms."""
    from gpucloud.machine import remote_install

    section = data.get("remote", {})
    if not isinstance(section, dict):
        raise ConfigurationError(f"{path}: [remote] must be a table",
                                 hint='write it as a [remote] section: install = "gpucloud==0.1.0"')
    unknown = sorted(set(section) - {"install", "image"})
    if unknown:
        raise ConfigurationError(f"{path}: unknown key remote.{unknown[0]}",
                                 hint="the [remote] section knows install and image")
    install, image = section.get("install"), section.get("image")
    return (None if install is None else remote_install.check_install(path, install),
            None if image is None else remote_install.check_image(path, image))


def _budget(path: Path, data: dict[str, Any]
            ) -> tuple[Decimal | None, dict[str, Decimal], dict[str, Decimal]]:
    """[budget] monthly = "5000": USD per calendar month, a positive amount;
    [budget.users] and [budget.projects]: name = amount, each user's and
    each project's own monthly budget."""
    section = data.get("budget", {})
    if not isinstance(section, dict):
        raise ConfigurationError(f"{path}: [budget] must be a table",
                                 hint='write it as a [budget] section: monthly = "5000"')
    unknown = sorted(set(section) - {"monthly", "users", "projects"})
    if unknown:
        raise ConfigurationError(f"{path}: unknown key budget.{unknown[0]}",
                                 hint='the [budget] section knows monthly = "5000" (USD), and '
                                      'the tables [budget.users] and [budget.projects]')
    value = section.get("monthly")
    monthly = None if value is None else _amount(path, "budget.monthly", value,
                                                 'e.g. monthly = "5000"')
    return monthly, _shares(path, section, "users"), _shares(path, section, "projects")


def _shares(path: Path, section: dict[str, Any], kind: str) -> dict[str, Decimal]:
    """[budget.users] alice = "2000" / [budget.projects] vision = "3000"."""
    from gpucloud.config.identity import PROJECT_FORM, PROJECT_RE

    table = section.get(kind, {})
    example = 'alice = "2000"' if kind == "users" else 'vision = "3000"'
    if not isinstance(table, dict):
        raise ConfigurationError(f"{path}: budget.{kind} must be a table",
                                 hint=f"write it as a [budget.{kind}] section: {example}")
    out: dict[str, Decimal] = {}
    for name, value in table.items():
        if kind == "projects" and not PROJECT_RE.fullmatch(name):
            raise ConfigurationError(f"{path}: budget.projects.{name} is not a project name",
                                     hint=f"a project name is {PROJECT_FORM}")
        out[name] = _amount(path, f"budget.{kind}.{name}", value, f"e.g. {example}")
    return out


def _amount(path: Path, key: str, value: object, example: str) -> Decimal:
    """A positive amount of USD (a string, or a TOML number), at most a billion."""
    try:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InvalidOperation
        # A TOML float goes through its text, so 0.1 stays 0.1.
        amount = Decimal(str(value).strip().lstrip("$").replace("_", ""))
    except InvalidOperation:
        amount = None
    if amount is None or not amount.is_finite() or amount <= 0 or amount > 10 ** 9:
        raise ConfigurationError(f"{path}: {key} must be a positive amount in USD, "
                                 f"got {value!r}", hint=example)
    return amount
