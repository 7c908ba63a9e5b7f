"""Manager, the hooks the controller core calls on every manager in turn, and the
packet-out of a frame the controller made."""
from __future__ import annotations

from ryu_apps import ofwire
from ryu_apps.core_result import CoreResult

TO_CONTROLLER = ofwire.action_output(ofwire.OFPP_CONTROLLER, ofwire.OFPCML_NO_BUFFER)


class Manager:
    """One concern of the controller core (faucet's ValveManagerBase). A hook a manager
    does not need does nothing."""

    def switch_up(self, dpid: int, now: float) -> list[bytes]:
        """The messages this concern sends a switch that (re)connected, in order."""
        return []

    def switch_down(self, dpid: int, now: float) -> None:
        """A switch went away: forget what only its connection held."""

    def pools_changed(self, now: float, out: CoreResult) -> None:
        """An instance joined, left, drained, came up or went down, or the policy or its
        manual weights changed."""


def controller_packet_out(xid: int, frame: bytes, out_port: int) -> bytes:
    """A frame the controller made, out of one port of the switch."""
    return ofwire.packet_out(xid, ofwire.OFPP_CONTROLLER, ofwire.action_output(out_port), frame)
