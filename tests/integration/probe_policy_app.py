"""A test-only policy that reads probes, for tests/integration/test_probes.py: round robin
with `uses_probes` set, registered as ``probe-test``.

Loaded by ryu-manager as an application module before ryu_apps/malb.py (it holds no RyuApp,
so Ryu only imports it): the registry then has the name when the controller's configuration
and REST read it. Never imported by the test process itself, whose registry stays as
shipped."""
from ryu_apps.policies import register
from ryu_apps.policies.round_robin import RoundRobin


@register("probe-test", rank=1000, title="probe test (round robin reading probes)")
class ProbeTest(RoundRobin):
    uses_probes = True
