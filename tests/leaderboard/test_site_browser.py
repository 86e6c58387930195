"""The built site in real headless Chromium: the front page, sorting, filters, records, logs, the viewer, escaping."""

from __future__ import annotations

import functools
import http.server
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def site(tmp_path_factory, genuine_sokoban) -> Path:
    from agentgym.cli import main as agentgym
    from agentgym.leaderboard.build import build
    from tests.leaderboard.test_build import REPO, XSS

    root = tmp_path_factory.mktemp("board") / "leaderboards"
    shutil.copytree(REPO / "leaderboards" / "reported", root / "reported")
    agentgym(
        [
            "submit",
            str(genuine_sokoban),
            "--name",
            XSS,
            "--model",
            "none",
            "--method",
            "expert",
            "--method-type",
            "Scripted",
            "--entries",
            str(root / "entries"),
            "--workers",
            "1",
        ]
    )
    build(root)
    return root / "site"


@pytest.fixture(scope="module")
def server(site):
    # The leaderboards/ folder is served: the site links the entries' logs where they lie (../entries/...).
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site.parent))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/site"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def driver():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver)")
    profile = tempfile.mkdtemp(prefix="agentgym-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
    ):
        opts.add_argument(flag)
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.implicitly_wait(2)
    yield drv
    drv.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _visible_rows(driver, table="board"):
    from selenium.webdriver.common.by import By

    return [r for r in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr") if r.is_displayed()]


def _column(driver, index, table="board"):
    from selenium.webdriver.common.by import By

    return [r.find_elements(By.TAG_NAME, "td")[index].text for r in _visible_rows(driver, table)]


def test_front_page_has_tables_grid_links_and_date(driver, server):
    import urllib.request

    from selenium.webdriver.common.by import By

    driver.get(f"{server}/index.html")
    text = driver.find_element(By.TAG_NAME, "main").text
    assert "How to submit" in text and "agentgym eval --suite" in text and "agentgym submit" in text
    assert "Last updated" in driver.find_element(By.ID, "updated").text
    sokoban = driver.find_element(By.ID, "suite-sokoban")
    rows = sokoban.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == 1 and rows[0].find_elements(By.TAG_NAME, "td")[2].text == "100.0"
    assert "submitted / reported" in driver.find_element(By.ID, "suite-alfworld-eval").text  # reported: kept apart
    grid = driver.find_element(By.ID, "grid")
    assert "sokoban" in grid.find_element(By.TAG_NAME, "thead").text
    assert "100.0" in grid.find_element(By.TAG_NAME, "tbody").text
    badge = sokoban.find_element(By.CSS_SELECTOR, "a.badge-replay-verified")
    badge.click()  # the badge links to the verification record
    record = driver.find_element(By.TAG_NAME, "main").text
    assert "Verification record" in record and "Verified by" in record and "100 of 100 episodes, accepted" in record
    assert "verifier version" in record
    log = driver.find_element(By.CSS_SELECTOR, "a.log-link")
    assert log.get_attribute("download") is not None
    with urllib.request.urlopen(log.get_attribute("href")) as resp:  # the log downloads, gzip and all
        assert resp.status == 200 and resp.read(2) == b"\x1f\x8b"


def test_suite_page_ranks_verified_rows_apart_and_links_logs(driver, server):
    from selenium.webdriver.common.by import By

    driver.get(f"{server}/sokoban.html")
    verified = _visible_rows(driver, "board")
    assert len(verified) == 1 and "replay-verified" in verified[0].text
    others = _visible_rows(driver, "board-other")
    assert others and all("verified" not in r.find_elements(By.TAG_NAME, "td")[5].text for r in others)
    assert verified[0].find_element(By.CSS_SELECTOR, "a.log-link").text == "Sokoban-v0.jsonl.gz"


def test_sorting_by_columns(driver, server):
    from selenium.webdriver.common.by import By

    driver.get(f"{server}/alfworld-eval.html")
    headers = driver.find_elements(By.CSS_SELECTOR, "#board-other thead th")
    names = [h.text for h in headers]
    look = names.index("Look")
    headers[look].click()  # numbers: best first
    values = [float(v.split("±")[0]) for v in _column(driver, look, "board-other") if v]
    assert values == sorted(values, reverse=True) and values[0] == 88.6
    headers[look].click()  # second click flips
    values = [float(v.split("±")[0]) for v in _column(driver, look, "board-other") if v]
    assert values == sorted(values)
    assert _column(driver, look, "board-other")[-1] == ""  # rows without the column stay last either way
    headers[names.index("Model")].click()
    models = _column(driver, names.index("Model"), "board-other")
    assert models == sorted(models, key=str.lower)


def test_filters_by_size_type_and_source(driver, server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver.get(f"{server}/alfworld-eval.html")
    total = len(_visible_rows(driver, "board-other"))
    Select(driver.find_element(By.ID, "filter-size")).select_by_value("small")
    assert set(_column(driver, 2, "board-other")) == {"Qwen2.5-1.5B-Instruct"}
    Select(driver.find_element(By.ID, "filter-type")).select_by_value("Prompting")
    assert sorted(_column(driver, 1, "board-other")) == ["ReAct", "Reflexion"]
    assert driver.find_element(By.ID, "shown").text == f"2 of {total} rows"
    Select(driver.find_element(By.ID, "filter-size")).select_by_value("unknown")
    assert sorted(_column(driver, 2, "board-other")) == ["GPT-4o (closed)", "Gemini-2.5-Pro (closed)"]
    Select(driver.find_element(By.ID, "filter-type")).select_by_value("")
    Select(driver.find_element(By.ID, "filter-size")).select_by_value("")
    Select(driver.find_element(By.ID, "filter-source")).select_by_value("rerun-verified")
    assert _visible_rows(driver, "board-other") == [] and _visible_rows(driver, "board") == []
    Select(driver.find_element(By.ID, "filter-source")).select_by_value("reported")
    assert len(_visible_rows(driver, "board-other")) == total


def test_viewer_steps_through_an_episode_and_escapes_names(driver, server):
    from selenium.webdriver.common.by import By

    driver.get(f"{server}/sokoban.html")
    assert driver.execute_script("return window.__pwned === undefined")
    names = _column(driver, 1)
    assert any(n.startswith("<script>window.__pwned = 1</script>") for n in names)  # shown as text
    driver.find_element(By.CSS_SELECTOR, ".viewer-link").click()
    assert driver.execute_script("return window.__pwned === undefined")
    assert "<script>" in driver.find_element(By.CSS_SELECTOR, "h1 .name").text
    pos = driver.find_element(By.ID, "position")
    assert pos.text.startswith("Step 0 / ")
    n = int(pos.text.split("/ ")[1])
    first_obs = driver.find_element(By.ID, "observation").text
    assert "#" in first_obs and driver.find_element(By.ID, "action").text in {"up", "down", "left", "right"}
    assert driver.find_element(By.ID, "prev").get_attribute("disabled")
    driver.find_element(By.ID, "next").click()
    assert pos.text == f"Step 1 / {n}"
    assert driver.find_element(By.ID, "observation").text != first_obs
    for _ in range(n - 1):
        driver.find_element(By.ID, "next").click()
    assert driver.find_element(By.ID, "status").text == "episode over: success"
    assert driver.find_element(By.ID, "next").get_attribute("disabled")
    driver.find_element(By.ID, "prev").click()
    assert pos.text == f"Step {n - 1} / {n}"
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, "episode")).select_by_index(5)
    assert pos.text.startswith("Step 0 / ")
    assert "seed 100005" in Select(driver.find_element(By.ID, "episode")).first_selected_option.text


