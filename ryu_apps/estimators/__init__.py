"""What the policies count and estimate, plain Python with time passed in:

- pending_assignments: flows sent to a server that its load data does not show yet;
- survival: how long a microservice's flows last (S(age), expected remaining life);
- running_flows: flows sent to a server still expected to run (assignments x survival);
- open_flows: flows whose end the controller sees, per instance and per server, with what
  each was measured to use;
- carried_seconds: the seconds of flow an instance carried, ends dated back to a flow's
  last traffic;
- running_load: a server's load now from its latest sample and the flows it runs (malb);
- unexplained_use: what a short-flow instance uses beyond what our flows on it explain;
- switch_connections: in data-plane mode, each instance's open TCP connections as the
  switches count them.
"""
