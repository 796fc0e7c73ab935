"""Where gpucloud comes from on a machine that runs it unattended: the reaper's
systemd units and Kubernetes CronJob (``reap --install``) and the worker
machines of ``queue workers add``.

One source for all of them, set in config.toml:

    [remote]
    install = "gpucloud==0.1.0"   # or "https://host/gpucloud-0.1.0-py3-none-any.whl",
                                  # or "git+https://github.com/you/gpucloud@v0.1.0"
    image = "ghcr.io/you/gpucloud:0.1.0"   # where a container runs: the CronJob,
                                           # the worker machines (the Dockerfile builds one)

Unset, ``install`` is this exact version from the package index the machine's
pip uses, and ``image`` is none (a stock image installs gpucloud with pip at
start). The source travels in plain text in the machine's command, so a URL
holding credentials is refused; no provider API key ever goes with it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from gpucloud.errors import ConfigurationError

# Checked by hand on 2026-12-01: `pip index versions gpucloud` found no
# distribution and https://pypi.org/pypi/gpucloud/json answered 404, so no
# gpucloud release was on PyPI then. Tests cannot reach an index, so the
# default source is never verified at run time: the user is told to make sure.
PYPI_CHECKED = "2026-12-01"

_SPEC = r"(===|==|~=|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
_REQUIREMENT = re.compile(rf"gpucloud\s*(\[[A-Za-z0-9_,-]+\])?\s*({_SPEC}(\s*,\s*{_SPEC})*)?")
_PINNED = re.compile(r"gpucloud\s*==\s*([A-Za-z0-9.+!_-]+)")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
FORMS_HINT = ('e.g. install = "gpucloud==0.1.0", '
              '"https://example.com/gpucloud-0.1.0-py3-none-any.whl" or '
              '"git+https://github.com/you/gpucloud@v0.1.0"')


@dataclass(frozen=True)
class InstallSource:
    """``requirement``: what pip installs; ``kind``: index, wheel or git;
    ``image``: a container image that already holds gpucloud, or None;
    ``configured``: False when it is the default (this version, the index)."""

    requirement: str
    kind: str
    image: Optional[str] = None
    configured: bool = False

    def pip_shell(self) -> str:
        """POSIX shell that installs gpucloud from the source with the machine's pip."""
        pip = f"pip install --no-cache-dir --quiet {shlex.quote(self.requirement)}"
        if self.kind != "git":
            return pip
        # pip clones a git URL with the git command, which slim images lack.
        return ("{ command -v git >/dev/null 2>&1 || { apt-get update -qq && "
                "apt-get install -y -qq --no-install-recommends git; } >/dev/null; } && " + pip)

    def describe(self) -> str:
        where = {"index": "the package index", "wheel": "a wheel URL",
                 "git": "a git repository"}[self.kind]
        origin = "[remote] install in config.toml" if self.configured else \
            "the default: this version"
        return f"{self.requirement} ({where}; {origin})"

    def caveat(self) -> Optional[str]:
        """What the user must make sure of, when the default cannot be verified
        from here; None for a source the user set."""
        if self.configured or self.kind != "index":
            return None
        pinned = _PINNED.fullmatch(self.requirement)
        version = pinned.group(1) if pinned else self.requirement
        fix = ("set [remote] install in config.toml to a wheel URL or a git URL "
               "(or [remote] image to an image holding gpucloud)")
        if "+" in version:
            return (f"gpucloud {version} is a local build: PyPI refuses local versions, so "
                    f"only an index of your own can hold it; {fix}")
        return (f"make sure {self.requirement} is on the package index the machine uses "
                f"(PyPI had no gpucloud release when checked on {PYPI_CHECKED}), or {fix}")

    def as_json(self) -> dict[str, Any]:
        return {"install": self.requirement, "kind": self.kind, "image": self.image,
                "configured": self.configured, "caveat": self.caveat()}


def kind_of(value: str) -> Optional[str]:
    """index, wheel or git for an accepted ``[remote] install`` value, else None."""
    lowered = value.lower()
    if lowered.startswith("git+https://"):
        return "git"
    if (lowered.startswith(("https://", "file:///")) and
            lowered.split("#")[0].split("?")[0].endswith(".whl")):
        return "wheel"
    if _REQUIREMENT.fullmatch(value):
        return "index"
    return None


def check_install(path: Path, value: Any) -> str:
    """The ``[remote] install`` value, or a ConfigurationError naming the forms."""
    if not isinstance(value, str) or not value.strip() or \
            any(ch.isspace() and ch != " " or ord(ch) < 32 for ch in value):
        raise ConfigurationError(f"{path}: remote.install must be a one-line string",
                                 hint=FORMS_HINT)
    value = value.strip()
    kind = kind_of(value)
    # The value itself is never echoed: a URL may hold a token (a signed or
    # private link), and errors end up in terminals and CI logs.
    if kind is None:
        raise ConfigurationError(
            f"{path}: remote.install is not gpucloud==VERSION, an https:// URL of "
            "a wheel (.whl) or a git+https:// URL", hint=FORMS_HINT)
    if kind != "index":
        from urllib.parse import urlsplit

        if " " in value:
            raise ConfigurationError(f"{path}: remote.install has a space in its URL",
                                     hint="percent-encode it as %20")
        parts = urlsplit(value.split("+", 1)[1] if kind == "git" else value)
        # A login in the host part, or a query (a signed URL's X-Amz-Signature,
        # a private_token=...): either is a credential, and the URL travels in
        # plain text in the machine's command (the provider's console, the
        # process list, the CronJob and the systemd unit).
        if "@" in parts.netloc or parts.query:
            raise ConfigurationError(
                f"{path}: remote.install may hold credentials in its URL (a login or a "
                "query string); it would travel in plain text in the machine's command",
                hint="use a URL that needs no login or signature: a public release asset "
                     "or repository")
    return value


def check_image(path: Path, value: Any) -> str:
    if not isinstance(value, str) or len(value) > 512 or not _IMAGE.fullmatch(value.strip()):
        raise ConfigurationError(f"{path}: remote.image must be a container image reference",
                                 hint='e.g. image = "ghcr.io/you/gpucloud:0.1.0"')
    return value.strip()


def source(config: Any, version: Optional[str] = None) -> InstallSource:
    """The install source from a loaded config.toml's [remote] (config.py reads
    and checks the section with the functions above); the default is
    ``gpucloud==<version>`` (this installed version) from the index."""
    if version is None:
        from gpucloud import __version__ as version
    install, image = config.remote_install, config.remote_image
    if install is None:
        return InstallSource(f"gpucloud=={version}", "index", image, configured=False)
    return InstallSource(install, kind_of(install) or "index", image, configured=True)


def yaml_string(text: str) -> str:
    """``text`` as a YAML double-quoted scalar (JSON's string syntax is one)."""
    return json.dumps(text)


__all__ = ["InstallSource", "PYPI_CHECKED", "check_image", "check_install", "kind_of",
           "source", "yaml_string"]
