"""Every main page in headless Chromium on the seeded database: it loads without console
errors, charts carry the seeded figures, a run leads to a trajectory and its diff, a
running run updates itself, two runs compare problem by problem, turns filter down to a
failed test's input, expected and actual output and error, a training step shows its
groups with rewards and advantages, a silent job reads stale, and a screenshot of each
page is saved."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.training.browse import group_advantages
from tests.ui.pages import (
    MAIN_PAGES,
    full_page_screenshot,
    open_view,
    renders,
    route_of,
    severe_console_entries,
    wait_rendered,
)
from tests.ui.seed import (
    CHANGE_COUNTS,
    FINISHED_PASS_AT_1,
    RUNTIME_ERROR,
    STEP_GROUPS,
    TRAINED_PASS_AT_1,
    TRAINING_METRICS,
    Seeded,
    add_turn,
)


@pytest.mark.parametrize("name", list(MAIN_PAGES))
def test_page_loads_without_console_errors(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded, screenshots: Path, name: str
) -> None:
    browser.get_log("browser")  # drop what earlier pages logged
    open_view(browser, base_url, route_of(name, seeded))
    headings = browser.find_elements(By.TAG_NAME, "h1")
    assert len(headings) == 1 and headings[0].text not in ("", "Not available")
    assert browser.find_elements(By.CSS_SELECTOR, "main .error") == []
    assert browser.find_element(By.TAG_NAME, "html").get_attribute("lang") == "en"
    full_page_screenshot(browser, screenshots / f"{name}.png")
    assert severe_console_entries(browser) == []


def _points(browser: webdriver.Chrome, chart: str, series: str) -> list[tuple[float, float]]:
    circles = browser.find_elements(
        By.CSS_SELECTOR, f'[data-chart="{chart}"] g[data-series="{series}"] circle'
    )
    return [(float(c.get_attribute("data-x")), float(c.get_attribute("data-y"))) for c in circles]


def test_run_chart_shows_the_seeded_pass_rates(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded
) -> None:
    run = seeded.finished_run
    open_view(browser, base_url, f"/runs/{run}?compare={seeded.running_run}")
    points = _points(browser, "pass-chart", f"run #{run} Pass@1")
    assert [x for x, _ in points] == [0, 1, 2]
    assert [y for _, y in points] == pytest.approx(FINISHED_PASS_AT_1)
    overlaid = _points(browser, "pass-chart", f"run #{seeded.running_run} Pass@1")
    assert len(overlaid) == 2  # the running run's two turns, overlaid
    assert browser.find_element(By.CSS_SELECTOR, '[data-chart="pass-chart"] svg[role="img"]')


def test_training_chart_shows_the_seeded_steps(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded
) -> None:
    open_view(browser, base_url, f"/training/{seeded.training_job}")
    points = _points(browser, "reward-chart", "reward_mean")
    assert points == [(i + 1, m["reward_mean"]) for i, m in enumerate(TRAINING_METRICS)]
    stale = _points(browser, "stale-chart", "dropped_stale")
    assert [y for _, y in stale] == [m["dropped_stale"] for m in TRAINING_METRICS]
    assert len(_points(browser, "phase-chart", "generate_seconds")) == 3


def test_from_a_run_to_a_trajectory_to_its_diff(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded
) -> None:
    run = seeded.finished_run
    open_view(browser, base_url, f"/runs/{run}")
    Select(browser.find_element(By.ID, "difficulty-filter")).select_by_value("medium")
    wait_rendered(browser, f"/runs/{run}?difficulty=medium")
    rows = browser.find_elements(By.CSS_SELECTOR, "#problems-table tbody tr")
    assert len(rows) == 1 and "double" in rows[0].text
    rows[0].find_element(By.LINK_TEXT, "double").click()
    wait_rendered(browser, f"/runs/{run}/problems/double")
    Select(browser.find_element(By.ID, "sample-picker")).select_by_value("1")
    wait_rendered(browser, f"/runs/{run}/problems/double?sample=1")
    diff = browser.find_element(By.CSS_SELECTOR, "#turn-section-1 [data-testid=diff]")
    added = [e.text for e in diff.find_elements(By.CSS_SELECTOR, ".add")]
    removed = [e.text for e in diff.find_elements(By.CSS_SELECTOR, ".del")]
    assert "+print(2 * a)" in added and "-print(2 * a + 1)" in removed
    # The flagged turn links to the hacking analysis, which shows the judge's category.
    browser.find_element(By.CSS_SELECTOR, "#turn-section-1 a[href$='/hacking']").click()
    wait_rendered(browser, f"/runs/{run}/hacking")
    assert "judge-model: 1" in browser.find_element(By.ID, "main").text


def test_sorting_the_problem_table(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded
) -> None:
    open_view(browser, base_url, f"/runs/{seeded.finished_run}")
    button = "//table[@id='problems-table']//th/button[text()='Pass turn 0 [95%]']"
    browser.find_element(By.XPATH, button).click()
    browser.find_element(By.XPATH, button).click()  # again: descending, the best first
    first = browser.find_element(By.CSS_SELECTOR, "#problems-table tbody tr td")
    assert first.text == "sum-two"
    header = browser.find_element(By.XPATH, f"{button}/..")
    assert header.get_attribute("aria-sort") == "descending"


def test_a_running_run_updates_itself(
    browser: webdriver.Chrome,
    base_url: str,
    seeded: Seeded,
    ui_sessions: sessionmaker[Session],
) -> None:
    open_view(browser, base_url, "/runs")
    cell = f"[data-testid=turns-{seeded.running_run}]"
    before = int(browser.find_element(By.CSS_SELECTOR, cell).text)
    seen = renders(browser)
    add_turn(ui_sessions, seeded.running_run)
    WebDriverWait(browser, 15).until(
        lambda d: (
            renders(d) > seen and int(d.find_element(By.CSS_SELECTOR, cell).text) == before + 1
        )
    )


def test_search_leads_to_the_problem(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded
) -> None:
    open_view(browser, base_url, "/search")
    field = browser.find_element(By.ID, "search-input")
    field.send_keys("negative numbers")
    field.submit()
    wait_rendered(browser, "/search?q=negative+numbers")
    browser.find_element(By.PARTIAL_LINK_TEXT, "problem sum-two").click()
    wait_rendered(browser, "/datasets/demo/problems/sum-two")
    assert "Mind negative numbers" in browser.find_element(By.ID, "main").text


def _cells(browser: webdriver.Chrome, selector: str) -> list[str]:
    return [e.text for e in browser.find_elements(By.CSS_SELECTOR, selector)]


def test_comparing_two_runs(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded, screenshots: Path
) -> None:
    a, b = seeded.finished_run, seeded.trained_run
    open_view(browser, base_url, "/runs")
    assert browser.find_element(By.CSS_SELECTOR, f"[data-testid=policy-{b}]").text == "v3"
    Select(browser.find_element(By.ID, "compare-a")).select_by_value(str(a))
    Select(browser.find_element(By.ID, "compare-b")).select_by_value(str(b))
    browser.find_element(By.ID, "compare-submit").click()
    wait_rendered(browser, f"/compare/{a}/{b}")
    assert [y for _, y in _points(browser, "compare-chart", f"A: run #{a} Pass@1")] == (
        pytest.approx(FINISHED_PASS_AT_1)
    )
    assert [y for _, y in _points(browser, "compare-chart", f"B: run #{b} Pass@1")] == (
        pytest.approx(TRAINED_PASS_AT_1)
    )
    for turn, counts in enumerate(CHANGE_COUNTS):
        row = f'#change-counts tr[data-turn="{turn}"]'
        shown = {k: int(browser.find_element(By.CSS_SELECTOR, f"{row} [data-change={k}]").text)
                 for k in counts}  # fmt: skip
        assert shown == counts
    # Each turn's Pass@1 difference carries its interval; each run's Pass@1 its band.
    for turn in range(3):
        shown = browser.find_element(By.CSS_SELECTOR, f"[data-testid=difference-{turn}]").text
        points = round(100 * (TRAINED_PASS_AT_1[turn] - FINISHED_PASS_AT_1[turn]), 1)
        assert shown.startswith(
            f"{'+' if points > 0 else '−' if points < 0 else '±'}{abs(points)} pp ["
        )
        verdict = browser.find_element(By.CSS_SELECTOR, f"[data-testid=verdict-{turn}]").text
        assert verdict == "too few (3 problems)"  # the seed's three problems
    band = browser.find_elements(By.CSS_SELECTOR, '[data-chart="compare-chart"] path[data-band]')
    assert len(band) == 2
    # One sample of two moving (double at turn 1) is within noise, not "broken".
    double = browser.find_element(By.CSS_SELECTOR, "[data-testid=cell-double-1]").text
    assert double.startswith("100.0% → 50.0%") and "within noise" in double
    # Which problem did training break at turn 2 (the last, looked at first)? Only "sum-two".
    Select(browser.find_element(By.ID, "change-filter")).select_by_value("broken")
    wait_rendered(browser, f"/compare/{a}/{b}?turn=2&change=broken")
    rows = browser.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr")
    assert len(rows) == 1
    cell = browser.find_element(By.CSS_SELECTOR, "[data-testid=cell-sum-two-2]").text
    assert cell.startswith("100.0% → 0.0%") and "broken" in cell
    full_page_screenshot(browser, screenshots / "compare-broken.png")
    rows[0].find_element(By.LINK_TEXT, f"B #{b}").click()
    wait_rendered(browser, f"/runs/{b}/problems/sum-two")
    assert f"sum-two in run #{b}" in browser.find_element(By.TAG_NAME, "h1").text
    # From a run's page, the same comparison is one click away.
    open_view(browser, base_url, f"/runs/{b}")
    browser.find_element(By.LINK_TEXT, f"run #{a}").click()
    wait_rendered(browser, f"/compare/{a}/{b}")
    assert severe_console_entries(browser) == []


def test_filtering_turns_and_opening_a_failed_test(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded, screenshots: Path
) -> None:
    run = seeded.finished_run
    open_view(browser, base_url, f"/runs/{run}")
    browser.find_element(By.LINK_TEXT, "Filter and search its trajectories").click()
    wait_rendered(browser, f"/runs/{run}/trajectories")
    Select(browser.find_element(By.ID, "filter-verdict")).select_by_value("runtime_error")
    Select(browser.find_element(By.ID, "filter-turn")).select_by_value("1")
    browser.find_element(By.ID, "filter-submit").click()
    wait_rendered(browser, f"/runs/{run}/trajectories?verdict=runtime_error&turn=1")
    rows = browser.find_elements(By.CSS_SELECTOR, "#turns-table tbody tr")
    assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == ["lcb/reverse"] * 2
    # Reward range: turns of "double" whose reward is at least 0.5 (its passing turns).
    Select(browser.find_element(By.ID, "filter-verdict")).select_by_value("")
    Select(browser.find_element(By.ID, "filter-turn")).select_by_value("")
    browser.find_element(By.ID, "filter-problem").send_keys("double")
    Select(browser.find_element(By.ID, "filter-component")).select_by_value("correctness")
    browser.find_element(By.ID, "filter-min").send_keys("0.5")
    browser.find_element(By.ID, "filter-submit").click()
    wait_rendered(browser, f"/runs/{run}/trajectories?problem=double&component=correctness&min=0.5")
    assert _cells(browser, "#turns-table [data-testid=component]") == ["1"] * 4
    # One click from a verdict to the test: input, expected, actual output and error.
    open_view(browser, base_url, f"/runs/{run}/trajectories?verdict=runtime_error")
    browser.find_element(By.CSS_SELECTOR, "#turns-table [data-verdict=public-1]").click()
    wait_rendered(browser, f"/runs/{run}/problems/lcb%2Freverse?sample=0&turn=0&test=public-1")
    detail = browser.find_element(By.ID, "test-detail")
    assert "public test #2" in detail.text and "runtime_error" in detail.text
    testid = "[data-testid={}]".format
    assert detail.find_element(By.CSS_SELECTOR, testid("test-input")).text == "2 2"
    assert detail.find_element(By.CSS_SELECTOR, testid("test-expected")).text == "4"
    assert detail.find_element(By.CSS_SELECTOR, testid("test-actual")).text == "(empty)"
    assert detail.find_element(By.CSS_SELECTOR, testid("test-error")).text == RUNTIME_ERROR
    full_page_screenshot(browser, screenshots / "test-detail-from-filter.png")
    assert severe_console_entries(browser) == []


def test_training_groups_and_liveness(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded, screenshots: Path
) -> None:
    job = seeded.training_job
    open_view(browser, base_url, f"/training/{job}")
    entropy = _points(browser, "entropy-chart", "entropy")
    assert entropy == [(i + 1, m["entropy"]) for i, m in enumerate(TRAINING_METRICS)]
    assert browser.find_elements(By.CSS_SELECTOR, "[data-testid=stale-note]") == []
    Select(browser.find_element(By.ID, "step-picker")).select_by_value("1")
    wait_rendered(browser, f"/training/{job}?step=1")
    rewards = _cells(browser, "[data-group] [data-testid=reward]")
    assert [float(r) for r in rewards] == STEP_GROUPS[1]
    advantages = [float(a) for a in _cells(browser, "[data-group] [data-testid=advantage]")]
    assert advantages == pytest.approx(group_advantages(STEP_GROUPS[1]), abs=1e-3)
    full_page_screenshot(browser, screenshots / "training-groups.png")
    open_view(browser, base_url, "/training")
    stale = browser.find_element(By.CSS_SELECTOR, f"[data-testid=liveness-{seeded.stale_job}]")
    assert "running" in stale.text and "stale" in stale.text
    assert browser.find_elements(By.CSS_SELECTOR, f"[data-testid=liveness-{job}]") == []
    open_view(browser, base_url, f"/training/{seeded.stale_job}")
    note = browser.find_element(By.CSS_SELECTOR, "[data-testid=stale-note]").text
    assert "probably stopped" in note and f"cobalt trainer serve --job {seeded.stale_job}" in note
    assert severe_console_entries(browser) == []


def test_a_run_names_its_policy_and_the_job_lists_its_checkpoints_and_runs(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded, screenshots: Path
) -> None:
    """Provenance: the trained run names the job's step-3 checkpoint and links the job;
    the job's page lists each checkpoint, the line that serves it, and that run."""
    job = seeded.training_job
    open_view(browser, base_url, f"/runs/{seeded.trained_run}")
    policy = browser.find_element(By.CSS_SELECTOR, "[data-testid=run-policy]")
    assert f"job {job} step 3, version 3 at /checkpoints/job-{job}/step-3/policy" in policy.text
    assert "digest 030303030303" in policy.text
    policy.find_element(By.LINK_TEXT, f"training job #{job}").click()
    wait_rendered(browser, f"/training/{job}")
    row = browser.find_element(By.CSS_SELECTOR, "[data-testid=checkpoint-3]")
    serve = f"cobalt inference serve --model /checkpoints/job-{job}/step-3/policy"
    assert f"{serve} --served-name demo-grpo-step-3" in row.text
    assert "not on this machine" in row.text
    assert row.find_element(By.LINK_TEXT, f"#{seeded.trained_run}")
    other = browser.find_element(By.CSS_SELECTOR, "[data-testid=checkpoint-1]")
    assert other.text.endswith("none")  # no run was evaluated with step 1
    full_page_screenshot(browser, screenshots / "training-checkpoints.png")
    assert severe_console_entries(browser) == []


def test_a_job_that_spent_its_budget_reads_finished_not_stale(
    browser: webdriver.Chrome, base_url: str, seeded: Seeded
) -> None:
    job = seeded.finished_job  # silent for two hours, as a finished demo's job is
    open_view(browser, base_url, "/training")
    row = browser.find_element(By.XPATH, f"//tr[.//a[@href='#/training/{job}']]")
    assert "finished" in row.text and "stale" not in row.text and "3 / 3" in row.text
    assert browser.find_elements(By.CSS_SELECTOR, f"[data-testid=liveness-{job}]") == []
    open_view(browser, base_url, f"/training/{job}")
    assert browser.find_elements(By.CSS_SELECTOR, "[data-testid=stale-note]") == []
    assert "finished" in browser.find_element(By.TAG_NAME, "h1").text
    cards = [c.text for c in browser.find_elements(By.CSS_SELECTOR, ".card")]
    assert any("3 / 3" in c and "step / budget" in c for c in cards), cards
    assert severe_console_entries(browser) == []
