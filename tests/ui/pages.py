"""Driving the UI: open a view and wait until it has rendered, read the console."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.ui.seed import Seeded

WAIT_SECONDS = 15
COMMAND_SECONDS = 60
"""The longest one WebDriver command may take. A healthy one answers within seconds; a
wedged renderer (headless Chromium's capture can wait for a compositor frame that never
comes) then fails its own test in a minute instead of selenium's 120 s per try."""

MAIN_PAGES = {
    "runs": "/runs",
    "run": "/runs/{finished}",
    "trajectory": "/runs/{finished}/problems/double?sample=1",
    "datasets": "/datasets",
    "dataset": "/datasets/demo",
    "problem": "/datasets/demo/problems/lcb%2Freverse",
    "bandit": "/bandit",
    "bandit-dataset": "/bandit/demo-contexts",
    "training": "/training",
    "training-job": "/training/{job}",
    "training-job-stale": "/training/{stale_job}",
    "compare": "/compare/{finished}/{trained}",
    "table": "/table?runs={finished},{trained}",
    "training-overlay": "/training/compare?jobs={job},{stale_job}",
    "turns": "/runs/{finished}/trajectories?verdict=runtime_error",
    "test-detail": "/runs/{finished}/problems/lcb%2Freverse?sample=0&turn=1&test=public-1",
    "analysis": "/analysis",
    "hacking": "/runs/{finished}/hacking",
    "search": "/search?q=negative",
}


def route_of(name: str, seeded: Seeded) -> str:
    """The route of main page `name` on the seeded database."""
    return MAIN_PAGES[name].format(
        finished=seeded.finished_run,
        job=seeded.training_job,
        trained=seeded.trained_run,
        stale_job=seeded.stale_job,
    )


def wait_rendered(driver: webdriver.Chrome, route: str, *, after: int = 0) -> None:
    """Until <main> shows `route` (rendered more than `after` times in all)."""

    def done(d: webdriver.Chrome) -> bool:
        main = d.find_element(By.ID, "main")
        renders = int(main.get_attribute("data-renders") or 0)
        return main.get_attribute("data-route") == route and renders > after

    WebDriverWait(driver, WAIT_SECONDS).until(done)


def open_view(driver: webdriver.Chrome, base_url: str, route: str) -> None:
    driver.get(f"{base_url}/ui/#{route}")
    wait_rendered(driver, route)


def renders(driver: webdriver.Chrome) -> int:
    return int(driver.find_element(By.ID, "main").get_attribute("data-renders") or 0)


def severe_console_entries(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = driver.get_log("browser")
    return [entry for entry in entries if entry["level"] == "SEVERE"]


def wait_for_fresh_frame(driver: webdriver.Chrome) -> None:
    """Two animation frames painted: Page.captureScreenshot waits for a compositor frame,
    and headless Chromium may leave an idle page without one (a known stall). If no frame
    comes, the script times out with an error of its own rather than the capture hanging."""
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "requestAnimationFrame(() => requestAnimationFrame(() => done()));"
    )


def full_page_screenshot(driver: webdriver.Chrome, path: Path) -> None:
    """The whole page, not only the window (DevTools captures beyond the viewport; growing
    the window instead cut the bottom off pages taller than the screen)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    wait_for_fresh_frame(driver)
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 8000), "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    path.write_bytes(base64.b64decode(shot["data"]))
