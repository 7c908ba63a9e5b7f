"""experiments/sample_noise.py: the testbed's sampling error of the back-end, and the model's."""
import json
import shutil
import sqlite3

import pytest

from experiments import sample_noise


def test_a_series_has_the_size_share_and_autocorrelation_it_is_made_with():
    noise = sample_noise.NoiseSeries(0.02, 0.25, 0.6, seed=1)
    rows = [(k, inst, noise.value(inst, k)) for k in range(4000) for inst in "abcd"]
    stats = sample_noise.deviation_stats(rows)
    assert stats["rms_cores"] == pytest.approx(0.02, rel=0.08)
    assert stats["common_share"] == pytest.approx(0.25, abs=0.05)
    assert stats["lag1"] == pytest.approx(0.6, abs=0.05)
    assert sample_noise.NoiseSeries(0.02, 0.25, 0.6, seed=1).value("c", 17) == \
        noise.value("c", 17)


def test_errors_common_to_every_instance_are_told_apart_from_their_own():
    rows = [(t, inst, (0.01 if t % 2 else -0.01)) for t in range(100) for inst in "abc"]
    stats = sample_noise.deviation_stats(rows)
    assert stats["common_share"] == 1.0 and stats["lag1"] == pytest.approx(-1.0)
    own = [(t, inst, 0.01 if (t + i) % 2 else -0.01)
           for t in range(100) for i, inst in enumerate("ab")]
    assert sample_noise.deviation_stats(own)["common_share"] == 0.0
    with pytest.raises(ValueError):
        sample_noise.deviation_stats(rows[:2])
    with pytest.raises(ValueError):
        sample_noise.NoiseSeries(0.01, 1.5, 0.5, seed=1)


def write_run(run, samples):
    """A run directory as lb_comparison leaves it (the paper testbed: srv1 has 0.4 cores,
    agents' window 3 s), whose srv1 back-end ran a job of 0.2 cores from 100 to 110 and one
    of 0.3 from 104 to 110."""
    run.mkdir(parents=True)
    shutil.copy("configs/paper.yaml", run / "config.yaml")
    (run / "workload.json").write_text(json.dumps({"classes": [
        {"name": "backend-medium", "path": "/job?seconds=10&cpu=0.2&mode=work"},
        {"name": "backend-heavy", "path": "/job?seconds=6&cpu=0.3&mode=work"},
        {"name": "ui-light", "path": "/object?size=1000000"}]}))
    (run / "requests-0.csv").write_text(
        "seq,class,started,ended,served_by\n"
        "1,backend-medium,100,110,srv1-be\n2,backend-heavy,104,110,srv1-be\n"
        "3,ui-light,100,101,srv1-ui\n")
    db = sqlite3.connect(run / "history.sqlite")
    db.execute("CREATE TABLE container_samples (t REAL, server TEXT, instance TEXT, "
               "microservice TEXT, cpu_percent REAL)")
    db.execute("CREATE TABLE server_samples (t REAL, server TEXT, age_s REAL)")
    for t, inst, cpu in samples:
        db.execute("INSERT INTO container_samples VALUES (?, 'srv1', ?, ?, ?)",
                   (t, inst, "backend" if inst.endswith("-be") else "ui", cpu))
    for t in {t for t, _, _ in samples}:
        db.execute("INSERT INTO server_samples VALUES (?, 'srv1', 0.5)", (t,))
    db.commit()
    db.close()


def test_a_runs_samples_are_judged_against_its_jobs_over_each_samples_window(tmp_path):
    run = tmp_path / "cmp" / "malb" / "run1"
    # windows end at the tick less its age: [100, 103] one job; [104.5, 107.5] both,
    # which want 0.5 cores of the server's 0.4 and share it; [108.5, 111.5] half of that
    write_run(run, [(103.5, "srv1-be", 22.0), (108.0, "srv1-be", 38.0),
                    (112.0, "srv1-be", 15.0), (108.0, "srv1-ui", 3.0)])
    got = {t: round(d, 4) for t, _, d in sample_noise.job_deviations(str(run))}
    assert got == {103.5: 0.02, 108.0: -0.02, 112.0: -0.05}
    assert sample_noise.measure(str(tmp_path / "cmp"))["samples"] == 3
    with pytest.raises(ValueError):
        sample_noise.measure(str(tmp_path / "nothing"))
