#!/usr/bin/python3
"""The exported page (viewer/page, `:export`, viewer.export_page) in a real browser: headless
Chromium driven by selenium opens it from a file:// URL.

  test_page_browser.py TAPEDECK SOURCE_DIR OUT_DIR

page_rnn_cell.lua exports the lecture's RNN cell at a stop inside its backward pass, with the
rewind history holding its forward ops and backward groups. Then: a click on W_h and on next_h
shows their op, name and statistics (the numbers tapedeck printed) in the side panel; moving the
history slider changes the highlighted node and the values shown; the console has no error; no
request leaves the page (the performance log's requests are the file itself or data:, and the page
lists no resource it loaded). Screenshots land in OUT_DIR. Exit 77 (skipped) without selenium,
Chromium or chromedriver.
"""
import json
import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def skip(why):
    print("skipped: " + why)
    sys.exit(SKIP)


try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:
    skip("no python3-selenium (apt install python3-selenium)")

CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if not os.path.exists(CHROMEDRIVER) or not CHROMIUM:
    skip("no chromium or chromedriver (apt install chromium chromium-driver)")


def check(condition, message):
    if not condition:
        print("FAILED: " + message)
        sys.exit(1)


def export_page(tapedeck, source_dir, out_dir):
    """Runs page_rnn_cell.lua; returns the page's path and the numbers tapedeck printed."""
    page = os.path.join(out_dir, "page_rnn_cell.html")
    if os.path.exists(page):
        os.remove(page)
    script = os.path.join(source_dir, "page_rnn_cell.lua")
    run = subprocess.run([tapedeck, script, page], capture_output=True, text=True, timeout=120)
    print(run.stdout + run.stderr, end="")
    check(run.returncode == 0, "page_rnn_cell.lua exited with %d" % run.returncode)
    expected = {}
    for name, lo, hi in re.findall(r"^(\w+) min (\S+) max (\S+)$", run.stdout, re.M):
        expected[name] = (lo, hi)
    check("W_h" in expected and "next_h" in expected, "page_rnn_cell.lua printed no reference numbers")
    return page, expected


def check_file(page):
    """Self-contained: no URL but '#' or data:, the data one JSON text that parses."""
    text = open(page, encoding="utf-8").read()
    check("http" not in text, "the page names an http(s) URL")
    for attr in re.findall(r"""(?:src|href)\s*=\s*["']?([^"' >]*)""", text):
        check(attr.startswith("#") or attr.startswith("data:"), "the page refers to " + attr)
    match = re.search(r'<script type="application/json" id="page-data">(.*?)</script>', text, re.S)
    check(match, "no <script id=page-data> in the page")
    data = json.loads(match.group(1))
    check(len(data["events"]) > 0, "the history's events are not in the page")
    return data


def start_browser():
    options = webdriver.ChromeOptions()
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1500,900"]:
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def node_box(driver, node_id):
    xpath = "//*[local-name()='g'][@class='node' or starts-with(@class,'node ')][*[local-name()='title'][text()='n%d']]" % node_id
    return driver.find_element(By.XPATH, xpath)


def click_node(driver, data, name):
    node = next(n for n in data["nodes"] if n.get("name") == name)
    node_box(driver, node["id"]).click()
    panel = driver.find_element(By.ID, "panel").text
    check(("#%d %s" % (node["id"], node["op"])) in panel, "the panel does not show %s's op: %r" % (name, panel[:300]))
    check(name in panel, "the panel does not show the name %s" % name)
    return node, panel


