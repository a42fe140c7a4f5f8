"""The web UI in real headless Chromium against a seeded SQLite database.

The orchestrator app is served by uvicorn on a free port, exactly as `cobalt api serve`
serves it; Debian's chromium is driven through Debian's chromedriver (selenium finds no
browser of its own to download). Screenshots of each page go to test-output/ui/.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from tests.support.serving import serve_asgi
from tests.ui.pages import COMMAND_SECONDS, WAIT_SECONDS
from tests.ui.seed import Seeded, seed

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "ui"


@pytest.fixture(scope="module")
def ui_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Seeded]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('ui') / 'cobalt.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    seeded = seed(make_sessionmaker(engine))
    engine.dispose()
    yield url, seeded


@pytest.fixture(scope="module")
def ui_sessions(ui_database: tuple[str, Seeded]) -> Iterator[sessionmaker[Session]]:
    """Sessions on the UI's database, for a test that writes while the page is open."""
    engine = make_engine(ui_database[0])
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture(scope="module")
def seeded(ui_database: tuple[str, Seeded]) -> Seeded:
    return ui_database[1]


@pytest.fixture(scope="module")
def base_url(ui_database: tuple[str, Seeded]) -> Iterator[str]:
    settings = OrchestratorSettings(database_url=ui_database[0], redis_url=None)
    with serve_asgi(create_app(settings)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    options = Options()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # tests may run as root, where Chromium's own sandbox refuses
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(WAIT_SECONDS)
    driver.command_executor.client_config.timeout = COMMAND_SECONDS
    yield driver
    # A wedged browser must not hold the teardown for minutes (selenium retries its DELETE).
    driver.command_executor.client_config.timeout = 10
    try:
        driver.quit()
    except OSError as error:  # the driver process already gone: nothing left to stop
        warnings.warn(f"chromedriver did not stop cleanly: {error}", stacklevel=1)


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
