"""Debian's headless Chromium under the DevTools protocol, for the page drivers (docs_sign.py,
console.py): started on a fresh profile, a page target opened, stopped and its profile removed
on exit.

    with chromium.page(url, window="1280,1024") as ws_url: ...
"""

import contextlib
import json
import os
import subprocess
import tempfile
import time
import urllib.request


@contextlib.contextmanager
def page(url, window="1280,1024"):
    """The DevTools WebSocket URL of a new page at `url` in a fresh headless Chromium."""
    home = tempfile.TemporaryDirectory(ignore_cleanup_errors=True)
    browser = subprocess.Popen(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--window-size={window}", "--remote-debugging-port=0",
         f"--user-data-dir={home.name}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = os.path.join(home.name, "DevToolsActivePort")
        for _ in range(300):
            if os.path.exists(port_file) and open(port_file).read().count("\n") >= 1:
                break
            time.sleep(0.1)
        port = open(port_file).read().split("\n")[0]
        request = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?{url}", method="PUT")
        yield json.load(urllib.request.urlopen(request))["webSocketDebuggerUrl"]
    finally:
        browser.kill()
        browser.wait()
        home.cleanup()
