"""The controller under os-ken, OpenStack's maintained fork of Ryu, which ships no launcher
(osken-manager is gone since os-ken 3): what ryu-manager does, on os-ken's modules, with
ryu-manager's command line.

    .venv/bin/python -m ryu_apps.osken_manager ryu_apps/malb.py
    .venv/bin/python -m ryu_apps.osken_manager --user-flags ryu_apps/flags.py \\
        ryu_apps/malb.py --malb-config my.yaml --ofp-tcp-listen-port 6653 --wsapi-port 8080

`malb-controller` (ryu_apps/launcher.py) runs it with MALB's app and flags; docs/setup.md,
"Frameworks", says which versions are tested. os-ken runs its eventlet hub here
(OSKEN_HUB_TYPE=eventlet, unless set otherwise): the app's handlers and loops share the
controller's state as cooperative green threads, as under Ryu; os-ken's default native hub
would run them as OS threads in parallel, which the app is not written for.

- main(argv, prog): parse the options, load the apps, run them until they stop or ^C.
"""
from __future__ import annotations

import os
import sys
import warnings

os.environ.setdefault("OSKEN_HUB_TYPE", "eventlet")     # before os-ken's hub is imported
# eventlet 0.40+ warns at import that it is in bugfix-only mode; os-ken's eventlet hub needs
# it all the same (docs/setup.md, "Frameworks"), and the warning would open every log
warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
# cryptography 51 and later warn that DSA is going, at eventlet's import of dnspython
warnings.filterwarnings("ignore", message=r"DSA is deprecated", module=r"dns\.")

from os_ken.lib import hub  # noqa: E402 -- after the hub type is chosen

hub.patch(thread=False)      # as ryu-manager: sockets and time green before anything binds

import logging  # noqa: E402

from oslo_config.cfg import Error as ConfigError  # noqa: E402
from os_ken import cfg, log  # noqa: E402

log.early_init_log(logging.DEBUG)

from os_ken.base.app_manager import AppManager  # noqa: E402
from os_ken.controller import controller  # noqa: E402,F401 -- registers the OpenFlow options
from os_ken.utils import _import_module_file  # noqa: E402

from ryu_apps import framework  # noqa: E402

CONF = cfg.CONF
CONF.register_cli_opts([
    cfg.ListOpt("app-lists", default=[], help="application module names to run"),
    cfg.MultiStrOpt("app", positional=True, default=[], help="application module name to run"),
    cfg.StrOpt("pid-file", default=None, help="pid file name"),
    cfg.StrOpt("user-flags", default=None, help="additional flags file for user applications"),
    # ryu-manager's REST options (ryu.app.wsgi registers them there); MalbController reads them
    cfg.StrOpt("wsapi-host", default="", help="REST API host (default: controller.rest_host)"),
    cfg.IntOpt("wsapi-port", default=8080, help="REST API port (default: controller.rest_port)"),
])


def _user_flags(argv: list[str]) -> None:
    """Options files load before the command line is parsed (their options must be known),
    as ryu-manager's --user-flags does; ryu_apps/flags.py always (registering the same
    options again is allowed)."""
    import ryu_apps.flags  # noqa: F401 -- registers --malb-config and --malb-policy
    if "--user-flags" in argv:
        at = argv.index("--user-flags") + 1
        path = argv[at] if at < len(argv) else ""
        if not os.path.isfile(path):
            print(f"--user-flags: no such file: {path!r}", file=sys.stderr)
            raise SystemExit(2)
        _import_module_file(path)


def main(argv: list[str] | None = None, prog: str = "python -m ryu_apps.osken_manager") -> int:
    argv = sys.argv[1:] if argv is None else argv
    _user_flags(argv)
    try:
        CONF(args=argv, prog=prog, project="os_ken",
             version=f"os-ken {framework.VERSION}")
    except ConfigError as exc:        # e.g. a --config-file that is not there: one line, exit 2
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    log.init_log()
    hub.patch(thread=True)           # ryu-manager's second step: threads green too
    if CONF.pid_file:
        with open(CONF.pid_file, "w") as out:
            out.write(str(os.getpid()))
    apps = CONF.app_lists + CONF.app or ["os_ken.controller.ofp_handler"]
    logging.getLogger("malb").info("os-ken %s (hub %s), Python %s", framework.VERSION,
                                   os.environ["OSKEN_HUB_TYPE"], sys.version.split()[0])
    try:
        AppManager.run_apps(apps)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
