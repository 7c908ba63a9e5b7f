"""services/rom.py's work-conserving job: paced by the thread's CPU clock (issue 12). Run on
a simulated thread whose clocks the test moves, so that what is checked is the pacing rule,
not how busy this machine is."""
import pytest

from services import rom

STEP_S = 0.001          # one step of work: a millisecond of CPU and of wall time


class Thread:
    """A thread's two clocks: each step of work takes STEP_S of CPU and of wall time; a
    preemption takes wall time only, as when the machine's cores run something else."""

    def __init__(self, preempt=lambda calls: 0.0):
        self.wall = self.cpu = 0.0
        self.calls = 0
        self.preempt = preempt

    def step(self):
        self.calls += 1
        self.wall += self.preempt(self.calls)
        self.wall += STEP_S
        self.cpu += STEP_S

    def sleep(self, seconds):
        self.wall += seconds

    def run(self, cpu=0.2, seconds=1.0):
        rom.work(cpu, seconds, step=self.step, clock=lambda: self.wall,
                 cpu_clock=lambda: self.cpu, sleep=self.sleep)
        return self.wall, self.cpu


def test_does_its_cpu_work_at_its_pace():
    wall, used = Thread().run()
    assert used == pytest.approx(0.2, abs=2 * STEP_S)
    assert wall == pytest.approx(1.0, abs=0.05)      # within a slice of its length


def every(n, pause, times=None):
    """A preemption of `pause` seconds every n steps (at most `times` times)."""
    return lambda calls: pause if calls % n == 0 and (
        times is None or calls // n <= times) else 0.0


def test_makes_up_short_preemptions():
    # A wall-clock duty cycle of 0.2 loses a 10 ms busy phase's CPU to every pause in it
    # and runs about 1.5 times as long; paced by CPU the job still ends near its length.
    wall, used = Thread(every(10, 0.01)).run()
    assert used >= 0.2 - STEP_S
    assert wall <= 1.1


def test_a_job_held_off_for_long_runs_longer():
    # held off for longer than the debt it may make up: slower, but all its work done
    wall, used = Thread(every(5, 0.6, times=1)).run(cpu=0.5, seconds=0.6)
    assert used >= 0.3 - STEP_S
    assert wall >= 0.9
