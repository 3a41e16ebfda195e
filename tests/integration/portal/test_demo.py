"""``manage.py demo`` (what ``make demo`` runs): the living product on the embedded default.

Starts the real command on a free port with SQLite and the filesystem broker, as a
newcomer would, and checks what the issue promises: within 60 seconds of the portal
answering, the API shows jobs Queued, Running and Succeeded (the simulated cluster
admits, runs and finishes the job stream); Ctrl-C (SIGINT) leaves no process alive.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.services import REPO_ROOT


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _session_processes(sid: int) -> list[int]:
    """Live processes of session ``sid`` (the demo and every child it started)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            pids.append(int(entry.name))
    return pids


def _login(session: requests.Session, base: str, username: str, password: str):
    login = session.get(f"{base}/accounts/login/", timeout=30)
    assert login.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    return session.post(
        f"{base}/accounts/login/",
        data={"csrfmiddlewaretoken": token, "username": username, "password": password,
              "next": "/"},
        headers={"Referer": f"{base}/accounts/login/"}, timeout=30,
    )


@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_demo_lives_queued_running_succeeded_within_a_minute_and_ctrl_c_stops_all(
        tmp_path, backend):
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND",
                        "KUBECONFIG", "PROMETHEUS_URL", "DCGM_EXPORTER_URL", "SIM_SPEED",
                        "DEMO_JOBS")}
    env.update({"PORTAL_VAR_DIR": str(tmp_path), "DEBUG": "true", "SCHEDULER_BACKEND": backend})
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(port)], cwd=REPO_ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    seen: dict[str, int] = {}
    children = []
    try:
        deadline = time.monotonic() + 120
        health = None
        while time.monotonic() < deadline:
            try:
                health = requests.get(f"{base}/healthz", timeout=2)
                break
            except requests.ConnectionError:
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.5)
        assert health is not None, "demo did not serve within 120 s"
        assert health.status_code == 200
        assert health.json() == {"status": "ok", "checks": {
            "database": "ok", "broker": "ok", "pages": "ok"}}
        # the embedded defaults: SQLite file and filesystem broker under PORTAL_VAR_DIR
        # (/healthz no longer names them)
        assert (tmp_path / "portal.sqlite3").is_file()
        assert (tmp_path / "broker").is_dir()

        alice = requests.Session()
        response = _login(alice, base, "alice", "alice-demo-pass")
        assert "Signed in as <strong>alice</strong>" in response.text
        assert [t["slug"] for t in alice.get(f"{base}/api/v1/teams/", timeout=30).json()] == [
            "nlp-research"]

        staff = requests.Session()
        _login(staff, base, "admin", "admin-demo-pass")
        # the cluster, worker, beat and job stream run beside the web server
        children = _session_processes(proc.pid)
        assert len(children) >= 5, children
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(seen) < 3:
            for phase in ("Queued", "Running", "Succeeded"):
                if phase not in seen:
                    page = staff.get(f"{base}/api/v1/jobs/", params={"phase": phase},
                                     timeout=30).json()
                    items = page["results"] if isinstance(page, dict) else page
                    if items:
                        assert {job["phase"] for job in items} == {phase}
                        seen[phase] = len(items)
            time.sleep(1)
        assert set(seen) == {"Queued", "Running", "Succeeded"}, seen
        # Utilization has data within a minute of the jobs running (the demo collects
        # every 20 s, not every 5 min): some team shows allocated GPU-hours.
        deadline = time.monotonic() + 60
        allocated = 0.0
        while time.monotonic() < deadline and not allocated:
            body = staff.get(f"{base}/api/v1/utilization/", timeout=30).json()
            allocated = sum(team["allocated_gpu_hours"] for team in body["teams"])
            time.sleep(2)
        assert allocated > 0, body
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
    stop = time.monotonic() + 30
    while _session_processes(proc.pid) and time.monotonic() < stop:
        time.sleep(0.5)
    assert _session_processes(proc.pid) == [], "a child of the demo outlived Ctrl-C"
    assert "alice    / alice-demo-pass" in output
    assert f"The portal is at {base}/" in output
    assert "cluster metrics: http://127.0.0.1:" in output


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_child_that_dies_stops_the_demo_with_its_name(tmp_path):
    """A worker killed under the demo must not leave a portal that serves but never moves:
    the demo says which child died, stops the others and exits with status 1."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND",
                        "KUBECONFIG", "PROMETHEUS_URL", "DCGM_EXPORTER_URL", "SIM_SPEED")}
    env.update({"PORTAL_VAR_DIR": str(tmp_path), "DEBUG": "true", "DEMO_JOBS": "0"})
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(port)], cwd=REPO_ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except requests.ConnectionError:
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.5)
        workers = [pid for pid in _session_processes(proc.pid)
                   if "celery" in _cmdline(pid) and " worker" in _cmdline(pid)]
        assert workers, [_cmdline(pid) for pid in _session_processes(proc.pid)]
        os.kill(min(workers), signal.SIGKILL)  # the worker's main process
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 1, output
    assert "a child process exited on its own" in output and "worker" in output
    assert "exit code -9" in output
    stop = time.monotonic() + 30
    while _session_processes(proc.pid) and time.monotonic() < stop:
        time.sleep(0.5)
    assert _session_processes(proc.pid) == [], "a child of the demo outlived the stop"
