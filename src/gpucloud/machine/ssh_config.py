"""`gpucloud ssh-config`: an OpenSSH config file of ``Host`` entries, one per
machine that can be reached over ssh, so ``ssh my-run``, scp, rsync and
editors' remote extensions work with the machine's name.

The file (default ~/.ssh/gpucloud/config) is gpucloud's alone: each run
rewrites it whole, so machines that are gone lose their entry. It takes
effect through one ``Include`` line at the top of ~/.ssh/config (OpenSSH
reads an Include inside a ``Host`` block as part of that block, so it must
come before the first one); gpucloud adds that line only when asked.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpucloud.models import Instance

DEFAULT_PATH = "~/.ssh/gpucloud/config"
USER_CONFIG = "~/.ssh/config"
HEADER = ("# Written by `gpucloud ssh-config`; rewritten whole on each run (edits are lost).\n"
          "# Include it from the top of ~/.ssh/config: {include}\n")
# A Host pattern word may not hold blanks, wildcards, negation or quotes.
_ALIAS = re.compile(r"[A-Za-z0-9_.@:+-]+")


@dataclass(frozen=True)
class HostEntry:
    host: str
    ref: str
    hostname: str
    port: int
    user: str
    identity_file: str | None
    host_key_alias: str

    def render(self) -> str:
        from gpucloud.machine.ssh import ssh_escape, usable_path

        lines = [f"# gpucloud {self.ref}", f"Host {self.host}",
                 f"    HostName {ssh_escape(self.hostname)}", f"    Port {self.port}",
                 f"    User {self.user}"]
        if self.identity_file:
            if not usable_path(self.identity_file):  # would end the value or the line
                raise ValueError(f"identity path of {self.ref} is not writable in ssh_config")
            lines += [f'    IdentityFile "{ssh_escape(self.identity_file)}"',
                      "    IdentitiesOnly yes"]
        lines += ["    StrictHostKeyChecking accept-new",
                  f"    HostKeyAlias {self.host_key_alias}"]
        return "\n".join(lines) + "\n"


def aliases(instances: list[Instance]) -> dict[str, str]:
    """ref -> Host alias: the machine's name when it is a usable, unique word;
    else its id (a name shared by two machines would send `ssh name` to either);
    else provider-id."""
    names = Counter(i.name for i in instances if i.name)
    ids = Counter(i.id for i in instances)
    out: dict[str, str] = {}
    for i in instances:
        if i.name and names[i.name] == 1 and _ALIAS.fullmatch(i.name) \
                and not i.name.startswith("-"):
            out[i.ref] = i.name
        elif ids[i.id] == 1 and _ALIAS.fullmatch(i.id):
            out[i.ref] = i.id
        else:
            out[i.ref] = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{i.provider}-{i.id}")
    taken = Counter(out.values())  # a name equal to another machine's id
    return {ref: alias if taken[alias] == 1 else
            re.sub(r"[^A-Za-z0-9_.-]", "-", ref.replace("/", "-"))
            for ref, alias in out.items()}


def entries(instances: Iterable[Instance], identity: str | None,
            keys: Mapping[str, str] | None = None
            ) -> tuple[list[HostEntry], list[tuple[str, str]]]:
    """(entries, skipped as (ref, reason)) for the machines given. `keys`:
    ref -> a machine's own IdentityFile (the key create used), else `identity`."""
    keys = keys or {}
    from gpucloud.machine.exec import reachable
    from gpucloud.errors import GpuCloudError
    from gpucloud.machine.ssh import host_key_alias

    usable: list[Instance] = []
    skipped: list[tuple[str, str]] = []
    for i in instances:
        try:
            connection = reachable(i)
        except GpuCloudError as exc:
            if i.status.value not in ("terminated", "terminating"):
                skipped.append((i.ref, exc.message))
            continue
        if connection.method != "ssh":
            skipped.append((i.ref, "reached through the provider's exec API, not ssh: "
                                   f"`gpucloud ssh {i.ref} -- CMD`"))
            continue
        usable.append(i)
    names = aliases(usable)
    made = [HostEntry(host=names[i.ref], ref=i.ref, hostname=str(i.connection.host),
                      port=int(i.connection.port or 22), user=str(i.connection.user),
                      identity_file=keys.get(i.ref, identity),
                      host_key_alias=host_key_alias(i))
            for i in usable if i.connection is not None]
    return sorted(made, key=lambda e: e.host), skipped


