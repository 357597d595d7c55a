"""The page at `/` in a real browser (Debian's chromium, headless): a person types a claim,
submits it from the keyboard, and sees the verdict with the evidence words highlighted.

Skips without chromium and chromedriver, unless ``FEVEROUS_ES_REQUIRE_BROWSER`` is set (CI
installs both with apt and sets it). ``FEVEROUS_ES_SCREENSHOTS=DIR`` keeps the screenshots.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from bench.serve_process import running_server

CLAIM = "Gold medalist Henri Schoeman won bronze at Rio in 2016."

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not (CHROMIUM and DRIVER):
    if os.environ.get("FEVEROUS_ES_REQUIRE_BROWSER"):
        raise RuntimeError(
            "FEVEROUS_ES_REQUIRE_BROWSER is set but chromium / chromedriver is missing"
        )
    pytest.skip(
        "no chromium and chromedriver here (apt install chromium chromium-driver)",
        allow_module_level=True,
    )


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,1400"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(DRIVER))
    yield driver
    driver.quit()


def screenshot(driver, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    if kept := os.environ.get("FEVEROUS_ES_SCREENSHOTS"):
        shutil.copyfile(path, Path(kept) / name)
    return path


def test_a_person_checks_a_claim_and_sees_why(browser, sample_index, tmp_path) -> None:
    with running_server(sample_index) as server:
        browser.get(server.url + "/")
        box = browser.find_element(By.ID, "claim")
        box.send_keys(CLAIM)
        box.send_keys(Keys.CONTROL, Keys.ENTER)  # the keyboard submits
        wait = WebDriverWait(browser, 60)
        wait.until(expected_conditions.visibility_of_element_located((By.ID, "result")))
        label = browser.find_element(By.ID, "label").text
        assert label in {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}
        # One figure: the label's probability, the same one the API's "probabilities" lists
        # for it; the other labels' beside it.
        answer = httpx.post(server.url + "/v1/verify", json={"claim": CLAIM}, timeout=60).json()
        assert answer["probability"] == answer["probabilities"][label]
        assert browser.find_element(By.ID, "probability").text == (
            f"{100 * answer['probability']:.1f} %"
        )
        others = browser.find_element(By.ID, "probabilities").text
        assert label not in others and len(others.split("%")) == 3  # two others
        read = browser.find_elements(By.CSS_SELECTOR, "#decided .evidence")
        assert read, "no evidence shown"
        marks = [m.text.lower() for m in browser.find_elements(By.CSS_SELECTOR, "#decided mark")]
        assert "bronze" in marks and "rio" in marks
        assert any("Henri Schoeman" in e.text and "hop 1" in e.text for e in read)
        assert all("on its own:" in e.text for e in read)  # each sentence's own entailment
        assert screenshot(browser, tmp_path, "serve-sentences.png").stat().st_size > 10_000

        box.clear()
        box.send_keys("ricardo páez play for venezuela")
        browser.find_element(By.ID, "check").click()
        wait.until(
            expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "#decided table"))
        )
        cells = browser.find_elements(By.CSS_SELECTOR, "#decided td.matched mark")
        assert any(c.text.lower() == "venezuela" for c in cells)
        browser.set_window_size(390, 1200)  # a phone: nothing wider than the screen but the table
        overflow = browser.execute_script(
            "return document.body.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0
        screenshot(browser, tmp_path, "serve-table-narrow.png")


FACT = "Henri Schoeman won the bronze medal in the triathlon at the 2016 Summer Olympics."


def test_a_person_checks_a_text_against_its_source(browser, sample_index, tmp_path) -> None:
    # an emoji a line: the service counts code points, the page's strings UTF-16 units
    filler = [
        f"The town of Aldbury{i} \U0001f3a1 has held a fair since {1700 + i}." for i in range(40)
    ]
    source = "\n".join([*filler[:30], FACT, *filler[30:]])
    text = "Henri Schoeman won a bronze medal at the 2016 Olympics. He won gold in 2012."
    with running_server(sample_index) as server:
        browser.get(server.url + "/#text-view")
        assert not browser.find_element(By.ID, "claim").is_displayed()  # the other view
        # A source this long goes in as a paste would, not key by key.
        browser.execute_script("document.getElementById('source').value = arguments[0]", source)
        box = browser.find_element(By.ID, "text")
        box.send_keys(text)
        box.send_keys(Keys.CONTROL, Keys.ENTER)
        wait = WebDriverWait(browser, 60)
        wait.until(expected_conditions.visibility_of_element_located((By.ID, "text-result")))
        summary = browser.find_element(By.ID, "summary").text
        assert summary == "1 of 2 sentences supported by the source"
        first, second = browser.find_elements(By.CSS_SELECTOR, "#sentences li")
        assert "supported" in first.get_attribute("class").split()
        assert "not-supported" in second.get_attribute("class").split()
        assert first.text.startswith("SUPPORTS") and "He won gold in 2012." in second.text
        span = browser.find_element(By.ID, "decided-span")
        assert FACT in span.text and span.is_displayed()  # the deciding span, in view
        assert screenshot(browser, tmp_path, "serve-text.png").stat().st_size > 10_000
        second.click()  # the other sentence's closest window is marked instead
        closest = browser.find_element(By.ID, "decided-span").text
        answer = httpx.post(
            server.url + "/v1/entail", json={"text": text, "evidence": [source]}, timeout=60
        ).json()
        assert closest == answer["sentences"][1]["window"]["text"]
        assert second.get_attribute("aria-current") == "true"
        assert first.get_attribute("aria-current") is None
        # Two documents, a line of --- between them: each read on its own, the span marked in
        # the second where the fact is.
        two = "\n".join(filler[:20]) + "\n---\n" + "\n".join([*filler[20:], FACT])
        browser.execute_script("document.getElementById('source').value = arguments[0]", two)
        browser.find_element(By.ID, "check-text").click()
        wait.until(lambda b: "---" in b.find_element(By.ID, "source-view").text)  # the answer
        shown = browser.find_element(By.ID, "source-view").text
        span = browser.find_element(By.ID, "decided-span").text
        assert FACT in span and shown.index(FACT) > shown.index("---")  # in the second one
