"""The frequency actuators on fake sysfs and cgroup trees, RAPL reading with wrap-around,
and the power model's shape."""
from __future__ import annotations

import pytest

from slo.actuators import ActuatorError, QuotaFrequency, SysfsFrequency, cgroup_cpu_dir
from slo.energy import CorePowerModel, Rapl, counter_delta, emulated_busy_s


def fake_cpufreq(root, cpus, governor="powersave", lo=800_000, hi=2_100_000):
    for c in cpus:
        d = root / f"cpu{c}" / "cpufreq"
        d.mkdir(parents=True)
        for name, value in (("cpuinfo_min_freq", lo), ("cpuinfo_max_freq", hi),
                            ("scaling_min_freq", lo), ("scaling_max_freq", hi),
                            ("scaling_governor", governor), ("scaling_setspeed", "<unsupported>")):
            (d / name).write_text(f"{value}\n")
    return root


def read(root, cpu, name):
    return (root / f"cpu{cpu}" / "cpufreq" / name).read_text().strip()


def test_sysfs_pins_each_core_to_the_frequency_and_restores_the_original(tmp_path):
    root = fake_cpufreq(tmp_path, [2, 3])
    act = SysfsFrequency([2, 3], root=str(root))
    assert act.range_mhz == (800, 2100)
    act.set_mhz(1500)
    assert [(read(root, c, "scaling_min_freq"), read(root, c, "scaling_max_freq"))
            for c in (2, 3)] == [("1500000", "1500000")] * 2
    act.set_mhz(1900)        # going up: max raised before min, never min > max
    assert (read(root, 2, "scaling_min_freq"), read(root, 2, "scaling_max_freq")) == \
        ("1900000", "1900000")
    act.restore()
    assert (read(root, 3, "scaling_min_freq"), read(root, 3, "scaling_max_freq")) == \
        ("800000", "2100000")


def test_sysfs_uses_setspeed_under_the_userspace_governor(tmp_path):
    root = fake_cpufreq(tmp_path, [0], governor="userspace")
    SysfsFrequency([0], root=str(root)).set_mhz(1200)
    assert read(root, 0, "scaling_setspeed") == "1200000"
    assert read(root, 0, "scaling_max_freq") == "2100000"


def test_sysfs_refuses_a_core_without_cpufreq(tmp_path):
    root = fake_cpufreq(tmp_path, [0])
    with pytest.raises(ActuatorError, match="cpu7/cpufreq: no cpufreq"):
        SysfsFrequency([0, 7], root=str(root))


@pytest.mark.parametrize("version", [1, 2])
def test_quota_scales_the_containers_bandwidth_and_restores_it(tmp_path, version):
    proc = tmp_path / "proc" / "42"
    proc.mkdir(parents=True)
    if version == 1:
        proc.joinpath("cgroup").write_text(
            "5:memory:/malb/srv1/abc\n4:cpu,cpuacct:/malb/srv1/abc\n1:name=systemd:/x\n")
        d = tmp_path / "cg" / "cpu,cpuacct" / "malb" / "srv1" / "abc"
        d.mkdir(parents=True)
        (d / "cpu.cfs_quota_us").write_text("-1\n")
        (d / "cpu.cfs_period_us").write_text("100000\n")
    else:
        proc.joinpath("cgroup").write_text("0::/malb/srv1/abc\n")
        d = tmp_path / "cg" / "malb" / "srv1" / "abc"
        d.mkdir(parents=True)
        (d / "cpu.max").write_text("max 100000\n")
    where, v = cgroup_cpu_dir(42, proc=str(tmp_path / "proc"), root=str(tmp_path / "cg"))
    assert (where, v) == (str(d), version)
    act = QuotaFrequency(where, v, base_cores=0.5, f_max_mhz=2000)
    act.set_mhz(1000)
    quota = (d / ("cpu.max" if version == 2 else "cpu.cfs_quota_us")).read_text().split()[0]
    assert quota == "25000"                  # half the frequency: half of 0.5 cores
    act.restore()
    assert (d / ("cpu.max" if version == 2 else "cpu.cfs_quota_us")).read_text().strip() in \
        ("-1", "max 100000")


def test_rapl_sums_packages_and_survives_a_wrap(tmp_path):
    for pkg, start in ((0, 900), (1, 10)):
        z = tmp_path / f"intel-rapl:{pkg}"
        z.mkdir()
        (z / "energy_uj").write_text(str(start))
        (z / "max_energy_range_uj").write_text("1000")
    (tmp_path / "intel-rapl:0:0").mkdir()           # a subzone: not counted again
    rapl = Rapl(str(tmp_path))
    assert rapl.available() and rapl.read_uj() == 0
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("50")     # wrapped: +150
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("60")     # +50
    assert rapl.read_uj() == 200
    assert not Rapl(str(tmp_path / "none")).available()
    assert counter_delta(10, 30, 100) == 20 and counter_delta(90, 5, 100) == 15


