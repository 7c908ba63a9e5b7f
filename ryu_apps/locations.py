"""InstanceLocations: where each instance is attached, as (switch dpid, port), plain Python.

On the testbed every instance's switch and port come from the configuration. In the user's
own network (`network.instances`) they may be left out: the controller then finds an
instance from its answers to the health probes, which a switch sends to the controller from
the first switch they enter, the instance's own (the VIP and probe rules are on every
switch). Until then the instance is not located: it is probed out of every switch's edge
ports and takes no flows. A learned location is forgotten when the instance goes down, so a
host that moved is found again.
"""
from __future__ import annotations


class InstanceLocations:
    def __init__(self, slots):
        self.slots = {i.name: i for i in slots}
        # the configuration's: fixed
        self.configured = {i.name: (i.dpid, i.switch_port) for i in slots
                           if i.dpid is not None and i.switch_port is not None}
        self.learned: dict[str, tuple[int, int]] = {}
        self.at = {where: name for name, where in self.configured.items()}   # the reverse
        self.wrong_mac_warned: set[str] = set()

    def where(self, name: str) -> tuple[int, int] | None:
        return self.configured.get(name) or self.learned.get(name)

    def located(self, name: str) -> bool:
        return self.where(name) is not None

    def learn(self, name: str, dpid: int, port: int, mac: str) -> tuple[str, bool] | None:
        """An answer from the instance entered switch dpid at port, from MAC `mac`. Returns
        (a line for the log, whether it is a warning) when something is new: the instance
        found or moved, or answering from a MAC other than its configured one (a warning;
        nothing is learned: flows rewritten to the configured MAC would not reach it)."""
        inst = self.slots[name]
        if mac != inst.mac:
            if name in self.wrong_mac_warned:
                return None
            self.wrong_mac_warned.add(name)
            return (f"instance {name} ({inst.ip}) answers from MAC {mac}, configured "
                    f"{inst.mac}: fix its mac in network.instances", True)
        if name in self.configured:
            return None
        if inst.dpid is not None and inst.dpid != dpid:
            return None     # seen through another switch; its configured switch will say
        before = self.learned.get(name)
        if before == (dpid, port):
            return None
        if before is not None:
            self.at.pop(before, None)
        self.learned[name] = (dpid, port)
        self.at[(dpid, port)] = name
        where = f"switch {dpid:016x} port {port}"
        if before is None:
            return f"instance {name} ({inst.ip}) found at {where}", False
        return (f"instance {name} ({inst.ip}) moved from switch {before[0]:016x} port "
                f"{before[1]} to {where}", False)

    def forget(self, name: str) -> bool:
        """A learned location no longer trusted (the instance went down)."""
        before = self.learned.pop(name, None)
        if before is not None and self.at.get(before) == name:
            del self.at[before]
        return before is not None

    def on_switch(self, dpid: int) -> set[str]:
        return {name for (d, _), name in self.at.items() if d == dpid}

    def unlocated(self) -> list[str]:
        return sorted(n for n in self.slots if self.where(n) is None)

    def owner(self, dpid: int, port: int) -> str | None:
        return self.at.get((dpid, port))

    def view(self) -> dict:
        out = {}
        for name in sorted(self.slots):
            at = self.where(name)
            out[name] = None if at is None else {
                "switch": f"{at[0]:016x}", "port": at[1],
                "how": "configured" if name in self.configured else "learned"}
        return out
