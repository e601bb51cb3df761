"""Helpers for the review UI tests: the app served for real, and Chromium.

``ServedApp`` runs an app (a ``worlds.WebWorld``'s) with uvicorn in a thread on
127.0.0.1, so a real browser can talk to it.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

CHROMIUM = os.environ.get("UNDOGATE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "web"
DOC_SHOTS = ROOT / "docs" / "screenshots"


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)) and not shutil.which(
        CHROMIUM
    ):
        return f"Chromium is not installed at {CHROMIUM} (run scripts/system-deps.sh as root)"
    return None


class ServedApp:
    """An ASGI app served by uvicorn in a thread on 127.0.0.1 (a real HTTP origin)."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", ws="none"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def start(self) -> ServedApp:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise AssertionError("the web app did not start")
            time.sleep(0.01)  # poll interval of a bounded wait, not a fixed sleep
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()


@contextmanager
def served(app: Any) -> Iterator[ServedApp]:
    running = ServedApp(app).start()
    try:
        yield running
    finally:
        running.stop()


def save_shot(page: Any, name: str, *, docs: bool = False) -> None:
    """A full-page screenshot under test-artifacts/web/; with ``docs`` (and
    ``UNDOGATE_UPDATE_SCREENSHOTS=1``) also the README's copy in docs/screenshots/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    if docs and os.environ.get("UNDOGATE_UPDATE_SCREENSHOTS") == "1":
        DOC_SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOC_SHOTS / f"{name}.png"), full_page=True)


# -- what a person sees: every page measured, checked for accessibility, typed through ---

# Everything on a page that hides or cuts exact text, or runs off the screen:
#  - the document scrolls sideways (scrollWidth past clientWidth);
#  - an element whose right edge is past the viewport, or past the page's margin, outside
#    a scrolling box;
#  - a cell of a table stacked on a phone that does not say which column it is, or that
#    shows its column's label with nothing after it;
#  - a box whose content is wider than the box and which does not scroll (spilled or cut);
#  - a box that scrolls sideways without being an exact-text box (.scroll-x: a diff, a
#    body), or one that is but does not show that it scrolls (the shadow at the edge that
#    hides more; headless Chromium draws no scrollbar) or cannot be scrolled by keyboard;
#  - a piece of a URL or a date that the line breaks inside (a URL breaks only at the
#    <wbr> after its punctuation; a date and a time each stay whole).
LAYOUT_PROBE = """
() => {
  const width = document.documentElement.clientWidth;
  const named = (el) => `${el.tagName.toLowerCase()}.${[...el.classList].join('.')}: `
    + el.textContent.replace(/\\s+/g, ' ').trim().slice(0, 50);
  const scrolls = (el) => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const inScroller = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      if (scrolls(p)) return true;
    }
    return false;
  };
  const lines = (node) => {
    const range = document.createRange();
    range.selectNodeContents(node);
    return new Set([...range.getClientRects()].filter((r) => r.width > 0)
      .map((r) => Math.round(r.top))).size;
  };
  // Visually hidden on purpose (a screen reader's text, a stacked table's column heads).
  const unseen = (el) => {
    for (let p = el; p && p !== document.body; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (s.clip !== 'auto' && s.clip !== '') return true;
      if (s.position === 'absolute' && p.offsetWidth <= 1 && s.overflow === 'hidden') return true;
    }
    return false;
  };
  const out = {page: document.documentElement.scrollWidth - width, offscreen: [], spilled: [],
               scrollers: [], unmarked_scroll: [], unlabelled: [], empty_label: [], broken: []};
  const main = document.querySelector('main');
  const edge = main ? main.getBoundingClientRect().right
    - parseFloat(getComputedStyle(main).paddingRight) : width;
  for (const el of document.body.querySelectorAll('*')) {
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.visibility === 'hidden' || unseen(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > width + 1 && !inScroller(el)) out.offscreen.push(named(el));
    else if (r.width > 0 && el !== main && main && main.contains(el) && r.right > edge + 1
             && !inScroller(el)) {
      out.offscreen.push('past the margin: ' + named(el));
    }
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) {
      if (!scrolls(el)) out.spilled.push(named(el));
      else if (!el.classList.contains('scroll-x')) out.scrollers.push(named(el));
      else if (el.tabIndex < 0 || !style.backgroundImage.includes('radial-gradient')) {
        out.unmarked_scroll.push(named(el));
      }
    }
  }
  // A table stacked on a phone hides its column heads: each cell then says its own.
  for (const head of document.querySelectorAll('table > thead')) {
    if (!unseen(head) || head.closest('table').offsetParent === null) continue;
    for (const td of head.closest('table').querySelectorAll(':scope > tbody > tr > td')) {
      if (!td.dataset.label && td.innerText.trim() && !td.querySelector('button')) {
        out.unlabelled.push(named(td));
      }
      if (td.dataset.label && !td.innerText.trim() && getComputedStyle(td).display !== 'none') {
        out.empty_label.push(td.dataset.label + ' in ' + named(td.closest('tr')));
      }
    }
  }
  for (const el of document.querySelectorAll('.url, time .whole')) {
    if (el.closest('details:not([open])') || el.offsetParent === null) continue;
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.textContent.trim() && lines(n) > 1) out.broken.push(named(el) + ' | ' + n.textContent);
    }
  }
  return out;
}
"""


def layout_problems(page: Any) -> dict[str, Any]:
    """What ``LAYOUT_PROBE`` finds wrong on the page as it is laid out now."""
    found: dict[str, Any] = page.evaluate(LAYOUT_PROBE)
    return {k: v for k, v in found.items() if v and (k != "page" or v > 0)}


#: axe-core rules run: WCAG 2.0 and 2.1, levels A and AA.
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def accessibility_problems(page: Any) -> list[str]:
    """The page's serious and critical WCAG 2.1 AA violations, as axe-core reports them
    (its script is evaluated in the page over DevTools, past the page's CSP)."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG_AA}})
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def tab_to(page: Any, name: str, *, limit: int = 60) -> None:
    """Press Tab until the focused element's text or label is ``name`` (a keyboard user
    reaching a control), or fail."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "() => { const el = document.activeElement; return el ? "
            "(el.getAttribute('aria-label') || el.innerText || el.value || '').trim() : ''; }"
        )
        if focused == name:
            return
    raise AssertionError(f"no focusable control named {name!r} within {limit} tabs")
