"""The outage tests' durations against what they are there to outlast (tests/faults/test_api_outage.py says why
each is as long as it is), read from the code that sets each bound: the reconciler's Lease timings and start-up
back-off, and the liveness probe the supervisor applies as the shipped Deployment does. A bound that grows past an
outage fails here, instead of leaving a fault test that quietly stopped covering it. Needs no cluster.
"""

from __future__ import annotations

import inspect
from dataclasses import fields

from hack.devcluster.supervisor import LIVENESS
from reconciler.runtime.leader import LeaderElector
from reconciler.runtime.startup import ApiWait, Backoff
from tests.faults.test_api_outage import LIVENESS_RESTART, OUTAGE, STARTUP_OUTAGE

MARGIN = 10.0  # seconds each outage keeps beyond the longest of its bounds


def lease_timings() -> tuple[float, float, float]:
    """(lease duration, renew deadline, retry period) as the reconciler builds its elector: with the defaults."""
    defaults = inspect.signature(LeaderElector.__init__).parameters
    return (defaults["lease_duration"].default, defaults["renew_deadline"].default,
            defaults["retry_period"].default)


def restarted_by_liveness_within() -> float:
    """Seconds from a /healthz starting to fail to the liveness probe restarting the process, at the most."""
    return LIVENESS.period * LIVENESS.failures


def test_the_outage_outlasts_the_lease_and_a_liveness_restart_after_it() -> None:
    duration, renew_deadline, retry_period = lease_timings()
    assert (duration, renew_deadline, retry_period) == (15.0, 5.0, 3.0)  # upstream's, as the docstrings say
    lost = renew_deadline
    unhealthy_from = lost + duration  # were failed Lease requests to count against /healthz as refused ones do
    needs = {"renew deadline": renew_deadline, "Lease duration": duration,
             "Lease attempt (jittered)": retry_period * 1.2,
             "liveness restart": unhealthy_from + restarted_by_liveness_within()}
    assert needs["liveness restart"] == 50.0
    assert max(needs.values()) + MARGIN <= OUTAGE, needs
    assert OUTAGE == 60.0  # a minute, as docs/reliability.md says


def test_the_start_up_outage_outlasts_a_liveness_restart_and_the_capped_back_off() -> None:
    assert next(f for f in fields(ApiWait) if f.name == "backoff").default_factory is Backoff
    backoff = Backoff()
    assert backoff == Backoff(initial=0.5, factor=2.0, cap=8.0, jitter=0.2)
    # the sixth attempt, the first to follow a wait at the cap, at its latest (every wait jittered up)
    sixth = sum(min(backoff.cap, backoff.initial * backoff.factor ** n) * (1 + backoff.jitter) for n in range(5))
    assert round(sixth, 1) == 18.6
    liveness = LIVENESS.initial_delay + LIVENESS.period * (LIVENESS.failures - 1)  # from the process's start
    assert liveness == LIVENESS_RESTART == 30.0  # what the test checks the reconciler went without an API server
    assert max(sixth, liveness) + MARGIN <= STARTUP_OUTAGE
