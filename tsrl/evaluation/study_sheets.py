"""The annotators' side of `tsrl-human-study` (TSRL §4.12): the blinded ranking sheets it writes — a static
HTML page per annotator (rank drop-downs, choices kept in the browser, a "Download CSV" button that refuses ties)
and the same items as a CSV — and the checks a returned sheet must pass before it is imported (every item of
every prompt ranked once, ranks a permutation of 1..n, one annotator per sheet), each failure naming the file,
the row as a spreadsheet numbers it, and the fix."""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path

import numpy as np

SHEET_COLUMNS = ["annotator", "prompt_id", "item_id", "rank", "prompt", "response"]


class StudyError(Exception):
    """A study input that cannot be used; the message names the thing and the fix."""


PAGE = """<!doctype html><html lang="en"><meta charset="utf-8"><title>Ranking sheet {annotator}</title>
<style>body{{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:auto;padding:1rem}}
section{{border-top:2px solid #444;margin-top:2rem}}section.bad{{background:#fee}}
.item{{border:1px solid #bbb;border-radius:6px;margin:.6rem 0;padding:.4rem .8rem}}
pre{{white-space:pre-wrap;font:inherit}}blockquote{{background:#f4f4f4;padding:.5rem 1rem;margin:0}}</style>
<h1>Ranking sheet — {annotator}</h1>
<p>For each prompt, rank its responses from best (1) to worst ({example}): every response one rank, no ties. The
responses come in a random order and carry codes only. Your choices are kept in this browser as you go. When
every prompt is ranked, press <b>Download CSV</b> and send the file {annotator}.csv back.</p>
{sections}
<p><button id="go">Download CSV</button> <span id="status"></span></p>
<script>
const A={annotator_json},KEY="ranking-sheet/"+A,sel=[...document.querySelectorAll("select")];
const saved=JSON.parse(localStorage.getItem(KEY)||"{{}}");
sel.forEach(s=>{{if(saved[s.dataset.item])s.value=saved[s.dataset.item];s.onchange=()=>{{saved[s.dataset.item]=s.value;
localStorage.setItem(KEY,JSON.stringify(saved))}}}});
const q=v=>'"'+String(v).replace(/"/g,'""')+'"';
document.getElementById("go").onclick=()=>{{const rows=[],bad=[];
document.querySelectorAll("section").forEach(sec=>{{const ss=[...sec.querySelectorAll("select")],v=ss.map(s=>s.value);
const ok=v.every(x=>x)&&new Set(v).size===v.length;sec.classList.toggle("bad",!ok);if(!ok)bad.push(sec.dataset.number);
ss.forEach(s=>rows.push([A,sec.dataset.prompt,s.dataset.item,s.value].map(q).join(",")))}});
const st=document.getElementById("status");
if(bad.length){{st.textContent="Give every response a different rank in prompt(s) "+bad.join(", ");return}}
const a=document.createElement("a");a.href=URL.createObjectURL(new Blob(["annotator,prompt_id,item_id,rank\\n"+
rows.join("\\n")+"\\n"],{{type:"text/csv"}}));a.download=A+".csv";a.click();st.textContent="Saved "+A+".csv"}};
</script></html>
"""


def sheet_orders(study: dict, annotator_index: int) -> list[list[str]]:
    """Each prompt's item ids in this annotator's own random order."""
    rng = np.random.default_rng([study["seed"], annotator_index])
    return [[p["items"][i] for i in rng.permutation(len(p["items"]))] for p in study["prompts"]]


