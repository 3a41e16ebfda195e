"""Pure renderers: specs (``queues.specs``) -> manifest dicts.

No Django, no ``kubernetes`` import, no I/O. Each function returns a fresh
plain ``dict`` ready for server-side apply; quantities are strings in the
canonical form of ``queues.quantity``.

* ``labels``  - the labels every object carries and the selectors to find them
* ``amounts`` - quota arithmetic shared by the renderers (derived CPU/memory,
  cohort capacity)
* ``core``    - Namespace, ResourceQuota, PriorityClass
* ``kueue``   - kueue.x-k8s.io/v1beta2 objects, plus ``team_objects`` /
  ``cluster_objects`` / ``desired_objects`` for the whole desired set
* ``volcano`` - scheduling.volcano.sh/v1beta1 Queues
"""
