"""Where ``gpuq`` finds the portal and its token, first match wins:

1. ``--url`` / ``--token`` on the command line;
2. the environment: ``GPUQ_URL``, ``GPUQ_TOKEN`` (and ``GPUQ_AUTH_SCHEME``);
3. the config file: ``--config``, else ``GPUQ_CONFIG``, else
   ``${XDG_CONFIG_HOME:-~/.config}/gpuq/config.yaml``, a YAML mapping
   ``{url: ..., token: ..., auth_scheme: ...}``. It holds a secret: ``gpuq`` refuses a
   file that others may read (mode must deny group and other access).

``auth_scheme`` is the ``Authorization`` header's keyword, ``Token`` by default
(``Authorization: Token <key>``, what ``manage.py create_api_token`` prints keys for).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import yaml


class ConfigError(Exception):
    """The URL is missing, or the config file is unusable."""


class NoToken(ConfigError):
    """No API token anywhere."""


@dataclass(frozen=True)
class Config:
    url: str
    token: str
    auth_scheme: str = "Token"


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpuq" / "config.yaml"


def _read_file(path: Path, *, explicit: bool) -> dict:
    if not path.exists():
        if explicit:
            raise ConfigError(f"config file {path} does not exist")
        return {}
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"config file {path} holds a token and may be read by others: "
                          f"chmod 600 {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must be a mapping (url, token)")
    return data


def load(*, url: str | None = None, token: str | None = None,
         config_path: str | None = None) -> Config:
    """The settings from flags, environment and file (see the module docstring)."""
    explicit = config_path or os.environ.get("GPUQ_CONFIG")
    path = Path(explicit).expanduser() if explicit else default_path()
    file = _read_file(path, explicit=bool(explicit))
    url = url or os.environ.get("GPUQ_URL") or file.get("url")
    token = token or os.environ.get("GPUQ_TOKEN") or file.get("token")
    scheme = os.environ.get("GPUQ_AUTH_SCHEME") or file.get("auth_scheme") or "Token"
    if not url:
        raise ConfigError("no portal URL: pass --url, set GPUQ_URL or `url:` in "
                          f"{path}")
    if not token:
        raise NoToken("no API token: pass --token, set GPUQ_TOKEN or `token:` in "
                          f"{path} (a token comes from `manage.py create_api_token <user>`)")
    return Config(url=str(url).rstrip("/"), token=str(token), auth_scheme=str(scheme))
