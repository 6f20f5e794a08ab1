"""A real headless Chromium for the HTML report tests, driven by Selenium through Debian's chromedriver.

Nothing is downloaded: the browser and the driver are the system's (`apt-get install -y chromium
chromium-driver`; RDMADOCTOR_CHROMIUM / RDMADOCTOR_CHROMEDRIVER name others), the pages are local files,
and Chromium runs with its background networking off. Without a browser the tests fail and say how to
install one; RDMADOCTOR_SKIP_BROWSER=1 skips them on purpose (CI installs Chromium and does not set it).

Screenshots land in artifacts/screenshots/ (gitignored), one PNG per page and width.
"""
from __future__ import annotations

import base64
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

import pytest

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "artifacts" / "screenshots"
sys.path.insert(0, str(Path(__file__).resolve().parent))

CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-extensions", "--no-default-browser-check",
                "--hide-scrollbars", "--window-size=1280,900", "--lang=en-US"]
os.environ.setdefault("SE_OFFLINE", "true")   # Selenium Manager must not look for a driver online
INSTALL = "apt-get install -y chromium chromium-driver && pip install selenium (or: pip install -e '.[test]')"


def _find(env: str, *names: str) -> str:
    given = os.environ.get(env)
    if given:
        return given
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    for name in names:
        for folder in ("/usr/bin", "/usr/lib/chromium"):
            candidate = Path(folder) / name
            if candidate.is_file():
                return str(candidate)
    return ""


@pytest.fixture(scope="session")
def browser():
    if os.environ.get("RDMADOCTOR_SKIP_BROWSER") == "1":
        pytest.skip("RDMADOCTOR_SKIP_BROWSER=1")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail(f"the browser tests need selenium: {INSTALL}", pytrace=False)
    chromium = _find("RDMADOCTOR_CHROMIUM", "chromium", "chromium-browser", "google-chrome")
    driver_path = _find("RDMADOCTOR_CHROMEDRIVER", "chromedriver")
    if not chromium or not driver_path:
        pytest.fail(f"the browser tests need Chromium and its driver (found browser={chromium or 'none'}, "
                    f"driver={driver_path or 'none'}): {INSTALL}", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="rdmadoctor-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    except Exception as exc:  # a broken install: say what failed, not a skip
        pytest.fail(f"Chromium did not start ({chromium}, {driver_path}): {exc}", pytrace=False)
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


class Pages:
    """Open rendered reports in the shared browser, one at a time, and read what it says about them."""

    def __init__(self, driver, tmp: Path):
        self.driver = driver
        self.tmp = tmp

    def open(self, html: str, name: str = "report", width: int = 1280) -> None:
        path = self.tmp / f"{name}.html"
        path.write_text(html, encoding="utf-8")
        self.width(width)
        self.driver.get("about:blank")
        self.driver.get_log("browser")          # drop what earlier pages left
        self.driver.get(path.as_uri())

    def width(self, width: int, height: int = 900) -> None:
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})

    def console(self) -> List[Dict[str, str]]:
        return self.driver.get_log("browser")

    def errors(self) -> List[Dict[str, str]]:
        return [e for e in self.console() if e.get("level") in ("SEVERE", "ERROR")]

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def screenshot(self, name: str, width: int = 1280) -> Path:
        """A PNG of the whole page at this width, kept in artifacts/screenshots/."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.width(width)
        height = int(self.js("return Math.ceil(document.documentElement.scrollHeight)"))
        self.width(width, min(max(height, 200), 16000))
        data = self.driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        out = SCREENSHOTS / f"{name}-{width}.png"
        out.write_bytes(base64.b64decode(data["data"]))
        self.width(width)
        return out


@pytest.fixture
def pages(browser, tmp_path):
    return Pages(browser, tmp_path)
