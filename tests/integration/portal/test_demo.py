"""``manage.py demo`` (what ``make demo`` runs) serves the portal on the embedded default."""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import requests

from tests.services import REPO_ROOT


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_demo_serves_healthz_and_a_demo_user_logs_in(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")}
    env.update({"PORTAL_VAR_DIR": str(tmp_path), "DEBUG": "true"})
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(port)], cwd=REPO_ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        health = None
        while time.monotonic() < deadline:
            try:
                health = requests.get(f"{base}/healthz", timeout=2)
                break
            except requests.ConnectionError:
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.5)
        assert health is not None, "demo did not serve within 90 s"
        assert health.status_code == 200
        assert health.json()["database"]["vendor"] == "sqlite"
        assert health.json()["broker"]["transport"] == "filesystem"

        session = requests.Session()
        login = session.get(f"{base}/accounts/login/", timeout=5)
        assert login.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        response = session.post(
            f"{base}/accounts/login/",
            data={"csrfmiddlewaretoken": token, "username": "alice",
                  "password": "alice-demo-pass", "next": "/"},
            headers={"Referer": f"{base}/accounts/login/"}, timeout=5,
        )
        assert response.status_code == 200
        assert "Signed in as <strong>alice</strong>" in response.text
        teams = session.get(f"{base}/api/v1/teams/", timeout=5).json()
        assert [t["slug"] for t in teams] == ["nlp-research"]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
    assert "alice    / alice-demo-pass" in output
    assert f"The portal is at {base}/" in output
