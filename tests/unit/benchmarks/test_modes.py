"""benchmarks/modes.py's reading of Open vSwitch's datapath counters."""
from benchmarks.modes import parse_upcalls

# as `ovs-appctl dpif-netdev/pmd-stats-show` prints it on this machine (userspace datapath,
# no PMD threads: the main thread only), and with one PMD thread beside it
MAIN = """main thread:
  packets received: 438578
  packet recirculations: 0
  emc hits: 420923
  megaflow hits: 17276
  miss with success upcall: 379
  miss with failed upcall: 2
"""
PMD = """pmd thread numa_id 0 core_id 1:
  packets received: 1000
  miss with success upcall: 10
  miss with failed upcall: 0
"""


def test_upcalls_and_packets_are_summed_over_the_threads():
    assert parse_upcalls(MAIN) == {"packets": 438578, "upcalls": 381}
    assert parse_upcalls(MAIN + PMD) == {"packets": 439578, "upcalls": 391}


def test_no_thread_listed_reads_as_nothing():
    assert parse_upcalls("") == {}
    assert parse_upcalls("ovs-appctl: cannot connect to ovs-vswitchd") == {}