def write_sheets(study: dict, out: Path, annotators: int) -> list[str]:
    """sheets/<annotator>.html and .csv for each annotator; returns the annotator ids."""
    (out / "sheets").mkdir(parents=True, exist_ok=True)
    names = [f"annotator_{i:02d}" for i in range(1, annotators + 1)]
    for index, name in enumerate(names):
        orders, sections, rows = sheet_orders(study, index), [], []
        for prompt, order in zip(study["prompts"], orders):
            options = "".join(f"<option>{r}</option>" for r in range(1, len(order) + 1))
            items = "".join(
                f'<div class="item"><label>Rank <select data-item="{i}"><option value=""></option>{options}'
                f"</select></label> <b>{i}</b><pre>{html.escape(study['items'][i]['text'])}</pre></div>"
                for i in order
            )
            sections.append(
                f'<section data-prompt="{html.escape(prompt["id"])}" data-number="{prompt["number"]}">'
                f"<h2>Prompt {prompt['number']} of {len(orders)}</h2><blockquote><pre>"
                f"{html.escape(prompt['text'])}</pre></blockquote>{items}</section>"
            )
            rows += [[name, prompt["id"], i, "", prompt["text"], study["items"][i]["text"]] for i in order]
        page = PAGE.format(
            annotator=name,
            annotator_json=json.dumps(name),
            sections="\n".join(sections),
            example=len(study["prompts"][0]["items"]),
        )
        (out / "sheets" / f"{name}.html").write_text(page)
        with (out / "sheets" / f"{name}.csv").open("w", newline="") as handle:
            csv.writer(handle).writerows([SHEET_COLUMNS, *rows])
    return names


def read_sheet(path: Path, study: dict) -> tuple[str, dict[str, dict[str, int]]]:
    """(annotator, prompt id → item id → rank) of one filled sheet; StudyError naming the file, row and fix."""
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0] if rows else []
    missing = [c for c in SHEET_COLUMNS[:4] if c not in header]
    if missing:
        raise StudyError(
            f"{path}: the header row has no {', '.join(missing)} column; keep the exported header "
            f"({','.join(SHEET_COLUMNS[:4])}, …)."
        )
    col = {c: header.index(c) for c in SHEET_COLUMNS[:4]}
    items, ranks, seen, annotators = study["items"], {}, {}, set()
    for number, row in enumerate(rows[1:], start=2):  # row numbers as a spreadsheet shows them
        if not any(cell.strip() for cell in row):
            continue
        annotator, prompt_id, item, raw = (row[col[c]].strip() if col[c] < len(row) else "" for c in SHEET_COLUMNS[:4])
        where = f"{path}, row {number}"
        if item not in items or items[item]["prompt_id"] != prompt_id:
            raise StudyError(
                f"{where}: item {item!r} is not an item of prompt {prompt_id!r} in this study; restore "
                "the prompt_id and item_id cells as exported."
            )
        count = len(next(p for p in study["prompts"] if p["id"] == prompt_id)["items"])
        if not raw.isdigit() or not 1 <= int(raw) <= count:
            raise StudyError(
                f"{where}: rank {raw!r} of item {item} is not a whole number from 1 to {count}; give each "
                f"of the prompt's {count} responses its own rank, 1 = best."
            )
        if item in seen:
            raise StudyError(
                f"{where}: item {item} is ranked again (first in row {seen[item]}); keep one row per item."
            )
        seen[item] = number
        annotators.add(annotator)
        ranks.setdefault(prompt_id, {})[item] = int(raw)
    check_complete(path, study, ranks, seen)
    if len(annotators) != 1 or "" in annotators:
        raise StudyError(
            f"{path}: the annotator column holds {sorted(annotators)}; one sheet is one annotator's, "
            "with the id it was exported with in every row."
        )
    return annotators.pop(), ranks


def check_complete(path: Path, study: dict, ranks: dict[str, dict[str, int]], seen: dict[str, int]) -> None:
    """Every prompt's items all ranked, each rank 1..n used once."""
    for prompt in study["prompts"]:
        given = ranks.get(prompt["id"], {})
        absent = [i for i in prompt["items"] if i not in given]
        if absent:
            raise StudyError(
                f"{path}: prompt {prompt['number']} ({prompt['id']}) has no rank for {', '.join(absent)}; "
                "rank every response of every prompt (rows missing or blank)."
            )
        by_rank: dict[int, list[str]] = {}
        for item, rank in given.items():
            by_rank.setdefault(rank, []).append(item)
        twice = {r: items for r, items in by_rank.items() if len(items) > 1}
        if twice:
            rank, items = min(twice.items())
            unused = sorted(set(range(1, len(prompt["items"]) + 1)) - set(by_rank))
            raise StudyError(
                f"{path}, rows {', '.join(str(seen[i]) for i in items)}: prompt {prompt['number']} gives "
                f"rank {rank} to {' and '.join(items)} and rank {unused[0]} to none; ranks are a "
                f"best-to-worst order without ties, each of 1..{len(prompt['items'])} once."
            )
