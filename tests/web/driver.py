"""Drives headless Chromium (Debian's, at /usr/bin/chromium) with Playwright
for the browser tests of `cordis web` (tests/web/main.rs).

One JSON command per line on stdin, one JSON answer per line on stdout:
{"ok": VALUE} or {"error": MESSAGE}. The Rust side decides what to look at
and asserts on what the page reports: texts as rendered, accessible names,
boxes, computed colours.

    python driver.py SCREENSHOT_DIR
"""

import json
import os
import sys
import tempfile
import time

from playwright.sync_api import sync_playwright

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Every visible text node whose contrast with the first opaque background
# behind it is below WCAG AA: 4.5:1, or 3:1 for large text.
CONTRAST = """() => {
  const parse = c => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(',').map(parseFloat); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const behind = el => { for (; el; el = el.parentElement) { const c = parse(getComputedStyle(el).backgroundColor);
    if (c && c.a > 0.99) return c; } return {r: 255, g: 255, b: 255, a: 1}; };
  const bad = []; let checked = 0;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode; const el = node.parentElement;
    if (!node.textContent.trim() || !el || el.closest('.sr-only,[hidden]')) continue;
    const box = el.getBoundingClientRect(); if (!box.width || !box.height) continue;
    const cs = getComputedStyle(el); if (cs.visibility === 'hidden') continue;
    const fg = parse(cs.color), bg = behind(el); const a = lum(fg), b = lum(bg);
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const size = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight) >= 700;
    const need = (size >= 24 || (bold && size >= 18.66)) ? 3 : 4.5; checked++;
    if (ratio < need) bad.push({text: node.textContent.trim().slice(0, 40), ratio: ratio.toFixed(2), color: cs.color, background: `rgb(${bg.r}, ${bg.g}, ${bg.b})`});
  }
  return {checked, bad};
}"""


def main():
    shots = sys.argv[1]
    os.makedirs(shots, exist_ok=True)
    with sync_playwright() as p:
        context = None
        page = None
        for line in sys.stdin:
            if not line.strip():
                continue
            command = json.loads(line)
            try:
                cmd = command["cmd"]
                if cmd == "open":
                    if context is not None:
                        context.close()
                    # A fresh profile each time: no cookie carries over.
                    context = p.chromium.launch_persistent_context(
                        tempfile.mkdtemp(prefix="cordis-web-chromium-"),
                        executable_path="/usr/bin/chromium",
                        headless=True,
                        args=FLAGS,
                        viewport={"width": command.get("width", 1024), "height": command.get("height", 800)},
                        locale=command.get("locale", "en-US"),
                        extra_http_headers=command.get("headers") or {},
                    )
                    page = context.pages[0] if context.pages else context.new_page()
                    page.set_default_timeout(command.get("timeout", 15000))
                    answer = page.goto(command["url"])
                    page.wait_for_load_state("load")
                    result = answer.status if answer else None
                elif cmd == "tab_new":
                    # Another tab of the same browser, which becomes the
                    # one the commands act on; its index is the answer.
                    page = context.new_page()
                    page.set_default_timeout(command.get("timeout", 15000))
                    answer = page.goto(command["url"], wait_until=command.get("wait", "load"))
                    result = context.pages.index(page)
                elif cmd == "tab":
                    page = context.pages[command["index"]]
                    page.bring_to_front()
                    result = page.url
                elif cmd == "tabs":
                    result = len(context.pages)
                elif cmd == "goto":
                    answer = page.goto(command["url"])
                    result = answer.status if answer else None
                elif cmd == "eval":
                    result = page.evaluate(command["js"], command.get("arg"))
                elif cmd == "texts":
                    result = page.locator(command["selector"]).all_inner_texts()
                elif cmd == "wait_text":
                    start = time.monotonic()
                    page.wait_for_function(
                        "([s, t]) => [...document.querySelectorAll(s)].some(e => e.innerText.includes(t))",
                        arg=[command["selector"], command["text"]],
                        polling="raf",
                        timeout=command.get("timeout", 15000),
                    )
                    result = (time.monotonic() - start) * 1000.0
                elif cmd == "click":
                    page.locator(command["selector"]).first.click()
                    result = None
                elif cmd == "press":
                    page.keyboard.press(command["key"])
                    result = None
                elif cmd == "snapshot":
                    result = page.locator(command["selector"]).first.aria_snapshot()
                elif cmd == "count_role":
                    result = page.get_by_role(command["role"], name=command["name"]).count()
                elif cmd == "screenshot":
                    path = os.path.join(shots, command["name"] + ".png")
                    page.screenshot(path=path, full_page=True)
                    result = path
                elif cmd == "contrast":
                    result = page.evaluate(CONTRAST)
                elif cmd == "quit":
                    break
                else:
                    raise ValueError("unknown command " + cmd)
                out = {"ok": result}
            except Exception as e:  # every failure goes back to the test
                out = {"error": f"{type(e).__name__}: {e}"}
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
        if context is not None:
            context.close()


if __name__ == "__main__":
    main()
