"""Command-line options of the MALB app: for `ryu-manager --user-flags`; the os-ken launcher
(ryu_apps/osken_manager.py) loads them itself.

Ryu parses its command line before it loads applications, so options an application
registers itself are unknown at parse time; `--user-flags` loads this file first:

    ryu-manager --user-flags ryu_apps/flags.py ryu_apps/malb.py \\
        --malb-config configs/paper.yaml --malb-policy srr

Without this file, the environment variables MALB_CONFIG and MALB_POLICY do the same.
"""
from ryu_apps.framework import cfg

cfg.CONF.register_cli_opts([
    cfg.StrOpt("malb-config", default=None,
               help="MALB configuration file (default: $MALB_CONFIG, else configs/paper.yaml)"),
    cfg.StrOpt("malb-policy", default=None,
               help="load-balancing policy for this run: malb, srr, ln or maglev "
                    "(default: $MALB_POLICY, else controller.policy in the configuration)"),
    cfg.StrOpt("malb-peer", default=None,
               help="the other controller's REST URL, for a standby pair (default: $MALB_PEER; "
                    "none: no standby, and no role is asked of the switches)"),
    cfg.StrOpt("malb-role", default=None,
               help="the role this controller starts for beside its peer: master or standby "
                    "(default: $MALB_ROLE, else master)"),
    cfg.BoolOpt("malb-eager-parse", default=False,
                help="keep Ryu's own parsers for flow-removed messages and flow statistics "
                     "(default: $MALB_EAGER_PARSE; unset: their matches are parsed when "
                     "first read, ryu_apps/lazy_parse.py)"),
])
