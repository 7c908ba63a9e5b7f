"""A real browser for tests: Debian's headless Chromium driven by Selenium through Debian's
chromedriver (both installed by `make setup`). Where the distribution has no Chromium
outside a snap (Ubuntu), setup leaves it out and says so in SKIPPED_PACKAGES: the tests
that need a browser are skipped with that reason; anywhere else a missing browser fails."""
from __future__ import annotations

import contextlib
import os
import shutil

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SKIPPED_PACKAGES = "/var/lib/malb/skipped-packages"     # scripts/apt_packages.py --skipped


def left_out_by_setup(packages=("chromium", "chromium-driver")) -> str | None:
    """Why setup left one of the packages out (scripts/apt_packages.py), None if it did not."""
    if not os.path.isfile(SKIPPED_PACKAGES):
        return None
    with open(SKIPPED_PACKAGES) as fh:
        for line in fh:
            name, _, why = line.partition(": ")
            if name in packages:
                return why.strip()
    return None


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 1100):
    """A headless Chromium session (selenium's WebDriver), closed afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)) and \
            (why := left_out_by_setup()):
        pytest.skip(f"setup: {why}")
    for path in (CHROMIUM, CHROMEDRIVER):
        assert shutil.which(path), f"{path} missing: `make setup` installs chromium and " \
            "chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
