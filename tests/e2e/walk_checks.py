"""What the page walk (test_page_walk.py) looks for on a screen, measured in the page itself.

Each check reads the page as the room sees it (what is visible, at its size) and returns the
defects it finds, in words that say where: an empty list is a clean screen. The checks are
shown failing on small pages made to fail them in test_walk_checks.py.

- a traceback, or Streamlit's exception box;
- an internal word in normal type: an engine event name, a raw error code, "batch None", a
  developer's environment variable, Streamlit's "Deploy"; on the projector also a run id or
  a topic name, in any type. The room's words may be followed by the raw name for the
  engineers who ask: in small type (`<small>`, a chart's small span) or in parentheses
  right after the words, "outputs and input offsets out of step (commit_gap)";
- a "None" cell in a table (st.table's HTML, st.dataframe's grid);
- a card title or metric label broken inside a word, or cut off;
- the page's key number outside the first screen;
- on the projector, a label, a chart's text or a table's cell under 24 px, or a grid table.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from engine.model.words import EVENT_WORDS, PROXY_WORDS

# Engine names that are not English: every event and proxy event name with an underscore
# (send, ack, done... are words), and the ones the issue saw on screens.
EVENT_NAMES = sorted(
    {name for name in (*EVENT_WORDS, *PROXY_WORDS) if "_" in name}
    | {"commit_gap", "txn_flushed", "output_acked", "failpoint_reached"}
)
ROOM_PATTERNS: dict[str, str] = {
    "an engine event name": r"\b(?:" + "|".join(map(re.escape, EVENT_NAMES)) + r")\b",
    "a raw error code": r"(?<![A-Za-z0-9])_[A-Z]{3,}(?:_[A-Z]+)*\b",
    "a Kafka error code or environment variable": r"\b[A-Z]{2,}(?:_[A-Z0-9]+){1,}\b",
    '"batch None"': r"\bbatch None\b",
    "a value printed as None": r"[:=]\s*None\b",
    # "[]", "[1, 3]", "replicas [1]"; a citation's "[1]" (the Sources line) is no list.
    "a Python list": r"\[\]|\[\d+(?:, \d+)+\]|\b(?:replicas|leader|isr:?) \[\d+\]",
}
PROJECTOR_PATTERNS: dict[str, str] = {
    "a run id": r"\b20\d{6}-\d{6}-[a-z0-9-]+",
    "a topic name": r"\blab\.[A-Za-z0-9._-]+",
}
# Streamlit's own chrome that a room has no use for.
CHROME_WORDS = ("Deploy",)

FINDINGS_JS = r"""
({roomPatterns, projectorPatterns, projector, chrome}) => {
  const found = [];
  const rootSize = parseFloat(getComputedStyle(document.documentElement).fontSize);
  const visible = el => el && el.checkVisibility &&
    el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true}) &&
    el.getClientRects().length > 0;
  // Small type: a <small>, or text under 80% of the page's root size (a chart's raw names).
  const small = el => !!el.closest("small") ||
    parseFloat(getComputedStyle(el).fontSize) < 0.8 * rootSize;
  const where = el => {
    const block = el.closest("[data-testid], .lab-card, svg, table, li, p");
    return block ? (block.getAttribute("data-testid") || block.className?.baseVal ||
                    block.className || block.tagName).toString().slice(0, 40) : el.tagName;
  };
  // Text in "(...)" right after words: the raw name for the engineers, allowed.
  const unparenthesised = (text, index, length) => {
    const open = text.lastIndexOf("(", index);
    const close = text.indexOf(")", index + length);
    return !(open >= 0 && close >= 0 && text.slice(open, index).indexOf(")") < 0 &&
             /\S/.test(text.slice(0, open)));
  };
  const compiled = Object.entries(roomPatterns).map(([k, p]) => [k, new RegExp(p, "g"), false]);
  if (projector) {
    for (const [k, p] of Object.entries(projectorPatterns)) {
      compiled.push([k, new RegExp(p, "g"), true]);
    }
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || !node.data.trim()) continue;
    if (el.closest("script, style, canvas, [data-testid='stSidebarNav']")) continue;
    // A code block shows code or a quoted log as it is: only the projector's names count there.
    const quoted = !!el.closest("pre");
    if (!visible(el)) continue;
    // The whole line the node stands in: a block's text, for the parentheses rule.
    const blocks = "p, li, td, th, div, span, text, a, button, label, h1, h2, h3, h4, summary";
    const line = (el.closest(blocks) || el).textContent;
    const isSmall = small(el);
    for (const [kind, pattern, anyType] of compiled) {
      if ((isSmall || quoted) && !anyType) continue;
      pattern.lastIndex = 0;
      for (let m = pattern.exec(node.data); m; m = pattern.exec(node.data)) {
        const at = line.indexOf(node.data) + m.index;
        if (!anyType && at >= 0 && !unparenthesised(line, at, m[0].length)) continue;
        const key = kind + m[0] + where(el);
        if (seen.has(key)) continue;
        seen.add(key);
        found.push(`${kind} "${m[0]}" in ${where(el)}: "${line.trim().slice(0, 120)}"`);
      }
    }
  }
  // Tracebacks and exception boxes.
  for (const box of document.querySelectorAll("[data-testid='stException']")) {
    found.push(`an exception box: "${box.innerText.trim().slice(0, 160)}"`);
  }
  if (document.body.innerText.includes("Traceback (most recent call last)")) {
    found.push("a traceback in the page's text");
  }
  for (const box of document.querySelectorAll("[data-testid='stAlertContentError']")) {
    if (visible(box)) found.push(`an error box: "${box.innerText.trim().slice(0, 160)}"`);
  }
  // "None" cells: st.table's HTML cells, and st.dataframe's grid (its accessible table
  // inside the canvas holds the drawn rows' text).
  for (const cell of document.querySelectorAll("td, th, [role='gridcell']")) {
    const text = cell.textContent.trim();
    if (/^(None|nan|NaN|null)$/.test(text) && (visible(cell) || cell.closest("canvas"))) {
      const table = cell.closest("[data-testid]");
      found.push(`a "${text}" cell in ${table ? table.getAttribute("data-testid") : "a table"}`);
    }
  }
  // Streamlit's chrome.
  for (const button of document.querySelectorAll("button, a")) {
    if (chrome.includes(button.innerText.trim()) && visible(button)) {
      found.push(`Streamlit's "${button.innerText.trim()}" button`);
    }
  }
  return found;
}
"""

# Card titles and labels: a metric's label, a verdict card's level and labels, a column's
# title.
TITLES = (
    "[data-testid='stMetricLabel'] p, .lab-level, .lab-label, "
    "[data-testid='stColumn'] h3, [data-testid='stColumn'] h2"
)
BROKEN_WORDS_JS = r"""
(selector) => {
  const found = [];
  for (const el of document.querySelectorAll(selector)) {
    if (!el.checkVisibility() || el.getClientRects().length === 0) continue;
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") {
      found.push(`"${el.innerText.trim()}" is cut off (${el.scrollWidth} px in ${el.clientWidth})`);
    }
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        // One box per line the word occupies: more than one line top is a word broken.
        const tops = new Set([...range.getClientRects()]
          .filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) {
          found.push(`"${m[0]}" broken over ${tops.size} lines in "${el.innerText.trim()}"`);
        }
      }
    }
  }
  return found;
}
"""

# What the projector must show in its type (issue 62, "readable from the back row"): a
# number's label, a card's title, a table's cells, a vote's bar and every text of a chart.
ROOM_TYPE = (
    "[data-testid='stMetricLabel'] p, .lab-level, .lab-label, [data-testid='stTable'] td, "
    "[data-testid='stTable'] th, [data-testid='stProgress'] p, .js-plotly-plot svg text"
)
ROOM_PX = 24  # pages._presenter.ROOM_PX, in CSS px
SMALL_TYPE_JS = r"""
({selector, px}) => {
  const found = [];
  const seen = new Set();
  const shown = el => el.getClientRects().length > 0 &&
    (!el.checkVisibility || el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true}));
  for (const root of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const el = node.parentElement;
      if (!el || !node.data.trim() || !shown(el)) continue;
      // A chart's hover box is drawn only under the pointer.
      if (el.closest(".hoverlayer, .modebar")) continue;
      const size = parseFloat(getComputedStyle(el).fontSize);
      if (size >= px - 0.5) continue;
      const text = node.data.trim().slice(0, 40);
      const key = text + size;
      if (seen.has(key)) continue;
      seen.add(key);
      const block = el.closest("[data-testid], .lab-card, svg");
      const where = block ? (block.getAttribute("data-testid") || block.tagName) : el.tagName;
      found.push(`"${text}" at ${size.toFixed(1)} px in ${where} (the projector's least: ${px})`);
    }
  }
  // st.dataframe draws its cells on a canvas no page style reaches: on the projector every
  // table is st.table (pages._presenter.room_table).
  for (const grid of document.querySelectorAll("[data-testid='stDataFrame']")) {
    if (shown(grid)) found.push("a grid table (st.dataframe), in a type no style reaches");
  }
  return found;
}
"""


def small_type(tab) -> list[str]:
    """On the projector: a label, chart text or table cell under ROOM_PX, or a grid table."""
    return tab.evaluate(SMALL_TYPE_JS, {"selector": ROOM_TYPE, "px": ROOM_PX})


FIRST_SCREEN_JS = r"""
({selector, hasText}) => {
  const all = [...document.querySelectorAll(selector)].filter(
    el => el.checkVisibility() && el.getClientRects().length > 0 &&
          el.innerText.includes(hasText));
  if (all.length === 0) return {found: false};
  const box = all[0].getBoundingClientRect();
  return {found: true, top: box.top, bottom: box.bottom, height: window.innerHeight,
          text: all[0].innerText.trim().slice(0, 80)};
}
"""


@dataclass(frozen=True)
class KeyNumber:
    """Where the page's key number is: the first visible element of a CSS selector that
    holds `has_text`, and what it is, for the message."""

    selector: str
    what: str
    has_text: str = ""


def page_findings(tab, *, projector: bool) -> list[str]:
    """Tracebacks, error boxes, internal words, "None" cells and Streamlit chrome."""
    return tab.evaluate(
        FINDINGS_JS,
        {
            "roomPatterns": ROOM_PATTERNS,
            "projectorPatterns": PROJECTOR_PATTERNS,
            "projector": projector,
            "chrome": list(CHROME_WORDS),
        },
    )


def broken_titles(tab, selector: str = TITLES) -> list[str]:
    """Card titles and labels broken inside a word or cut off."""
    return tab.evaluate(BROKEN_WORDS_JS, selector)


def key_number_off_screen(tab, key: KeyNumber, timeout: float = 10.0) -> str | None:
    """None when the key number lies inside the first screen; else where it is.

    Waits up to `timeout` seconds: the page scrolls its results into view a moment after
    drawing them (pages._run_view.SCROLL_SCRIPT settles over 1.5 s).
    """
    deadline = time.monotonic() + timeout
    while True:
        place = tab.evaluate(FIRST_SCREEN_JS, {"selector": key.selector, "hasText": key.has_text})
        if place["found"] and place["top"] >= 0 and place["bottom"] <= place["height"]:
            return None
        if time.monotonic() > deadline:
            if not place["found"]:
                return f"{key.what} is not on the page ({key.selector})"
            return (
                f"{key.what} ('{place['text']}') spans {place['top']:.0f} to "
                f"{place['bottom']:.0f} px, the screen {place['height']} px"
            )
        time.sleep(0.25)


def wait_until_drawn(tab, timeout_ms: float = 240_000) -> None:
    """Until no element is stale: Streamlit marks what the script run in progress has not
    drawn again yet (`data-stale`), so a screen is read once it is the new one throughout."""
    tab.wait_for_function(
        "() => document.querySelectorAll(\"[data-stale='true']\").length === 0",
        timeout=timeout_ms,
    )


def screen_defects(tab, *, projector: bool, key: KeyNumber | None) -> list[str]:
    """Every check on the screen, once it is drawn."""
    wait_until_drawn(tab)
    defects = page_findings(tab, projector=projector) + broken_titles(tab)
    if projector:
        defects += small_type(tab)
    if key is not None and (where := key_number_off_screen(tab, key)):
        defects.append(where)
    return defects
