"""Deployment artefacts: the Helm chart, checked with the real helm binary."""

import pytest


@pytest.fixture(scope="session")
def helm_bin():
    """The real ``helm``, built from its Go module (pinned wrapper) if not cached yet."""
    from tests.helm import helm_binary

    return helm_binary()
