"""The test and demo harness: nothing in ``portal/`` or ``queues/`` imports it.

* :mod:`harness.apiserver` - the Kubernetes API emulator (real HTTP on loopback);
* :mod:`harness.sim` - the simulated Kueue/Volcano controllers and the DCGM exporter
  (``python -m harness.sim``), driving the scheduler model of :mod:`queues.schedmodel`;
* :mod:`harness.traces`, :mod:`harness.replay` - real GPU-cluster traces and their replay
  through the REST API;
* ``harness/management/commands`` - ``manage.py demo`` and ``manage.py replay_trace``
  (the settings install this package as a Django app when it is importable).

Not installed in the production image (``pyproject.toml`` packages ``portal`` and
``queues`` only; ``.dockerignore`` leaves it out).
"""