def test_site_works_from_file_urls(driver, site):
    from selenium.webdriver.common.by import By

    driver.get((site / "index.html").as_uri())
    driver.find_element(By.LINK_TEXT, "sokoban").click()
    headers = driver.find_elements(By.CSS_SELECTOR, "#board thead th")
    headers[[h.text for h in headers].index("Success")].click()
    assert _column(driver, 6)[0] == "100.0"


def save_front_page_png(site: Path, png: Path, width: int = 1280, height: int = 1600) -> Path:
    """Screenshot the built front page in headless Chromium (what leaderboards/README.md shows)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"):
        opts.add_argument(flag)
    opts.add_argument(f"--window-size={width},{height}")
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        drv.get((site / "index.html").resolve().as_uri())
        drv.save_screenshot(str(png))
    finally:
        drv.quit()
    return png


if (
    __name__ == "__main__"
):  # python -m tests.leaderboard.test_site_browser leaderboards/site leaderboards/site-front-page.png
    import sys

    print(save_front_page_png(Path(sys.argv[1]), Path(sys.argv[2])))


def test_build_screenshot_draws_the_front_page_it_just_built(site, tmp_path):
    """`leaderboard build --screenshot` redraws the README's picture from the built site (no stale picture)."""
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium (/usr/bin/chromium)")
    from agentgym.leaderboard.site import screenshot

    out = screenshot(site / "index.html", tmp_path / "front.png", width=800, height=600)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000  # a drawn page, not a blank
