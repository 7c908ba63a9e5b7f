"""The queue a placement prices (docs/placement.md, "The latency objective"): a server as
one processor-sharing queue of its CPU share's speed, whose mean number of requests
(waiting or in service) at utilisation rho is rho / (1 - rho), for any distribution of the
work (M/G/1-PS). Plain functions of rho; the partitioner and the exact program share them.

- queue_length, queue_slope: the mean number of requests and its derivative;
- RHO_KNEE: past it the curve goes on along its tangent (finite and still convex).
"""
from __future__ import annotations

RHO_KNEE = 0.95           # beyond it the queue length grows along its tangent (finite, convex)


def queue_length(rho: float) -> float:
    """Requests at a processor-sharing server at utilisation rho, the M/G/1-PS mean
    rho / (1 - rho) (whatever the work's distribution), continued linearly past RHO_KNEE so
    that a plan over a server's share costs much but stays comparable."""
    if rho <= 0:
        return 0.0
    if rho < RHO_KNEE:
        return rho / (1 - rho)
    return RHO_KNEE / (1 - RHO_KNEE) + (rho - RHO_KNEE) / (1 - RHO_KNEE) ** 2


def queue_slope(rho: float) -> float:
    """queue_length's derivative in rho."""
    return 1 / (1 - min(max(rho, 0.0), RHO_KNEE)) ** 2
