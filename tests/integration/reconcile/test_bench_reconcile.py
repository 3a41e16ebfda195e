"""The reconcile benchmark's core at ~20 teams (not timed): its assertions hold.

``scripts/bench_reconcile.py`` measures 1,000 teams (figures in the README);
this runs the same :func:`run_benchmark` on the test database against the
test emulator, so the script cannot rot.
"""

import importlib.util

from django.conf import settings

from queues.cluster import KubernetesCluster
from queues.reconcile import MANAGED_KINDS
from tests.services import REPO_ROOT


def _bench_module():
    spec = importlib.util.spec_from_file_location(
        "bench_reconcile", REPO_ROOT / "scripts" / "bench_reconcile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_core_at_20_teams(transactional_db, kube_emulator):
    bench = _bench_module()
    port = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    figures = bench.run_benchmark(teams=20, cohorts=3, flavors=3, server=kube_emulator,
                                  port=port)
    # 3 flavors + 3 cohorts + 4 objects per team.
    assert figures["objects"] == 3 + 3 + 4 * 20
    assert figures["full"]["writes"] == figures["objects"]
    assert figures["noop"]["writes"] == 0
    # The no-op pass reads one list per managed kind of either backend (the prune looks at
    # both: what makes a backend switch converge) and nothing else.
    assert figures["noop"]["requests"] == len(MANAGED_KINDS)
    change = figures["change"]
    assert change["team"] == "team-0010"
    assert change["changed_objects"] == ["ClusterQueue team-0010",
                                         "ResourceQuota team-0010/gpu-quota"]
    assert change["writes"] == 2
    assert change["requests"] == len(MANAGED_KINDS) + 2
