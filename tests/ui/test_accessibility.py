"""Accessibility basics: labelled controls, one h1 and a language per page, the keyboard
reaches the main navigation, charts are labelled images, and the palette's contrast meets
WCAG AA (computed from style.css itself, so a colour change is checked too)."""

from __future__ import annotations

import re

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from cobalt.orchestrator.api.ui import UI_DIRECTORY
from tests.ui.pages import MAIN_PAGES, open_view, route_of, wait_rendered
from tests.ui.seed import Seeded

NAV = ["Runs", "Datasets", "Bandit datasets", "Training", "Reward hacking", "Search"]

TEXT_PAIRS = [
    ("fg", "bg"), ("muted", "bg"), ("link", "bg"), ("fg", "panel"), ("muted", "panel"),
    ("link", "panel"), ("accent-fg", "accent"), ("pass", "pass-bg"), ("fail", "fail-bg"),
    ("warn", "warn-bg"), ("fail", "bg"),
]  # fmt: skip
"""(text, background) colour variables used together: WCAG AA asks 4.5:1."""
GRAPHIC_PAIRS = [(f"series-{i}", "bg") for i in range(1, 7)] + [("focus", "bg"), ("muted", "bg")]
"""Chart lines, the focus ring and control borders against the page: 3:1 (non-text)."""


def palette() -> dict[str, str]:
    css = (UI_DIRECTORY / "style.css").read_text()
    root = re.search(r":root\s*{(.*?)}", css, re.S)
    assert root is not None
    return dict(re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{6})\s*;", root.group(1)))


def luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_contrast_formula() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)


@pytest.mark.parametrize(("text", "background"), TEXT_PAIRS)
def test_text_colours_meet_aa(text: str, background: str) -> None:
    colours = palette()
    assert contrast(colours[text], colours[background]) >= 4.5


@pytest.mark.parametrize(("graphic", "background"), GRAPHIC_PAIRS)
def test_graphics_meet_non_text_contrast(graphic: str, background: str) -> None:
    colours = palette()
    assert contrast(colours[graphic], colours[background]) >= 3.0


@pytest.mark.parametrize("name", list(MAIN_PAGES))
def test_every_control_has_a_label(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded, name: str
) -> None:
    open_view(browser, base_url, route_of(name, seeded))
    unlabelled = browser.execute_script(
        """
        return [...document.querySelectorAll("input, select, textarea")]
          .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute("aria-label")
                          && !el.getAttribute("aria-labelledby"))
          .map((el) => el.outerHTML);
        """
    )
    assert unlabelled == []
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.chart")
    for chart in charts:
        assert chart.get_attribute("role") == "img"
        label_id = chart.get_attribute("aria-labelledby")
        assert label_id and browser.find_element(By.ID, label_id).text
    buttons = browser.execute_script(
        "return [...document.querySelectorAll('button, a')].filter((b) => !b.textContent.trim())"
        ".map((b) => b.outerHTML);"
    )
    assert buttons == []


def test_keyboard_reaches_the_navigation(browser: webdriver.Chrome, base_url: str) -> None:
    browser.get("about:blank")
    open_view(browser, base_url, "/runs")  # a fresh document: focus starts at its top
    reached = []
    for _ in range(1 + len(NAV)):
        browser.switch_to.active_element.send_keys(Keys.TAB)
        reached.append(browser.switch_to.active_element.text)
    assert reached == ["Skip to content", *NAV]
    browser.switch_to.active_element.send_keys(Keys.ENTER)  # Enter follows the link
    wait_rendered(browser, "/search")
    assert browser.switch_to.active_element.get_attribute("id") == "main"
