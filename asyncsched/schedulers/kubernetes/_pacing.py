"""How the Kubernetes client paces its requests and what counts as a throttle.

The API server says when it is overloaded: API Priority and Fairness (and the
older max-in-flight filter) reject with ``429 Too Many Requests`` and a
``Retry-After``; a server or proxy that is shedding load may answer ``503``
with a ``Retry-After`` too. Those answers are throttles: the request is sent
again once the server allows it, and the client's :class:`AdaptivePacer`
halves its rate. Any other answer tells the pacer the rate was fine.

Example:
    >>> pacer = make_pacer(qps=50.0, burst=100, max_qps=1000.0)
    >>> (pacer.qps, pacer.max_qps)
    (50.0, 1000.0)
    >>> is_throttle(429, None), is_throttle(503, 1.0), is_throttle(503, None)
    (True, True, False)
"""

from __future__ import annotations

from asyncsched.errors import SchedulerUnavailableError
from asyncsched.schedulers.kubernetes._gate import KubernetesApiError
from asyncsched.schedulers.shared.pacer import AdaptivePacer

__all__ = [
    "DEFAULT_MAX_HOLD",
    "DEFAULT_MAX_QPS",
    "MAX_THROTTLED",
    "MIN_QPS",
    "is_throttle",
    "make_pacer",
    "throttled_error",
]

#: the client-side ceiling of the request rate (requests per second)
DEFAULT_MAX_QPS = 1000.0
#: longest Retry-After that holds every request (a longer one holds them this long)
DEFAULT_MAX_HOLD = 5.0
#: the rate never drops below this, however often the server throttles
MIN_QPS = 5.0
#: times one request may be throttled and sent again before it fails
MAX_THROTTLED = 30
#: additive increase after the first throttle (requests/s gained per second)
STEP = 20.0


def make_pacer(
    qps: float, burst: int, max_qps: float, max_hold: float = DEFAULT_MAX_HOLD
) -> AdaptivePacer | None:
    """The pacer of a client: starts at ``qps``, never above ``max_qps``.

    ``qps <= 0`` turns pacing off (None). A ``max_qps`` below ``qps`` is
    raised to it (``qps`` is both the start and the ceiling then).
    """
    if qps <= 0:
        return None
    ceiling = max(max_qps, qps) if max_qps > 0 else qps
    return AdaptivePacer(
        start_qps=qps,
        min_qps=min(MIN_QPS, qps),
        max_qps=ceiling,
        burst=burst,
        step=STEP,
        max_hold=max_hold,
    )


def is_throttle(status: int, retry_after: float | None) -> bool:
    """A 429, or a 503 that names a ``Retry-After``: the server asks to slow down."""
    return status == 429 or (status == 503 and retry_after is not None)


def throttled_error(exc: KubernetesApiError, host: str) -> SchedulerUnavailableError:
    """The error once a request was throttled more times than the budget allows."""
    return SchedulerUnavailableError(
        "kubernetes",
        f"the API server at {host} kept throttling {exc.method} {exc.path}"
        f" ({exc.attempts} tries, last {exc.status} {exc.reason}: {exc.message})",
        "lower the scheduler's qps/max_qps, or ask the cluster's admin about"
        " its API Priority and Fairness limits",
    )
