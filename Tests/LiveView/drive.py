#!/usr/bin/env python3
"""Drives headless Chromium through the live view of `yolo serve`, for LiveViewTests.

usage: drive.py URL Y4M SCREENSHOT

Chromium's fake camera plays Y4M; the DevTools protocol runs over --remote-debugging-pipe (JSON
messages ended by NUL on file descriptors 3 and 4), so only the standard library is needed.
Steps: load the page; wait for 10 results with boxes; read the FPS and latency fields; move the
confidence slider to 0.9 and count the boxes drawn; back at 0.26, switch to the SEGMENT tab and
count the masks drawn; save a PNG screenshot of the preview. Prints one JSON object of what it saw; exits 1 when
a step times out (the object then says which).
"""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

url, y4m, screenshot = sys.argv[1:4]
report = {"console_errors": []}


def plug(commands, answers):
    """In the child: the pipe ends on file descriptors 3 and 4, moved above them first so that
    neither is overwritten by the other's dup2."""
    commands, answers = fcntl.fcntl(commands, fcntl.F_DUPFD, 10), fcntl.fcntl(answers, fcntl.F_DUPFD, 10)
    os.dup2(commands, 3)
    os.dup2(answers, 4)


class Browser:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="yolo-chromium-")
        to_browser, self.writer = os.pipe()
        self.reader, from_browser = os.pipe()
        # The child reads commands on fd 3 and writes answers on fd 4.
        os.set_inheritable(to_browser, True)
        os.set_inheritable(from_browser, True)
        chromium = next((p for p in ("/usr/lib/chromium/chromium", shutil.which("chromium")) if p and os.path.exists(p)), "chromium")
        self.process = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
             f"--use-file-for-fake-video-capture={y4m}", f"--user-data-dir={self.profile}",
             "--window-size=1280,1100", "--no-first-run", "--no-default-browser-check", "about:blank"],
            pass_fds=(3, 4), preexec_fn=lambda: plug(to_browser, from_browser),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self.buffer = b""
        self.next_id = 0
        self.session = None

    def send(self, method, params=None, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.writer, json.dumps(message).encode() + b"\0")
        while True:
            answer = self.receive()
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def receive(self):
        while b"\0" not in self.buffer:
            chunk = os.read(self.reader, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message = json.loads(raw)
        method = message.get("method")
        if method == "Runtime.consoleAPICalled" and message["params"]["type"] == "error":
            report["console_errors"].append(" ".join(str(a.get("value", a.get("description", ""))) for a in message["params"]["args"]))
        elif method == "Runtime.exceptionThrown":
            details = message["params"]["exceptionDetails"]
            report["console_errors"].append(details.get("exception", {}).get("description", details.get("text", "")))
        elif method == "Log.entryAdded" and message["params"]["entry"]["level"] == "error":
            report["console_errors"].append(message["params"]["entry"]["text"])
        return message

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, step, expression, timeout=60):
        """Polls `expression` until it is true; records the step as failed on timeout."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.evaluate(expression):
                return
            time.sleep(0.2)
        report["failed_step"] = step
        raise TimeoutError(step)

    def close(self):
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


browser = Browser()
status = 0
try:
    targets = browser.send("Target.getTargets", session=False)["targetInfos"]
    page = next(t for t in targets if t["type"] == "page")
    browser.session = browser.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}, session=False)["sessionId"]
    for domain in ("Runtime", "Log", "Page"):
        browser.send(f"{domain}.enable")
    browser.send("Page.navigate", {"url": url})
    browser.wait("page loaded", "document.readyState === 'complete' && !!window.yoloLive")
    browser.wait("10 frames with boxes", "window.yoloLive.stats.framesWithBoxes >= 10")
    report["fps"] = browser.evaluate("document.getElementById('fps').textContent")
    report["latency"] = browser.evaluate("document.getElementById('latency').textContent")
    report["boxes_at_default"] = browser.evaluate("window.yoloLive.stats.boxesDrawn")
    browser.evaluate("(() => { const s = document.getElementById('slider'); s.value = 0.9;"
                     " s.dispatchEvent(new Event('input')); })()")
    report["toast"] = browser.evaluate("document.getElementById('toast').textContent")
    # Results of frames sent after the change.
    browser.evaluate("window.yoloLive.mark = window.yoloLive.stats.results")
    browser.wait("results after the slider", "window.yoloLive.stats.results >= window.yoloLive.mark + 3")
    report["boxes_at_0.9"] = browser.evaluate("window.yoloLive.stats.boxesDrawn")
    browser.evaluate("(() => { const s = document.getElementById('slider'); s.value = 0.26;"
                     " s.dispatchEvent(new Event('input')); })()")
    browser.evaluate("[...document.querySelectorAll('#tabs button')].find(b => b.dataset.task === 'segment').click()")
    browser.wait("masks drawn", "window.yoloLive.state.model.task === 'segment' && window.yoloLive.stats.masksDrawn > 0"
                 " && window.yoloLive.stats.boxesDrawn > 0")
    report["masks_drawn"] = browser.evaluate("window.yoloLive.stats.masksDrawn")
    report["model"] = browser.evaluate("window.yoloLive.state.model.name")
    rect = browser.evaluate("(() => { const r = document.getElementById('preview').getBoundingClientRect();"
                            " return {x: r.x, y: r.y, width: r.width, height: r.height}; })()")
    shot = browser.send("Page.captureScreenshot", {"format": "png", "clip": dict(rect, scale=1)})
    with open(screenshot, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
except Exception as error:  # the report says what failed
    report["error"] = f"{type(error).__name__}: {error}"
    status = 1
finally:
    browser.close()
print(json.dumps(report))
sys.exit(status)
