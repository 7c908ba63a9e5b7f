"""What the unit tests share (faucet's clib/ is the model): fakes of what the controller
talks to and harnesses that build the parts under test.

    fakeswitch.py        FakeNetwork, FakeSwitch: OpenFlow bytes decoded and applied to
                         tables, groups and meters that answer where a packet goes
    controller.py        a ControllerCore beside a fake network; packets played through both
    shell.py             the controller's shell (ryu_apps/malb.py) without ryu-manager;
                         Datapath
    policy_core.py       a PolicyCore over the paper's microservices; loads and profiles
    rest_app.py          what the REST handlers use of the shell; its REST server served
    http_client.py       a raw keep-alive HTTP client that reads every status
    agents.py            a host agent with a fake Docker client, and an SLO configuration
    services.py          our services started on loopback
    profiler_samples.py  agent samples for the profiler
"""
