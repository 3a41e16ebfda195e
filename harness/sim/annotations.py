"""The job annotations a simulated cluster reads (``harness.sim.controller``, the DCGM
exporter), ignored by Kueue and Volcano: how long the job runs once started (whole
seconds), how it ends (``Succeeded``/``Failed``) and its GPU activity profile
(``training``, ``notebook``, ``inference``).

They reach a job as ordinary annotations (``POST /api/v1/jobs/`` ``annotations``), which
the portal accepts under the key prefixes ``settings.JOB_ANNOTATION_PREFIXES`` allows
(the demo and the tests allow :data:`PREFIX`; production allows none).
"""

from __future__ import annotations

from queues.specs import SpecError

#: The key prefix of every simulator hint.
PREFIX = "sim.portal.gpu/"
SIM_DURATION_ANNOTATION = f"{PREFIX}duration-seconds"
SIM_OUTCOME_ANNOTATION = f"{PREFIX}outcome"
SIM_PROFILE_ANNOTATION = f"{PREFIX}profile"
SIM_OUTCOMES = ("Succeeded", "Failed")
SIM_PROFILES = ("training", "notebook", "inference")
_INT32_MAX = 2**31 - 1


def sim_annotations(*, duration_seconds: int | None = None, outcome: str = "",
                    profile: str = "") -> tuple[tuple[str, str], ...]:
    """The ``sim.portal.gpu/*`` annotations for a job's declared running time
    (whole seconds >= 1), outcome (:data:`SIM_OUTCOMES`) and activity profile
    (:data:`SIM_PROFILES`); only those given. Raises ``SpecError`` naming
    ``sim_duration_seconds``, ``sim_outcome`` or ``sim_profile``."""
    out = {}
    if duration_seconds is not None:
        if isinstance(duration_seconds, bool) or not isinstance(duration_seconds, int):
            raise SpecError("sim_duration_seconds",
                            f"must be a whole number of seconds, got {duration_seconds!r}")
        if duration_seconds < 1:
            raise SpecError("sim_duration_seconds", f"must be at least 1, got {duration_seconds}")
        if duration_seconds > _INT32_MAX:
            raise SpecError("sim_duration_seconds",
                            f"must be at most {_INT32_MAX}, got {duration_seconds}")
        out[SIM_DURATION_ANNOTATION] = str(duration_seconds)
    if outcome:
        if outcome not in SIM_OUTCOMES:
            raise SpecError("sim_outcome", f"must be one of {', '.join(SIM_OUTCOMES)}; "
                                           f"got {outcome!r}")
        out[SIM_OUTCOME_ANNOTATION] = outcome
    if profile:
        if profile not in SIM_PROFILES:
            raise SpecError("sim_profile", f"must be one of {', '.join(SIM_PROFILES)}; "
                                           f"got {profile!r}")
        out[SIM_PROFILE_ANNOTATION] = profile
    return tuple(sorted(out.items()))
