"""The reconcile lock's file form (SQLite, the demo) and the task's retry countdown."""

import threading

import pytest

from portal.services.locks import ClusterBusy, _file_lock
from portal.tasks import retry_countdown


def test_file_lock_refuses_a_second_holder_and_frees_on_release(tmp_path):
    path = tmp_path / "reconcile-cluster-7.lock"
    with _file_lock(path, 7):
        with pytest.raises(ClusterBusy) as busy, _file_lock(path, 7):
            pass
        assert busy.value.cluster_id == 7
        # Another thread of the same process (celery --pool=threads) is refused too.
        outcome = []

        def other():
            try:
                with _file_lock(path, 7):
                    outcome.append("acquired")
            except ClusterBusy:
                outcome.append("busy")

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert outcome == ["busy"]
    with _file_lock(path, 7):  # released: free again
        pass
    with _file_lock(tmp_path / "reconcile-cluster-8.lock", 8), _file_lock(path, 7):
        pass  # clusters lock independently


@pytest.mark.parametrize("retries", [0, 1, 3, 10])
def test_retry_countdown_never_undercuts_retry_after(retries):
    for _ in range(50):
        assert retry_countdown(retries=retries, retry_after=5) >= 5
        wait = retry_countdown(retries=retries, retry_after=0)
        assert 0 <= wait <= min(300, 2 * 2**retries)
