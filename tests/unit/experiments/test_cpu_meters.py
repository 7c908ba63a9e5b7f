"""experiments/cpu_meters.py: the parts' CPU seconds, read from this very process and the
machine, and the step's use per part."""
import os
import subprocess
import sys
import types

from experiments.cpu_meters import CpuMeters, machine_cpu_seconds, used


def spin(seconds: float) -> None:
    import time
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_step_that_burns_cpu_shows_in_its_part_and_in_the_machine():
    me = types.SimpleNamespace(proc=types.SimpleNamespace(pid=os.getpid()))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        stack = types.SimpleNamespace(controller=me, profiler=None, testbed=None,
                                      agents={"srv1": types.SimpleNamespace(proc=child)},
                                      cfg=None)
        meters = CpuMeters(stack)
        before = meters.read()
        spin(0.3)
        after = meters.read()
    finally:
        child.kill()
        child.wait()
    step = used(before, after, 0.5)
    assert 0.25 <= step["controller_cpu_s"] <= 1.0 and step["controller_cores"] > 0.4
    assert step["agents_cpu_s"] < 0.2                 # the sleeping child
    assert step["profiler_cpu_s"] is None and step["servers_cores"] is None
    assert step["machine_cpu_s"] >= 0.25


def test_machine_cpu_seconds_only_grow():
    a = machine_cpu_seconds()
    spin(0.05)
    assert machine_cpu_seconds() >= a > 0
