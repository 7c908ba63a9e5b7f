"""services/rom.py's work-conserving job: paced by the thread's CPU clock (issue 12)."""
import time

from services import rom


def run(step, cpu=0.2, seconds=1.0):
    t0, c0 = time.monotonic(), time.thread_time()
    rom.work(cpu, seconds, step=step)
    return time.monotonic() - t0, time.thread_time() - c0


def test_does_its_cpu_work_at_its_pace():
    wall, used = run(rom.spin)
    assert 0.19 <= used <= 0.26
    assert 0.9 <= wall <= 1.6


def preempted(every=100, pause=0.01, times=None):
    """A step that, every `every` calls (at most `times` times), loses the CPU for `pause`
    seconds of wall time, as a thread does when the machine's cores run something else."""
    calls = 0

    def step():
        nonlocal calls
        calls += 1
        if calls % every == 0 and (times is None or calls // every <= times):
            time.sleep(pause)
        rom.spin()
    return step


def test_makes_up_short_preemptions():
    # A wall-clock duty cycle of 0.2 loses a 10 ms busy phase's CPU to every pause in it
    # and runs about 1.5 times as long; paced by CPU the job still ends near its length.
    wall, used = run(preempted())
    assert used >= 0.19
    assert wall <= 1.3          # the wall-clock duty cycle it replaced: 1.56 s


def test_a_job_held_off_for_long_runs_longer():
    # held off for longer than the debt it may make up: slower, but all its work done
    wall, used = run(preempted(every=5, pause=0.6, times=1), cpu=0.5, seconds=0.6)
    assert used >= 0.29
    assert wall >= 0.9
