#!/usr/bin/python3
"""notebook_screenshot.py TAPEDECK OUT.png: the README's picture of a lesson stopped inside backward.

Starts a real Jupyter notebook server (Debian's jupyter-notebook) on a free localhost port with a
token, the kernelspec installed from TAPEDECK into a temporary prefix, and opens
scripts/notebooks/01_static_vs_dynamic.ipynb in headless Chromium (selenium, chromium-driver).
It restarts the kernel, runs the cells down to `loss:backward()`, which stops at the breakpoint on
tanh's gradient, types `:step` in the notebook's `(tdb)` input box, and writes a screenshot of the
page from the section's title to the end of that cell: the stop's banner, the graph with the
stopped node outlined in red, the step's banner and the prompt waiting. Then `:continue`, and the
server stops. Nothing is written but OUT.png (the notebook is not saved).

    /usr/bin/python3 scripts/notebook_screenshot.py build/tapedeck assets/notebook_stepper.png
"""
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

LESSON = "01_static_vs_dynamic.ipynb"
ANSWERS = [":step"]          # typed at the (tdb) prompt before the picture is taken
WIDTH = 1300


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, what, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.3)
    raise SystemExit(f"notebook_screenshot: timed out waiting for {what}")


def start_server(tapedeck, lessons, home):
    """The notebook server on lessons/, with only the kernelspec installed from `tapedeck`."""
    prefix = os.path.join(home, "prefix")
    subprocess.run([tapedeck, "--install-kernel", "--prefix", prefix], check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, HOME=home, JUPYTER_PATH=os.path.join(prefix, "share/jupyter"),
               JUPYTER_RUNTIME_DIR=os.path.join(home, "runtime"), JUPYTER_CONFIG_DIR=os.path.join(home, "config"))
    port, token = free_port(), os.urandom(12).hex()
    command = ["/usr/bin/python3", "-m", "notebook", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
               f"--NotebookApp.token={token}", f"--notebook-dir={lessons}"]
    if os.getuid() == 0:
        command.append("--allow-root")
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"

    def answers():
        try:
            return urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2).status == 200
        except OSError:
            return False
    wait_until(answers, "the notebook server")
    return server, f"{base}/notebooks/{LESSON}?token={token}"


def screenshot(url, out):
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},1800",
                     "--force-device-scale-factor=1", "--hide-scrollbars"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    js = driver.execute_script
    try:
        driver.get(url)
        wait_until(lambda: js("return !!(window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel"
                              " && Jupyter.notebook.kernel.is_connected());"), "the kernel")
        # A fresh kernel, so that the cells' numbers (cell 1:10) are those of a first run.
        js("Jupyter.notebook.clear_all_output(); window.restarted = false;"
           "Jupyter.notebook.kernel.restart(function () { window.restarted = true; });")
        wait_until(lambda: js("return window.restarted && Jupyter.notebook.kernel.is_connected();"), "the restart")
        time.sleep(2)
        sources = js("return Jupyter.notebook.get_cells().map(c => c.get_text());")
        stop = next(i for i, s in enumerate(sources) if s.startswith("loss:backward()"))
        js(f"Jupyter.notebook.execute_cells({list(range(stop + 1))});")

        def prompt():
            boxes = driver.find_elements(By.CSS_SELECTOR, "input.raw_input")
            return boxes[0] if boxes else None
        for answer in ANSWERS:
            box = wait_until(prompt, "the (tdb) prompt")
            time.sleep(1)
            box.send_keys(answer, Keys.ENTER)
            time.sleep(1.5)
        wait_until(prompt, "the (tdb) prompt")
        time.sleep(1.5)

        cells = driver.find_elements(By.CSS_SELECTOR, "#notebook-container > .cell")
        top, bottom = cells[stop - 2].rect["y"], cells[stop].rect["y"] + cells[stop].rect["height"]
        driver.set_window_size(WIDTH, int(bottom - top + 420))
        time.sleep(0.5)
        cells = driver.find_elements(By.CSS_SELECTOR, "#notebook-container > .cell")
        js("arguments[0].scrollIntoView({block: 'start'});", cells[stop - 2])
        time.sleep(0.8)
        cell_bottom = js("return arguments[0].getBoundingClientRect().bottom;", cells[stop])
        full = out + ".full.png"
        driver.save_screenshot(full)
        picture = Image.open(full)
        picture.crop((0, 0, picture.size[0], min(picture.size[1], int(cell_bottom) + 12))).save(out, optimize=True)
        os.remove(full)
        box = wait_until(prompt, "the (tdb) prompt")
        box.send_keys(":continue", Keys.ENTER)
        time.sleep(1)
    finally:
        driver.quit()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tapedeck, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    lessons = os.path.join(os.path.dirname(os.path.abspath(__file__)), "notebooks")
    with tempfile.TemporaryDirectory(prefix="tapedeck-screenshot-") as home:
        server, url = start_server(tapedeck, lessons, home)
        try:
            screenshot(url, out)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
