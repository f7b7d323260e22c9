"""Benchmark: screenshots of N distinct small web pages (default 40) in headless Chromium, a fresh browser per page
(judge.render.reuse_browser=false) against one long-lived browser per worker over the DevTools pipe (true), each
into an empty cache folder, with the default judge.render settings (1024×768, 2 workers).

    python benchmarks/render_pages.py [--pages 40] [--workers 2] [--out results.json]

Prints seconds per page for each path (wall time of the batch / pages, browser start-up included) and their
ratio, as JSON, and writes them to --out when given.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from tsrl.rendering import PageRenderer, RenderConfig


def small_page(i: int) -> str:
    """A self-contained landing page, distinct per i (so none is served from the cache)."""
    hue = (37 * i) % 360
    return (
        f"<!doctype html><html><head><title>Shop {i}</title><style>body{{margin:0;font-family:sans-serif;"
        f"background:hsl({hue},60%,92%)}}header{{background:hsl({hue},60%,35%);color:#fff;padding:24px}}"
        ".card{display:inline-block;width:200px;margin:12px;padding:12px;background:#fff;border-radius:8px}</style>"
        f"</head><body><header><h1>Shop number {i}</h1><p>Everything you need, since {1900 + i}.</p></header>"
        + "".join(f'<div class="card"><h2>Item {k}</h2><p>Only {k + i} coins.</p></div>' for k in range(6))
        + "</body></html>"
    )


def seconds_per_page(pages: list[str], workers: int, reuse: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="render-bench-") as cache:
        renderer = PageRenderer(RenderConfig(workers=workers, cache_dir=cache, reuse_browser=reuse))
        t0 = time.perf_counter()
        renderings = renderer.render_many(pages)
        elapsed = time.perf_counter() - t0
        renderer.close()
    failed = [r.error for r in renderings if r.error]
    assert not failed, f"{len(failed)} pages failed to render, e.g. {failed[0]}"
    return elapsed / len(pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="also write the results to this JSON file")
    args = parser.parse_args()
    pages = [small_page(i) for i in range(args.pages)]
    per_page = seconds_per_page(pages, args.workers, reuse=False)
    long_lived = seconds_per_page(pages, args.workers, reuse=True)
    result = {
        "pages": args.pages,
        "workers": args.workers,
        "fresh_browser_per_page_s": per_page,
        "long_lived_browser_s": long_lived,
        "speedup": per_page / long_lived,
    }
    print(json.dumps(result, indent=1))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print(
        f"{args.pages} pages, {args.workers} at a time: a fresh Chromium per page {per_page:.2f} s/page, "
        f"a long-lived Chromium per worker {long_lived:.2f} s/page: {per_page / long_lived:.1f}x faster"
    )


if __name__ == "__main__":
    main()
