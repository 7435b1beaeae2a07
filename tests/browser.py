"""Headless Chromium for the UI plugin's browser tests: Debian's ``chromium`` driven through its own
``chromedriver`` (package ``chromium-driver``) with Selenium, so nothing is downloaded at test time.
`bash .ci/run` installs both; elsewhere a missing browser skips these tests with the reason (under CI
it fails them: CI must have it). Screenshots go to ``build/screenshots/`` (the ones in ``docs/`` are
copies of them)."""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from typing import Any

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCREENSHOTS = os.path.join(REPO, "build", "screenshots")


def chromium_paths() -> tuple[str, str]:
    """(chromium, chromedriver), or skip (fail under CI) naming what to install."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    message = "headless Chromium is missing: apt-get install chromium chromium-driver (bash .ci/run does)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def start_browser(width: int = 1400, height: int = 1000) -> Any:
    """A headless Chromium session (Selenium's WebDriver); the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def log_in(browser: Any, base_url: str, username: str, password: str, timeout: float = 120) -> None:
    """Log in through Airflow's own login page (the simple auth manager's form), as a user would."""
    from selenium.webdriver.common.by import By

    browser.get(f"{base_url}/auth/login")
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "input[type=password]"), timeout, "the login form")
    user_box = browser.find_element(By.CSS_SELECTOR, "input:not([type=password])")
    user_box.send_keys(username)
    browser.find_element(By.CSS_SELECTOR, "input[type=password]").send_keys(password)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(lambda: browser.get_cookie("_token"), timeout, "the login to set Airflow's token cookie")


def wait_for(check: Callable[[], Any], timeout: float, what: str, every: float = 0.3) -> Any:
    """`check()`'s first truthy value, polled; an AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except Exception:  # noqa: BLE001 - an element not there yet, a page still loading
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def screenshot(browser: Any, name: str) -> str:
    """Save the whole page (beyond the window) as ``build/screenshots/<name>.png``; returns the path."""
    import base64

    os.makedirs(SCREENSHOTS, exist_ok=True)
    size = browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 4000), "scale": 1}
    shot = browser.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                              "clip": clip})
    path = os.path.join(SCREENSHOTS, f"{name}.png")
    with open(path, "wb") as file:
        file.write(base64.b64decode(shot["data"]))
    return path


def table_rows(browser: Any, section: str) -> list[list[str]]:
    """The cells' text of the table in the page's ``<div id=section>`` (header row left out)."""
    from selenium.webdriver.common.by import By

    rows = browser.find_elements(By.CSS_SELECTOR, f"#{section} tr")
    return [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")] for row in rows[1:]]


def script_errors(browser: Any) -> list[str]:
    """The page's JavaScript errors since the last call (Chromium's console log)."""
    return [entry["message"] for entry in browser.get_log("browser")
            if entry.get("level") == "SEVERE" and entry.get("source") == "javascript"]
