"""The judge around a judge that shows web pages as screenshots (task=web; the pages are rendered by a Renderer,
tsrl/rendering/, which also says why).

Every page of a batch is extracted from its completion (`page_of`) and rendered once; the inner judge is asked
with the extracted pages and their screenshots. A page that failed to render is never shown:
- a pair with such a page loses its match (p_first = 0 or 1; both failed → a tie ½) without a judge call;
- a graded page gets the lowest grade, 0, without a call;
- in a list of n responses, each such page gets 0 and the m others are asked as a shorter list R1 … Rm, in their
  order (m = 0: no call). The scores are put back in the slots of the n: values[i] scores responses[i]. When the
  judge gives the shorter list no answer, the whole list has none (the failure policy then decides).
The reason stays in the answer's raw text and is counted (render/failures/<kind>), so a broken renderer shows in
the logs instead of looking like a bad policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from tsrl.judging.base import Judge, error_kind, merge_metrics
from tsrl.rendering import Renderer, Rendering
from tsrl.types import Count, ListRequest, ListScores, PairRequest, Score, ScoreRequest, Verdict


class RenderingJudge:
    """Renders both pages of every pair (the one page of a grade, the n pages of a list) and asks the inner judge
    with the screenshots; a page that failed to render loses its match, or gets grade 0, without being shown."""

    def __init__(self, inner: Judge, page_of: Callable[[str], str], renderer: Renderer) -> None:
        self.inner, self.page_of, self.renderer = inner, page_of, renderer
        self.renderings: list[Rendering] = []
        # the cache keys of the judge that answers (its model and templates); the screenshots' digests join each key
        for name in ("identity", "score_identity", "list_identity"):
            setattr(self, name, f"{getattr(inner, name, type(inner).__name__)}|rendered")

    def _shots(self, pages: Sequence[str]) -> dict[str, Rendering]:
        """Each distinct page rendered once, recorded for the render/* metrics."""
        distinct = list(dict.fromkeys(pages))
        shot = dict(zip(distinct, self.renderer.render_many(distinct) if distinct else []))
        self.renderings += shot.values()
        return shot

    def compare(self, requests: Sequence[PairRequest]) -> list[Verdict]:
        pages = [(self.page_of(r.first), self.page_of(r.second)) for r in requests]
        shot = self._shots([page for pair in pages for page in pair])
        forfeits = [forfeit(shot[first], shot[second]) for first, second in pages]
        asked = [
            replace(r, first=a, second=b, first_image=shot[a].path, second_image=shot[b].path)
            for r, (a, b), lost in zip(requests, pages, forfeits)
            if lost is None
        ]
        answers = iter(self.inner.compare(asked) if asked else [])
        return [lost or next(answers) for lost in forfeits]

    def score(self, requests: Sequence[ScoreRequest]) -> list[Score]:
        pages = [self.page_of(r.response) for r in requests]
        shot = self._shots(pages)
        failed = [score_forfeit(shot[page]) for page in pages]
        asked = [
            replace(r, response=page, image=shot[page].path)
            for r, page, lost in zip(requests, pages, failed)
            if lost is None
        ]
        answers = iter(self.inner.score(asked) if asked else [])
        return [lost or next(answers) for lost in failed]

    def score_lists(self, requests: Sequence[ListRequest]) -> list[ListScores]:
        """Each list asked without its pages that failed to render (those get 0); a list left empty is not asked."""
        pages = [[self.page_of(text) for text in r.responses] for r in requests]  # [L][n]
        shot = self._shots([page for listed in pages for page in listed])
        asked = []
        for request, listed in zip(requests, pages):
            shown = [page for page in listed if not shot[page].error]
            if shown:
                asked.append(replace(request, responses=tuple(shown), images=tuple(shot[p].path for p in shown)))
        answers = iter(self.inner.score_lists(asked) if asked else [])
        return [list_with_forfeits([shot[page] for page in listed], answers) for listed in pages]

    def drain_metrics(self) -> dict[str, float]:
        renderings, self.renderings = self.renderings, []
        failures = [error_kind(r.error) for r in renderings if r.error]
        metrics: dict[str, float] = {
            "render/pages": Count(len(renderings)),
            "render/failures": Count(len(failures)),
            "render/cache_hits": Count(sum(r.cached for r in renderings)),
        }
        for kind in sorted(set(failures)):
            metrics[f"render/failures/{kind}"] = Count(failures.count(kind))
        if rendered := [r.seconds for r in renderings if not r.cached]:
            metrics["render/seconds_mean"] = sum(rendered) / len(rendered)
        return merge_metrics(metrics, self.inner.drain_metrics())

    def close(self) -> None:
        """Stops the render pool; close_judge goes on to `inner` by itself."""
        self.renderer.close()


def score_forfeit(page: Rendering) -> Score | None:
    """The grade of a page that did not render (0, the lowest, as a lost match), None when it rendered."""
    return Score(0.0, raw=f"render failed: {page.error}") if page.error else None


def forfeit(first: Rendering, second: Rendering) -> Verdict | None:
    """The verdict when a page did not render (it loses; both failed → a tie), None when both rendered."""
    if first.error and second.error:
        return Verdict(0.5, raw=f"render failed: both: first: {first.error}; second: {second.error}")
    if first.error or second.error:
        side, error = ("first", first.error) if first.error else ("second", second.error)
        return Verdict(0.0 if first.error else 1.0, raw=f"render failed: {side}: {error}")
    return None


def list_with_forfeits(shots: Sequence[Rendering], answers: Iterator[ListScores]) -> ListScores:
    """The answer to a list of n pages whose renderings are `shots` [n]: 0 in the slot of each page that failed,
    the next of `answers` (the judge's scores of the others, in order) in the rest; no answer taken when every
    page failed."""
    failed = {slot: shot.error for slot, shot in enumerate(shots) if shot.error}
    if not failed:
        return next(answers)
    reasons = "; ".join(f"R{slot + 1}: {error}" for slot, error in failed.items())
    if len(failed) == len(shots):
        return ListScores([0.0] * len(shots), raw=f"render failed: {reasons}")
    answer = next(answers)
    raw = f"[render failed, graded 0 and not shown: {reasons}] {answer.raw}"
    if answer.values is None:
        return replace(answer, raw=raw)
    shown = iter(answer.values)
    return replace(answer, values=[0.0 if slot in failed else next(shown) for slot in range(len(shots))], raw=raw)