def test_the_model_charges_less_per_unit_of_work_at_a_lower_frequency():
    m = CorePowerModel()
    assert m.voltage(1000) == pytest.approx(0.70) and m.voltage(2100) == pytest.approx(1.0)
    assert m.energy_j(2100, 1.0, 1.0) == pytest.approx(6.9)
    # the same work (0.5 s of CPU at full speed) at half the emulated frequency is busy
    # twice as long, yet costs less: V^2 falls with f
    at_max = m.energy_j(2100, 10.0, emulated_busy_s(5.0, 2100, 2100))
    at_low = m.energy_j(1050, 10.0, emulated_busy_s(5.0, 1050, 2100))
    assert at_low < 0.7 * at_max
    assert m.energy_j(1500, 1.0, busy_s=5.0) == m.energy_j(1500, 1.0, busy_s=1.0)   # capped


# The two drivers' trees as the kernel lays them out (Documentation/admin-guide/pm/
# cpufreq.rst and intel_pstate.rst): each policy's files in cpufreq/policyN, and cpuN/cpufreq
# a link to its policy.
COMMON = ("affected_cpus", "related_cpus", "cpuinfo_min_freq", "cpuinfo_max_freq",
          "cpuinfo_transition_latency", "scaling_available_governors", "scaling_cur_freq",
          "scaling_driver", "scaling_governor", "scaling_max_freq", "scaling_min_freq",
          "scaling_setspeed")


def driver_tree(root, driver, policies):
    """policies: {policy number: its cores}. intel_pstate (active mode, HWP): governors
    performance and powersave, no userspace, its global directory and HWP's files;
    acpi-cpufreq: the classic governors (userspace among them) and the frequency table."""
    lo, hi = (400_000, 4_700_000) if driver == "intel_pstate" else (800_000, 2_400_000)
    values = {"cpuinfo_min_freq": lo, "cpuinfo_max_freq": hi, "scaling_min_freq": lo,
              "scaling_max_freq": hi, "scaling_cur_freq": hi, "cpuinfo_transition_latency": 0,
              "scaling_driver": driver, "scaling_setspeed": "<unsupported>"}
    if driver == "intel_pstate":
        values.update(scaling_available_governors="performance powersave",
                      scaling_governor="powersave", base_frequency=2_600_000,
                      energy_performance_preference="balance_performance",
                      energy_performance_available_preferences=(
                          "default performance balance_performance balance_power power"))
        g = root / "intel_pstate"
        g.mkdir(parents=True)
        for name, v in (("status", "active"), ("no_turbo", 0), ("max_perf_pct", 100),
                        ("min_perf_pct", 9), ("hwp_dynamic_boost", 0), ("num_pstates", 43),
                        ("turbo_pct", 33)):
            (g / name).write_text(f"{v}\n")
    else:
        values.update(scaling_available_governors=(
                          "conservative ondemand userspace powersave performance schedutil"),
                      scaling_governor="schedutil", bios_limit=hi,
                      scaling_available_frequencies="2400000 2000000 1600000 1200000 800000")
    for n, cores in policies.items():
        d = root / "cpufreq" / f"policy{n}"
        d.mkdir(parents=True)
        core_list = " ".join(map(str, cores))
        for name, v in {**values, "affected_cpus": core_list, "related_cpus": core_list}.items():
            (d / name).write_text(f"{v}\n")
        for c in cores:
            (root / f"cpu{c}").mkdir(parents=True, exist_ok=True)
            (root / f"cpu{c}" / "cpufreq").symlink_to(f"../cpufreq/policy{n}")
    return root


def policy_file(root, n, name):
    return (root / "cpufreq" / f"policy{n}" / name).read_text().strip()


def test_intel_pstate_pins_min_and_max_through_the_links_and_restores_them(tmp_path):
    root = driver_tree(tmp_path, "intel_pstate", {0: [0], 1: [1], 2: [2], 3: [3]})
    act = SysfsFrequency([2, 3], root=str(root))
    assert act.range_mhz == (400, 4700)
    act.set_mhz(1800)
    for n in (2, 3):
        assert (policy_file(root, n, "scaling_min_freq"),
                policy_file(root, n, "scaling_max_freq")) == ("1800000", "1800000")
    assert policy_file(root, 0, "scaling_max_freq") == "4700000"     # not the service's
    act.restore()
    assert (policy_file(root, 2, "scaling_min_freq"),
            policy_file(root, 2, "scaling_max_freq")) == ("400000", "4700000")
    assert policy_file(root, 2, "scaling_governor") == "powersave"


def test_acpi_cpufreq_under_userspace_sets_the_speed_and_refuses_a_shared_policy(tmp_path):
    root = driver_tree(tmp_path, "acpi-cpufreq", {0: [0, 1], 2: [2], 3: [3]})
    (root / "cpufreq" / "policy2" / "scaling_governor").write_text("userspace\n")
    SysfsFrequency([2], root=str(root)).set_mhz(1600)
    assert policy_file(root, 2, "scaling_setspeed") == "1600000"
    assert policy_file(root, 2, "scaling_max_freq") == "2400000"
    # cpu0 and cpu1 share one clock: setting it for a service on cpu0 would slow cpu1 too
    with pytest.raises(ActuatorError, match=r"also drives cpu1 \(affected_cpus 0 1\)"):
        SysfsFrequency([0], root=str(root))
    # a service pinned to both: one policy, written once
    act = SysfsFrequency([0, 1], root=str(root))
    assert len(act.dirs) == 1
    act.set_mhz(1200)
    assert policy_file(root, 0, "scaling_min_freq") == "1200000"
