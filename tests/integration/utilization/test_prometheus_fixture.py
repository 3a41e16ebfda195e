"""The test Prometheus scrapes the DCGM endpoint: every series, labels intact."""

import pytest

pytestmark = pytest.mark.integration


def test_prometheus_scrapes_every_dcgm_series(prometheus):
    util = prometheus.query("DCGM_FI_DEV_GPU_UTIL")
    assert len(util) == 6
    pods = {s["metric"].get("pod") for s in util}
    assert pods == {"train-0-x2kq9", "train-1-bz7wm", "eval-0-lmnpq", None}
    mig = prometheus.query('DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_PROFILE="1g.10gb"}')
    assert sorted(float(s["value"][1]) for s in mig) == [0.25, 0.5]
    assert {s["metric"]["Hostname"] for s in mig} == {"node-3"}
