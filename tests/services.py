"""Reaching the real services the test tiers need.

:func:`require` is the one place that decides between skip and fail: with
``CI=true`` a missing service fails the test (CI must start it); on a developer
machine it skips with the reason.
"""

import os
import socket
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = (REPO_ROOT / ".." / "shared").resolve()


def in_ci() -> bool:
    """True when running under CI (``CI=true``): missing services fail, never skip."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """Fail (in CI) or skip (elsewhere) the current test with ``reason``."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: tests never skip for a missing service)")
    pytest.skip(reason)


def tcp_reachable(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when a TCP connection to ``host:port`` opens within ``timeout_s`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def require(name: str, host: str, port: int) -> None:
    """Make sure ``name`` listens on ``host:port``, else fail or skip (see module doc)."""
    if not tcp_reachable(host, port):
        unavailable(f"{name} is not reachable on {host}:{port}")


def shared_path(*parts: str) -> Path:
    """A path under ``../shared`` (CRDs, traces); fail or skip when it is missing."""
    path = SHARED_DIR.joinpath(*parts)
    if not path.exists():
        unavailable(f"{path} is missing (the project's shared/ folder beside the repo)")
    return path