def check_clicks(driver, data, expected):
    node, panel = click_node(driver, data, "W_h")
    check(node["op"] == "randn", "W_h's op is %s" % node["op"])
    for word in ("shape", "[20,20]", "float32", "min", "max", "mean", "std", "NaN", "Inf"):
        check(word in panel, "W_h's panel lacks %r" % word)
    lo, hi = expected["W_h"]
    check(re.search(r"min\s+%s\s+max\s+%s" % (re.escape(lo), re.escape(hi)), panel),
          "W_h's panel does not show min %s max %s: %r" % (lo, hi, panel))
    check("page_rnn_cell.lua:" in panel, "W_h's panel lacks its file:line")
    check(len(driver.find_elements(By.CSS_SELECTOR, "#panel canvas")) >= 1, "no heatmap of W_h's value")
    node, panel = click_node(driver, data, "next_h")
    check(node["op"] == "tanh", "next_h's op is %s" % node["op"])
    check("next_h = (h2h + i2h):tanh()" in panel, "next_h's panel lacks its source line")
    lo, hi = expected["next_h"]
    check(re.search(r"min\s+%s\s+max\s+%s" % (re.escape(lo), re.escape(hi)), panel), "next_h's statistics: %r" % panel)
    check(len(driver.find_elements(By.CSS_SELECTOR, "#panel canvas")) == 2, "next_h's panel lacks the heatmap of its value or its gradient")


def highlighted(driver):
    boxes = driver.find_elements(By.CSS_SELECTOR, "#graph g.node.current")
    check(len(boxes) == 1, "%d highlighted nodes, not one" % len(boxes))
    return boxes[0].find_element(By.TAG_NAME, "title").get_attribute("textContent")


def check_slider(driver, data):
    slider = driver.find_element(By.ID, "slider")
    check(slider.get_attribute("value") == str(len(data["events"]) - 1), "the slider does not start at the newest event")
    last = (highlighted(driver), driver.find_element(By.ID, "event-text").text, driver.find_element(By.ID, "panel").text)
    check("backward" in last[1], "the newest event is not the backward stop: %r" % last[1])
    slider.send_keys(Keys.HOME)
    first = (highlighted(driver), driver.find_element(By.ID, "event-text").text, driver.find_element(By.ID, "panel").text)
    check(slider.get_attribute("value") == "0", "the slider did not move to the first event")
    check(first[1].startswith("event 1 of %d: forward" % len(data["events"])), "the first event's text: %r" % first[1])
    check(first[0] != last[0], "the highlighted node did not change (%s)" % first[0])
    check(first[0] == "n%d" % data["events"][0]["node"], "the highlighted node %s is not the first event's" % first[0])
    check(first[2] != last[2], "the values shown did not change")
    check(len(driver.find_elements(By.CSS_SELECTOR, "#graph g.node.later")) > 0, "nodes recorded after the first event are not dimmed")
    driver.find_element(By.ID, "next").click()
    check(slider.get_attribute("value") == "1", "next did not step the slider")
    check(highlighted(driver) == "n%d" % data["events"][1]["node"], "next did not highlight the second event's node")


def check_logs(driver, page):
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    check(not errors, "console messages: %r" % errors)
    url = "file://" + page
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            target = message["params"]["request"]["url"]
            check(target == url or target.startswith("data:"), "a request left the page: " + target)
    resources = driver.execute_script("return performance.getEntriesByType('resource').map(r => r.name)")
    check(resources == [], "the page loaded resources: %r" % resources)


def main():
    tapedeck, source_dir, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    page, expected = export_page(tapedeck, source_dir, out_dir)
    data = check_file(page)
    driver = start_browser()
    try:
        driver.get("file://" + page)
        driver.save_screenshot(os.path.join(out_dir, "page_start.png"))
        check_clicks(driver, data, expected)
        driver.save_screenshot(os.path.join(out_dir, "page_clicked.png"))
        check_slider(driver, data)
        driver.save_screenshot(os.path.join(out_dir, "page_first_event.png"))
        check_logs(driver, page)
    finally:
        driver.quit()
    print("ok: %d nodes, %d events, screenshots in %s" % (len(data["nodes"]), len(data["events"]), out_dir))


if __name__ == "__main__":
    main()
