"""Leader election against a small fake of our own KubeClient seam serving one Lease with resourceVersions.

The fake answers GET/POST/PUT like the API server does for one object (404, 409 AlreadyExists, 409
Conflict on a stale resourceVersion) and can be told to fail the next calls. Time is a fake clock.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any, cast

import aiohttp
import pytest

from reconciler.runtime.client import ApiError, KubeClient, StartupError
from reconciler.runtime.leader import LeaderElector, LeaseRecord, LeaseRefusedError
from shared.jsondict import JSONDict

PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/mpi-operator"


class FakeLeases:
    def __init__(self) -> None:
        self.lease: JSONDict | None = None
        self.version = 0
        self.failures: list[BaseException] = []
        self.calls: list[str] = []

    def stored(self, spec: Any) -> None:
        """Store a Lease written by someone else."""
        self.version += 1
        self.lease = {"metadata": {"name": "mpi-operator", "namespace": "ns", "resourceVersion": str(self.version)},
                      "spec": spec}

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> JSONDict:
        self.calls.append(method)
        if self.failures:
            raise self.failures.pop(0)
        if method == "GET":
            if self.lease is None:
                raise ApiError(404, "NotFound", "leases.coordination.k8s.io \"mpi-operator\" not found")
            return copy.deepcopy(self.lease)
        if method == "POST":
            if self.lease is not None:
                raise ApiError(409, "AlreadyExists", "exists")
            self.stored(body["spec"])
            return copy.deepcopy(self.lease)  # type: ignore[arg-type]
        assert method == "PUT"
        assert path == PATH
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.stored(body["spec"])
        return copy.deepcopy(self.lease)

    @property
    def holder(self) -> str:
        return str(((self.lease or {}).get("spec") or {}).get("holderIdentity", ""))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(api: FakeLeases, clock: Clock, identity: str = "me") -> LeaderElector:
    return LeaderElector(cast(KubeClient, api), "ns", identity=identity, clock=clock,
                         lease_duration=15, renew_deadline=0.2, retry_period=0.01)


def other_holder(renew_time: str = "2001-01-01T00:00:00.000000Z") -> JSONDict:
    return {"holderIdentity": "other", "leaseDurationSeconds": 15, "acquireTime": renew_time,
            "renewTime": renew_time, "leaseTransitions": 3}


async def test_creates_the_lease_when_there_is_none() -> None:
    api, clock = FakeLeases(), Clock()
    assert await elector(api, clock).try_acquire_or_renew() is True
    assert api.holder == "me"
    assert api.lease is not None
    assert api.lease["spec"]["leaseTransitions"] == 0


async def test_expiry_is_judged_by_observation_not_by_the_holders_renew_time() -> None:
    """A renewTime far in the past (another host's clock) does not make the Lease free: only seeing the same
    record unchanged for the lease duration does."""
    api, clock = FakeLeases(), Clock()
    api.stored(other_holder())
    candidate = elector(api, clock)
    assert await candidate.try_acquire_or_renew() is False
    clock.now += 14.9
    assert await candidate.try_acquire_or_renew() is False
    clock.now += 0.2
    assert await candidate.try_acquire_or_renew() is True
    assert api.holder == "me"
    assert api.lease is not None
    assert api.lease["spec"]["leaseTransitions"] == 4


async def test_a_renewed_record_restarts_the_observation() -> None:
    api, clock = FakeLeases(), Clock()
    api.stored(other_holder("2001-01-01T00:00:00.000000Z"))
    candidate = elector(api, clock)
    assert await candidate.try_acquire_or_renew() is False
    clock.now += 10
    api.stored(other_holder("2001-01-01T00:00:10.000000Z"))  # the holder renewed
    assert await candidate.try_acquire_or_renew() is False
    clock.now += 10  # 20 s after the first look, but only 10 s after the last change
    assert await candidate.try_acquire_or_renew() is False


async def test_a_released_lease_is_taken_at_once() -> None:
    api, clock = FakeLeases(), Clock()
    api.stored({**other_holder(), "holderIdentity": "", "leaseDurationSeconds": 1})
    assert await elector(api, clock).try_acquire_or_renew() is True


@pytest.mark.parametrize("spec", [
    pytest.param("garbage", id="spec not an object"),
    pytest.param({"holderIdentity": 7, "leaseDurationSeconds": "15", "acquireTime": 1}, id="wrong types"),
    pytest.param({"holderIdentity": "other"}, id="no duration"),
    pytest.param(None, id="no spec"),
])
async def test_a_malformed_lease_never_raises(spec: Any) -> None:
    record = LeaseRecord.of({"spec": spec})
    assert isinstance(record.holder, str)
    assert isinstance(record.duration, float)
    api, clock = FakeLeases(), Clock()
    api.stored(spec)
    assert await elector(api, clock).try_acquire_or_renew() in (True, False)


@pytest.mark.parametrize("failure", [
    pytest.param(aiohttp.ServerDisconnectedError(), id="dropped connection"),
    pytest.param(aiohttp.ClientConnectorError(cast(Any, None), OSError(111, "refused")), id="refused"),
    pytest.param(TimeoutError(), id="timeout"),
    pytest.param(ApiError(500, "InternalError", "etcdserver: request timed out"), id="server error"),
    pytest.param(ValueError("unexpected end of JSON"), id="garbled answer"),
])
async def test_acquire_survives_any_failure_and_only_leads_with_the_lease(failure: BaseException) -> None:
    api, clock = FakeLeases(), Clock()
    api.failures = [failure, failure]
    candidate = elector(api, clock)
    await asyncio.wait_for(candidate.acquire(), 5)
    assert candidate.leading.is_set()
    assert api.holder == "me"
    assert api.calls[:2] == ["GET", "GET"]  # both failed attempts were retried


async def test_acquire_does_not_lead_while_someone_else_holds_it() -> None:
    api, clock = FakeLeases(), Clock()
    api.stored(other_holder())
    candidate = elector(api, clock)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(candidate.acquire(), 0.3)
    assert not candidate.leading.is_set()
    assert api.holder == "other"


async def test_a_put_that_lost_the_race_is_not_leadership() -> None:
    api, clock = FakeLeases(), Clock()
    api.stored({**other_holder(), "holderIdentity": ""})
    candidate = elector(api, clock)
    original = api.request

    async def racing(method: str, path: str, body: Any = None, **kw: Any) -> JSONDict:
        if method == "PUT":  # someone else writes between our GET and our PUT
            api.stored(other_holder("2001-01-01T00:00:05.000000Z"))
        return await original(method, path, body, **kw)

    api.request = racing  # type: ignore[method-assign]
    assert await candidate.try_acquire_or_renew() is False
    assert api.holder == "other"


async def test_keep_returns_when_renewals_fail_for_the_renew_deadline() -> None:
    api = FakeLeases()
    candidate = LeaderElector(cast(KubeClient, api), "ns", identity="me", lease_duration=15, renew_deadline=0.2,
                              retry_period=0.05)  # the real monotonic clock: the deadline must pass
    await candidate.acquire()
    api.failures = [ApiError(500, "InternalError", "down")] * 1000
    await asyncio.wait_for(candidate.keep(), 5)
    assert 2 <= api.calls.count("GET") - 1 <= 5  # retried within the deadline, then given up
    assert not candidate.leading.is_set()
    assert candidate.problem() is None, "a former leader campaigning again is alive"
    assert candidate.readiness() is not None
    assert "requests failing for 0 s (500 InternalError: down); not leading" in str(candidate.readiness())


def fast_elector(api: FakeLeases) -> LeaderElector:
    """Timings of a few hundredths of a second, on the real monotonic clock (``keep`` needs time to pass)."""
    return LeaderElector(cast(KubeClient, api), "ns", identity="me", lease_duration=15, renew_deadline=0.1,
                         retry_period=0.02)


async def test_after_an_outage_the_former_leader_takes_its_own_lease_back_at_once() -> None:
    """The Lease still names us (nobody could write it during the outage): the first request that gets
    through takes it back, without waiting out a lease duration; leaseTransitions unchanged."""
    api = FakeLeases()
    candidate = fast_elector(api)
    await candidate.acquire()
    transitions = api.lease["spec"]["leaseTransitions"] if api.lease else None
    api.failures = [aiohttp.ServerDisconnectedError()] * 1000
    await asyncio.wait_for(candidate.keep(), 5)
    assert not candidate.leading.is_set()
    api.failures = []  # the API server is back
    await asyncio.wait_for(candidate.acquire(), 5)
    assert candidate.leading.is_set()
    assert api.holder == "me"
    assert api.lease is not None
    assert api.lease["spec"]["leaseTransitions"] == transitions
    assert candidate.readiness() is None
    assert candidate.problem() is None


async def test_after_an_outage_a_lease_someone_else_took_makes_the_former_leader_a_standby() -> None:
    api = FakeLeases()
    candidate = fast_elector(api)
    await candidate.acquire()
    api.failures = [aiohttp.ServerDisconnectedError()] * 1000
    await asyncio.wait_for(candidate.keep(), 5)
    api.failures = []
    api.stored(other_holder())  # a standby took over
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(candidate.acquire(), 0.3)
    assert not candidate.leading.is_set()
    assert api.holder == "other"
    assert candidate.problem() is None
    assert candidate.readiness() is None, "a standby whose requests are answered is ready"


async def test_readiness_fails_once_lease_requests_have_failed_for_the_renew_deadline() -> None:
    api, clock = FakeLeases(), Clock()
    api.stored(other_holder())
    candidate = LeaderElector(cast(KubeClient, api), "ns", identity="me", clock=clock, lease_duration=15,
                              renew_deadline=5, retry_period=3)
    assert await candidate._attempt(1) is False
    api.failures = [aiohttp.ClientConnectionError("Cannot connect to host api:443")] * 10
    assert await candidate._attempt(1) is False
    clock.now += 4.9
    assert await candidate._attempt(1) is False
    assert candidate.readiness() is None
    clock.now += 0.2
    assert candidate.readiness() == ("lease ns/mpi-operator requests failing for 5 s (Cannot connect to host "
                                     "api:443); not leading")
    assert candidate.problem() is None, "an outage is no liveness problem"
    api.failures = []
    assert await candidate._attempt(1) is False
    assert candidate.readiness() is None


async def test_keep_renews_and_one_failed_attempt_is_retried_within_the_deadline() -> None:
    api, clock = FakeLeases(), Clock()
    candidate = LeaderElector(cast(KubeClient, api), "ns", identity="me", clock=clock,
                              lease_duration=15, renew_deadline=1.0, retry_period=0.05)
    await candidate.acquire()
    version = api.version
    api.failures = [aiohttp.ServerDisconnectedError()]
    keeping = asyncio.create_task(candidate.keep())
    try:
        async def renewed_three_times() -> None:
            while api.version < version + 3:  # noqa: ASYNC110  (the fake has no event to wait on)
                await asyncio.sleep(0.01)

        await asyncio.wait_for(renewed_three_times(), 5)
        assert candidate.leading.is_set()
        assert candidate.problem() is None
    finally:
        keeping.cancel()


async def test_release_hands_the_lease_back() -> None:
    api, clock = FakeLeases(), Clock()
    candidate = elector(api, clock)
    await candidate.acquire()
    await candidate.release()
    assert api.holder == ""
    assert api.lease is not None
    assert api.lease["spec"]["leaseDurationSeconds"] == 1
    assert await elector(api, clock, "successor").try_acquire_or_renew() is True


async def test_release_leaves_a_lease_someone_else_took() -> None:
    api, clock = FakeLeases(), Clock()
    candidate = elector(api, clock)
    await candidate.acquire()
    api.stored(other_holder())
    await candidate.release()
    assert api.holder == "other"


async def test_health_problem_when_renewals_stall() -> None:
    api, clock = FakeLeases(), Clock()
    candidate = elector(api, clock)
    await candidate.acquire()
    assert candidate.problem() is None
    clock.now += 16
    assert candidate.problem() == "lease not renewed for 16 s"


FORBIDDEN = ApiError(403, "Forbidden", 'leases.coordination.k8s.io "mpi-operator" is forbidden: User "u" cannot get '
                                       'resource "leases" in API group "coordination.k8s.io" in the namespace "ns"')
UNAUTHORIZED = ApiError(401, "Unauthorized", "Unauthorized")


@pytest.mark.parametrize(("failures", "status"), [
    pytest.param([FORBIDDEN], "403 Forbidden", id="get forbidden"),
    pytest.param([UNAUTHORIZED], "401 Unauthorized", id="unauthorized"),
    pytest.param([ApiError(404, "NotFound", "not found"), FORBIDDEN], "403 Forbidden", id="create forbidden"),
    pytest.param([ApiError(503, "ServiceUnavailable", "starting"), FORBIDDEN], "403 Forbidden",
                 id="forbidden after an outage"),
])
async def test_a_lease_refused_before_any_request_was_allowed_is_fatal(
        failures: list[BaseException], status: str) -> None:
    """A Lease the RBAC never allowed is a misconfiguration (--lock-namespace outside the Role's namespace):
    one clear error at start-up, not a healthy-looking process that retries forever."""
    api, clock = FakeLeases(), Clock()
    api.failures = list(failures)
    with pytest.raises(LeaseRefusedError) as raised:
        await asyncio.wait_for(elector(api, clock).acquire(), 5)
    message = str(raised.value)
    assert "\n" not in message
    for part in ("ns/mpi-operator", status, "--lock-namespace", "deploy/rbac"):
        assert part in message
    assert isinstance(raised.value, StartupError)


async def test_a_refusal_after_an_allowed_request_fails_health_after_one_lease_duration() -> None:
    """A standby whose Lease requests were allowed and are now refused (its Role deleted) keeps trying, and
    /healthz fails once the refusals have lasted a whole lease duration: the kubelet restarts it, visibly."""
    api, clock = FakeLeases(), Clock()
    api.stored(other_holder())
    candidate = elector(api, clock)
    assert await candidate._attempt(1) is False  # allowed: the Lease is someone else's
    assert candidate.problem() is None, "a standby is healthy"
    api.failures = [FORBIDDEN] * 1000
    acquiring = asyncio.create_task(candidate.acquire())
    try:
        await refused(api)
        clock.now += 14.9
        assert candidate.problem() is None
        clock.now += 0.2
        assert candidate.problem() == ("lease ns/mpi-operator refused (403 Forbidden) for 15 s: "
                                       "check the RBAC for leases in ns")
        assert not acquiring.done(), "a refusal after an allowed request is retried"
    finally:
        acquiring.cancel()


async def test_an_allowed_request_ends_the_refusals() -> None:
    api, clock = FakeLeases(), Clock()
    api.stored(other_holder())
    candidate = elector(api, clock)
    assert await candidate._attempt(1) is False
    api.failures = [FORBIDDEN]
    assert await candidate._attempt(1) is False
    clock.now += 10
    assert await candidate._attempt(1) is False  # allowed again (the Role restored)
    clock.now += 10
    assert candidate.problem() is None


async def test_other_failures_are_not_refusals() -> None:
    api, clock = FakeLeases(), Clock()
    api.stored(other_holder())
    candidate = elector(api, clock)
    assert await candidate._attempt(1) is False
    api.failures = [ApiError(500, "InternalError", "etcd"), aiohttp.ServerDisconnectedError()] * 10
    for _ in range(20):
        assert await candidate._attempt(1) is False
        clock.now += 1
    assert candidate.problem() is None, "outages are not the health check's business"


async def refused(api: FakeLeases) -> None:
    """Until the fake has refused at least two requests."""
    async def two() -> None:
        while 1000 - len(api.failures) < 2:  # noqa: ASYNC110  (the fake has no event to wait on)
            await asyncio.sleep(0.005)

    await asyncio.wait_for(two(), 5)
