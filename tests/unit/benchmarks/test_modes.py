"""benchmarks/modes.py: its reading of Open vSwitch's datapath counters and of the controller's
stalls over a step."""
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


def test_the_least_load_step_names_what_the_event_loop_waited_behind():
    from benchmarks.modes import stalls_line
    controller = {"event_loop_lag": {"count": 900, "p50_ms_at_most": 0.1, "p99_ms_at_most": 50.0},
                  "gc_2": {"count": 2, "p50_ms_at_most": 50.0, "p99_ms_at_most": 100.0},
                  "packet_in": {"count": 9000, "p50_ms_at_most": 0.2, "p99_ms_at_most": 0.5},
                  "profiler_answer": {"count": 9, "p50_ms_at_most": 10.0,
                                      "p99_ms_at_most": 20.0},
                  "flow_stats": {"count": 0, "p50_ms_at_most": None, "p99_ms_at_most": None}}
    assert stalls_line(controller) == ("lag p99 <= 50.0 ms; work of 1 ms or more at the p99: "
                                       "gc 2 2 x, p99 <= 100.0 ms, "
                                       "profiler answer 9 x, p99 <= 20.0 ms")
    assert stalls_line(None) == "not measured"


def test_packet_ins_and_moved_slots_are_read_from_the_controllers_own_metrics():
    from prometheus_client import generate_latest

    from benchmarks.modes import packet_ins, slots_moved
    from ryu_apps.controller_metrics import ControllerMetrics
    m = ControllerMetrics()
    m.packet_in.labels("new_flow").inc(3)
    m.packet_in.labels("orphan").inc()
    m.dp_moved.labels("ui").inc(5)
    text = generate_latest(m.registry).decode()
    assert packet_ins(text) == {"new_flow": 3.0, "orphan": 1.0}
    assert slots_moved(text) == {"ui": 5.0}
    assert slots_moved("") == {}