def include_line(path: Path) -> str:
    home = Path.home()
    try:
        shown = "~/" + str(path.relative_to(home))
    except ValueError:
        shown = str(path)
    return f"Include {shown}" if " " not in shown else f'Include "{shown}"'


def kept_blocks(path: Path, keep: Callable[[str], bool]) -> list[tuple[str, str, str]]:
    """(ref, host, text) of the entries in our file whose provider `keep` names:
    those not listed this time (`--provider P` lists only P; a provider that
    could not be listed keeps its entries rather than lose them to a glitch)."""
    if not path.is_file():
        return []
    blocks: list[list[str]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("# gpucloud ") and "/" in line:
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    kept = []
    for block in blocks:
        ref = block[0].split(None, 2)[2].strip()
        hosts = [b.split(None, 1)[1] for b in block[1:] if b.startswith("Host ")]
        if keep(ref.split("/", 1)[0]) and hosts:
            kept.append((ref, hosts[0], "\n".join(block).strip() + "\n"))
    return kept


def unlisted(warnings: list[str]) -> set[str]:
    """Providers whose listing failed, from the client's warnings
    ("<provider>: could not list instances (...)")."""
    return {w.split(":", 1)[0] for w in warnings if ": could not list instances" in w}


def render(made: list[HostEntry], path: Path,
           kept: list[tuple[str, str, str]] | None = None) -> str:
    """The whole file. An entry whose Host a kept entry already uses is named
    by its provider-id instead."""
    kept = kept or []
    taken = {host for _, host, _ in kept}
    fixed = [e if e.host not in taken else
             HostEntry(**{**e.__dict__, "host": re.sub(r"[^A-Za-z0-9_.-]", "-",
                                                       e.ref.replace("/", "-"))})
             for e in made]
    blocks = sorted([(e.host, e.render()) for e in fixed] + [(h, t) for _, h, t in kept])
    return HEADER.format(include=include_line(path)) + "".join("\n" + t for _, t in blocks)


def write_private(path: Path, text: str, *, own_dir: bool = True) -> None:
    """Atomically: a reader (ssh) sees the old file or the new one, never half;
    the file is 600 and, when the directory is gpucloud's (`own_dir`), it is 700
    (the file names the user's machines and addresses)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if own_dir:
        os.chmod(path.parent, 0o700)
    from gpucloud.config.atomic import write_atomic

    write_atomic(path, text.encode("utf-8"), mode=0o600)


def includes(user_config: Path, path: Path) -> bool:
    """Whether ~/.ssh/config already includes `path` before any Host/Match block."""
    if not user_config.is_file():
        return False
    wanted = {str(path), include_line(path).split(None, 1)[1].strip('"')}
    for line in user_config.read_text(encoding="utf-8", errors="replace").splitlines():
        words = line.strip().split(None, 1)
        if not words or words[0].startswith("#"):
            continue
        if words[0].lower() in ("host", "match"):
            return False
        if words[0].lower() == "include" and len(words) == 2 and \
                any(w.strip('"') in wanted for w in words[1].split()):
            return True
    return False


def install_include(user_config: Path, path: Path) -> bool:
    """Put the Include line at the very top of ~/.ssh/config (created 600 if
    missing); False when it is already there."""
    if includes(user_config, path):
        return False
    target = user_config.resolve()  # a dotfiles symlink stays a symlink
    old = target.read_text(encoding="utf-8") if target.is_file() else ""
    # Its own line: a "#" after Include would be read as one more path.
    lines = ("# added by `gpucloud ssh-config --install-include`\n"
             + include_line(path) + "\n\n")
    mode = target.stat().st_mode & 0o777 if target.is_file() else 0o600
    write_private(target, lines + old, own_dir=False)
    os.chmod(target, mode)
    return True


__all__ = ["DEFAULT_PATH", "HostEntry", "USER_CONFIG", "aliases", "entries", "include_line",
           "includes", "install_include", "kept_blocks", "render", "unlisted", "write_private"]
