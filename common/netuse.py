"""Network use of a full-duplex link, one definition for agents, profiler and controller."""
from __future__ import annotations


def network_percent(rx_bytes_per_s: float | None, tx_bytes_per_s: float | None,
                    capacity_bytes_per_s: float | None) -> float | None:
    """Percent of the capacity in use. Full duplex: the capacity holds in each direction, so
    the busier direction is the use. None when a rate or the capacity is unknown."""
    if rx_bytes_per_s is None or tx_bytes_per_s is None or not capacity_bytes_per_s:
        return None
    return 100.0 * max(rx_bytes_per_s, tx_bytes_per_s) / capacity_bytes_per_s
