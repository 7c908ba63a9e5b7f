"""`malb-controller`: the MALB controller under os-ken (the default) or Ryu, with
ryu-manager's options; its flags file and app are added, so the command line holds only
options (docs/setup.md, "Frameworks").

    malb-controller                                   # configs/paper.yaml or $MALB_CONFIG
    malb-controller --malb-config my.yaml --ofp-tcp-listen-port 6653 --wsapi-port 8080
    MALB_FRAMEWORK=ryu malb-controller ...            # ryu-manager, where Ryu is installed

- main(argv): run it in this process (os-ken), or as the ryu-manager beside this interpreter.
"""
from __future__ import annotations

import os
import sys

from common.procs import controller_argv, framework_name


def main(args: list[str] | None = None) -> int:
    args = sys.argv[1:] if args is None else args
    try:
        framework = framework_name()
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    command = controller_argv(framework, python=sys.executable) + args
    if framework == "os-ken":
        from ryu_apps import osken_manager   # deferred: it starts os-ken's hub at import
        return osken_manager.main(command[3:], prog="malb-controller")
    if not os.path.exists(command[0]):
        print(f"MALB_FRAMEWORK=ryu: no ryu-manager beside {sys.executable} (Ryu runs on "
              "Python 3.11 only: `pip install 'malb[ryu]'`, or `make setup`'s .venv-ryu)",
              file=sys.stderr)
        return 2
    os.execv(command[0], command)
    return 0     # not reached


if __name__ == "__main__":
    sys.exit(main())
