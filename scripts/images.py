"""Build the project's Docker images offline, each only when missing or out of date.

    python scripts/images.py build     # base (debootstrap) and service images
    python scripts/images.py status    # what exists and whether it is current

- malb/base: a Debian root file system made by debootstrap from images/base/recipe.json and
  imported with `docker import`. Tagged malb/base:<recipe hash> and malb/base:latest; rebuilt
  only when no image carries the current recipe hash.
- malb/service: images/service/Dockerfile FROM malb/base, COPY only. Rebuilt when the
  Dockerfile, the copied files or the base image change.
Every image carries the label malb=1.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE_RECIPE = os.path.join(ROOT, "images", "base", "recipe.json")
CACHE_DIR = os.environ.get("MALB_CACHE_DIR", "/var/cache/malb")
# (image name, Dockerfile directory, paths copied into the build context)
BUILT_IMAGES = [("malb/service", os.path.join(ROOT, "images", "service"),
                 ["services", "common"])]


def say(msg: str) -> None:
    print(f"[images] {msg}", flush=True)


def sha256_files(paths: list[str]) -> str:
    h = hashlib.sha256()
    for path in paths:
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(d, f) for d, dirs, fs in os.walk(path) for f in fs
            if "__pycache__" not in d and not f.endswith(".pyc"))
        for f in sorted(files):
            h.update(os.path.relpath(f, ROOT).encode())
            with open(f, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def client():
    import docker   # deferred: the Docker SDK; --help and the recipe hashes need none
    try:
        c = docker.from_env(timeout=600)
        c.ping()
        return c
    except Exception as exc:  # noqa: BLE001 -- the SDK, requests or the socket
        sys.exit(f"[images] the Docker engine does not answer ({exc}); run `make setup`")


def find_image(c, label: str, value: str):
    """The image carrying label=value. An image built FROM another inherits its labels, so
    a base is looked for among images without a context label: a service image is no base
    (taken for one, it was tagged malb/base:latest and the next service built on it)."""
    images = [i for i in c.images.list(filters={"label": f"{label}={value}"})
              if label == "malb.context" or "malb.context" not in i.labels]
    return images[0] if images else None


def build_base(c, force: bool = False) -> str:
    recipe_hash = sha256_files([BASE_RECIPE])[:12]
    tag = f"malb/base:{recipe_hash}"
    existing = find_image(c, "malb.recipe", recipe_hash)
    if existing and not force:
        existing.tag("malb/base", "latest")
        say(f"base image {tag} is current (recipe {recipe_hash}); skipped")
        return recipe_hash
    with open(BASE_RECIPE) as fh:
        recipe = json.load(fh)
    mirror = os.environ.get("MALB_DEBIAN_MIRROR", recipe["mirror"])
    rootfs = os.path.join(CACHE_DIR, f"rootfs-{recipe_hash}")
    if os.path.isdir(rootfs):
        shutil.rmtree(rootfs)  # a half-finished earlier attempt
    os.makedirs(CACHE_DIR, exist_ok=True)
    say(f"debootstrap {recipe['suite']} ({recipe['variant']}) into {rootfs}: about a minute")
    cmd = ["debootstrap", f"--variant={recipe['variant']}",
           "--include=" + ",".join(recipe["include"]), recipe["suite"], rootfs, mirror]
    started = time.time()
    log_path = os.path.join(CACHE_DIR, "debootstrap.log")
    with open(log_path, "w") as log:
        res = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    if res.returncode != 0:
        sys.exit(f"[images] debootstrap failed (exit {res.returncode}); see {log_path}")
    # Trim what a container never needs.
    for rel in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                "usr/share/locale"):
        shutil.rmtree(os.path.join(rootfs, rel), ignore_errors=True)
    say(f"debootstrap done in {time.time() - started:.0f} s; importing into Docker")
    tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
    imp = subprocess.run(["docker", "import",
                          "-c", "LABEL malb=1", "-c", f"LABEL malb.recipe={recipe_hash}",
                          "-c", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                                "/sbin:/bin", "-c", 'CMD ["bash"]', "-", tag],
                         stdin=tar.stdout, capture_output=True, text=True)
    tar.wait()
    if imp.returncode != 0 or tar.returncode != 0:
        sys.exit(f"[images] docker import failed: {imp.stderr.strip()}")
    shutil.rmtree(rootfs, ignore_errors=True)
    c.images.get(tag).tag("malb/base", "latest")
    say(f"base image {tag} built")
    return recipe_hash


def build_image(c, name: str, dockerfile_dir: str, copied: list[str], base_hash: str,
                force: bool = False) -> None:
    inputs = [dockerfile_dir] + [os.path.join(ROOT, p) for p in copied]
    context_hash = hashlib.sha256((sha256_files(inputs) + base_hash).encode()).hexdigest()[:12]
    if find_image(c, "malb.context", context_hash) and not force:
        c.images.get(find_image(c, "malb.context", context_hash).id).tag(name, "latest")
        say(f"{name} is current (context {context_hash}); skipped")
        return
    say(f"building {name} (context {context_hash})")
    with tempfile.TemporaryDirectory() as ctx:
        shutil.copy(os.path.join(dockerfile_dir, "Dockerfile"), ctx)
        for rel in copied:
            shutil.copytree(os.path.join(ROOT, rel), os.path.join(ctx, rel),
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        try:
            c.images.build(path=ctx, tag=f"{name}:latest", pull=False, rm=True, forcerm=True,
                           labels={"malb": "1", "malb.context": context_hash})
        except Exception as exc:  # noqa: BLE001 -- docker.errors.BuildError carries the build log
            log = "".join(x.get("stream", "") for x in getattr(exc, "build_log", []) or [])
            sys.exit(f"[images] building {name} failed: {exc}\n{log}")
    say(f"{name} built")


def status(c) -> int:
    recipe_hash = sha256_files([BASE_RECIPE])[:12]
    ok = bool(find_image(c, "malb.recipe", recipe_hash))
    print(f"malb/base      recipe {recipe_hash}: {'current' if ok else 'MISSING or outdated'}")
    for name, d, copied in BUILT_IMAGES:
        inputs = [d] + [os.path.join(ROOT, p) for p in copied]
        ch = hashlib.sha256((sha256_files(inputs) + recipe_hash).encode()).hexdigest()[:12]
        cur = bool(find_image(c, "malb.context", ch))
        ok &= cur
        print(f"{name:<14} context {ch}: {'current' if cur else 'MISSING or outdated'}")
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("action", choices=("build", "status"))
    p.add_argument("--force", action="store_true", help="rebuild even when current")
    args = p.parse_args(argv)
    c = client()
    if args.action == "status":
        return status(c)
    base_hash = build_base(c, force=args.force)
    for name, d, copied in BUILT_IMAGES:
        build_image(c, name, d, copied, base_hash, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
