"""experiments/stack.py's teardown, without a testbed: every part is stopped even when one
fails (Mininet refuses to take down a host whose shell a SIGTERM caught mid-command, and
the controller was then left running), and the failure is raised after the rest."""
import pytest

from experiments.stack import Stack


class Part:
    def __init__(self, log: list, name: str, fails: bool = False):
        self.log, self.name, self.fails = log, name, fails

    def terminate(self):
        self.log.append(f"told {self.name}")

    def stop(self):
        self.log.append(self.name)
        if self.fails:
            raise AssertionError(f"{self.name} would not stop")


def stack_of(log, failing=()):
    s = Stack({}, "/nonexistent-run-dir")
    s.profiler = Part(log, "profiler", "profiler" in failing)
    s.agents = {"srv1": Part(log, "agent", "agent" in failing)}
    s.testbed = Part(log, "testbed", "testbed" in failing)
    s.controller = Part(log, "controller", "controller" in failing)
    return s


# the profiler and the agents are told first, so that they come down in parallel
TOLD = ["told profiler", "told agent"]


def test_a_part_that_fails_to_stop_does_not_keep_the_others_running():
    log = []
    s = stack_of(log, failing=("testbed",))
    with pytest.raises(AssertionError, match="testbed would not stop"):
        s.stop()
    assert log == [*TOLD, "profiler", "agent", "testbed", "controller"]
    assert s.testbed is None
    log.clear()
    s.stop()                             # the testbed is not stopped twice
    assert log == [*TOLD, "profiler", "agent", "controller"]


def test_coming_down_after_an_interrupt_keeps_the_interrupt(capsys):
    log = []
    s = stack_of(log, failing=("profiler", "testbed"))
    # what `with` does when the block raised: nothing raised here, so the interrupt goes on
    assert not s.__exit__(KeyboardInterrupt, KeyboardInterrupt(), None)
    assert log == [*TOLD, "profiler", "agent", "testbed", "controller"]
    assert "profiler would not stop" in capsys.readouterr().err
    s = stack_of([], failing=("controller",))
    with pytest.raises(AssertionError, match="controller would not stop"):
        s.__exit__(None, None, None)     # a clean exit: the failure is the caller's to see


def test_load_generators_still_running_end_with_the_stack_and_no_other_process():
    import subprocess

    from common.state import process_start_ticks
    ours = subprocess.Popen(["sleep", "60"])
    other = subprocess.Popen(["sleep", "60"])
    try:
        s = stack_of([])
        # a load generator left mid-load, and a PID recorded whose process is now another
        s.loadgens = {"move-0": (ours.pid, process_start_ticks(ours.pid)),
                      "move-1": (other.pid, -1)}
        s.stop()
        assert ours.wait(timeout=5) == -15
        assert other.poll() is None and s.loadgens == {}
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()
