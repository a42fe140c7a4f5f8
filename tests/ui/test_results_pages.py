"""Results in headless Chromium on the seeded database: nothing measured reads as not
measured (never 0%) with the command that measures it, comparisons are offered only
between comparable runs, rates carry their intervals, several runs sit side by side with
per-difficulty columns and a CSV that matches, run names, tags, notes and the parent run
show, training jobs overlay, and the step table fits the page, most important first."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import httpx
from selenium import webdriver
from selenium.webdriver.common.by import By
from sqlalchemy.orm import Session, sessionmaker

from tests.ui.pages import full_page_screenshot, open_view, severe_console_entries, wait_rendered
from tests.ui.seed import FINISHED_PASS_AT_1, FINISHED_PASSES, TRAINED_PASS_AT_1, Seeded, add_run


def _text(browser: webdriver.Chrome, testid: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, f"[data-testid='{testid}']").text


def _links(browser: webdriver.Chrome) -> list[str]:
    return [a.get_attribute("href") or "" for a in browser.find_elements(By.CSS_SELECTOR, "main a")]


def test_unevaluated_runs_and_own_turn_zero_are_not_offered(
    browser: webdriver.Chrome,
    base_url: str,
    seeded: Seeded,
    ui_sessions: sessionmaker[Session],
    screenshots: Path,
) -> None:
    unevaluated = add_run(ui_sessions, FINISHED_PASSES, turns=2, evaluated=False)
    turn_zero = {p: [[s[0]] for s in samples] for p, samples in FINISHED_PASSES.items()}
    sample = add_run(ui_sessions, turn_zero, turns=0)
    refine = add_run(ui_sessions, FINISHED_PASSES, turns=2, parent_run_id=sample)
    open_view(browser, base_url, f"/runs/{unevaluated}")
    note = _text(browser, "unevaluated-note")
    assert f"cobalt run evaluate {unevaluated}" in note
    cards = browser.find_element(By.CSS_SELECTOR, ".cards").text
    assert "0.0%" not in cards and "Pass@1 turn 0 [95%]" in cards
    assert browser.find_elements(By.ID, "compare-links") == []
    assert browser.find_elements(By.CSS_SELECTOR, '[data-chart="pass-chart"] circle') == []
    full_page_screenshot(browser, screenshots / "run-unevaluated.png")
    # An evaluated run offers the other evaluated runs only, never the unevaluated one.
    open_view(browser, base_url, f"/runs/{seeded.finished_run}")
    offered = browser.find_element(By.ID, "compare-links").text
    assert f"run #{seeded.trained_run}" in offered and f"run #{unevaluated}" not in offered
    assert browser.find_elements(By.ID, f"compare-{unevaluated}") == []
    # A refine run is not offered its parent sample run (its own turn 0), and the parent
    # is linked.
    open_view(browser, base_url, f"/runs/{refine}")
    offered = browser.find_element(By.ID, "compare-links").text
    assert f"run #{sample} " not in f"{offered} " and f"run #{seeded.finished_run}" in offered
    assert f"#/runs/{sample}" in browser.find_element(
        By.CSS_SELECTOR, "[data-testid=parent-run] a"
    ).get_attribute("href")
    # The comparison page of an unevaluated run says so instead of plotting 0%.
    open_view(browser, base_url, f"/compare/{seeded.finished_run}/{unevaluated}")
    assert f"cobalt run evaluate {unevaluated}" in _text(browser, f"unevaluated-{unevaluated}")
    assert _text(browser, "difference-0") == "–"
    assert severe_console_entries(browser) == []


def test_rates_carry_intervals_and_the_chart_a_band(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded
) -> None:
    open_view(browser, base_url, f"/runs/{seeded.finished_run}")
    cards = browser.find_element(By.CSS_SELECTOR, ".cards").text
    assert f"{100 * FINISHED_PASS_AT_1[0]:.1f}% [" in cards
    circles = browser.find_elements(By.CSS_SELECTOR, '[data-chart="pass-chart"] circle[data-low]')
    assert len(circles) == 3
    for circle in circles:
        low, y, high = (
            float(circle.get_attribute(k) or "nan") for k in ("data-low", "data-y", "data-high")
        )
        assert 0 <= low <= y <= high <= 1
    assert browser.find_elements(By.CSS_SELECTOR, '[data-chart="pass-chart"] path[data-band]')
    row = browser.find_element(
        By.XPATH, "//table[@id='problems-table']//tr[td/a[text()='sum-two']]"
    )
    assert "50.0% [" in row.text  # one of two samples at turn 0, with its Wilson interval


def test_several_runs_side_by_side_and_their_csv(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded, screenshots: Path
) -> None:
    a, b = seeded.finished_run, seeded.trained_run
    open_view(browser, base_url, "/runs")
    for picked, run in enumerate((a, b)):  # the list re-renders while a run is running
        browser.find_element(By.ID, f"table-runs-{run}").click()
        wait_rendered(browser, f"/runs?pick={','.join(map(str, (a, b)[: picked + 1]))}")
    browser.find_element(By.ID, "table-runs-submit").click()
    wait_rendered(browser, f"/table?runs={a},{b}")
    assert _text(browser, f"first-{a}").startswith(f"{100 * FINISHED_PASS_AT_1[0]:.1f}% [")
    assert _text(browser, f"last-{b}").startswith(f"{100 * TRAINED_PASS_AT_1[-1]:.1f}% [")
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#runs-table th")]
    assert headers[-3:] == ["easy (last)", "medium (last)", "hard (last)"]
    assert _text(browser, f"level-{a}-hard") == "0.0% [0.0%, 65.8%] (1)"  # Wilson, 0 of 2
    assert _text(browser, f"level-{b}-hard").startswith("100.0%")
    full_page_screenshot(browser, screenshots / "table.png")
    link = browser.find_element(By.LINK_TEXT, "CSV").get_attribute("href") or ""
    rows = list(csv.DictReader(io.StringIO(httpx.get(link, timeout=30).text)))
    assert [int(r["run_id"]) for r in rows] == [a, b]
    assert float(rows[1]["pass_at_1_last"]) == TRAINED_PASS_AT_1[-1]
    assert severe_console_entries(browser) == []


def test_names_tags_and_notes_show(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded
) -> None:
    run = seeded.trained_run
    labels = {"name": "after-grpo", "tags": ["trained", "v3"], "notes": "200 steps of GRPO."}
    assert httpx.patch(f"{base_url}/v1/runs/{run}", json=labels, timeout=30).status_code == 200
    open_view(browser, base_url, f"/runs/{run}")
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Run #{run} after-grpo")
    assert _text(browser, "run-notes") == "200 steps of GRPO."
    assert "#trained" in browser.find_element(By.CSS_SELECTOR, ".run-labels").text
    open_view(browser, base_url, "/runs")
    assert "after-grpo" in browser.find_element(By.TAG_NAME, "table").text


def test_training_jobs_overlay_and_the_step_table_fits(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded, screenshots: Path
) -> None:
    browser.set_window_size(1024, 900)
    try:
        job = seeded.training_job
        open_view(browser, base_url, f"/training/{job}")
        headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#steps-table th")]
        assert headers[:3] == ["step", "reward mean", "pass rate"]
        width = "return [document.documentElement.scrollWidth, window.innerWidth]"
        page, window = browser.execute_script(width)
        assert page <= window  # the page itself never scrolls sideways
        browser.find_element(By.ID, "all-metrics").click()
        wait_rendered(browser, f"/training/{job}?step=3&metrics=all", after=1)
        assert len(browser.find_elements(By.CSS_SELECTOR, "#steps-table th")) > len(headers)
        page, window = browser.execute_script(width)
        assert page <= window
        full_page_screenshot(browser, screenshots / "training-steps-all.png")
        open_view(browser, base_url, "/training")
        for picked, chosen in enumerate((job, seeded.stale_job)):
            browser.find_element(By.ID, f"overlay-jobs-{chosen}").click()
            shown = ",".join(map(str, (job, seeded.stale_job)[: picked + 1]))
            wait_rendered(browser, f"/training?pick={shown}")
        browser.find_element(By.ID, "overlay-jobs-submit").click()
        wait_rendered(browser, f"/training/compare?jobs={job},{seeded.stale_job}")
        series = browser.find_elements(
            By.CSS_SELECTOR, '[data-chart="overlay-reward_mean"] g[data-series]'
        )
        assert len(series) == 1  # the silent job reported no step: no line, not a flat 0
        points = series[0].find_elements(By.TAG_NAME, "circle")
        assert [float(p.get_attribute("data-y") or "nan") for p in points] == [0.1, 0.3, 0.45]
        assert severe_console_entries(browser) == []
    finally:
        browser.set_window_size(1400, 1000)
