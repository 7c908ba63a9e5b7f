"""A real browser for tests: Debian's headless Chromium driven by Selenium through Debian's
chromedriver (both installed by `make setup`)."""
from __future__ import annotations

import contextlib
import shutil

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 1100):
    """A headless Chromium session (selenium's WebDriver), closed afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
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
