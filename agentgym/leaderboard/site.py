"""The static leaderboard site: a front page, one page per suite, bar charts, verification records, viewers.

The front page says what the board is and how to submit, shows the top verified rows of each suite and a
suites x methods grid. Suite pages rank verified rows apart from submitted and reported ones; each badge
links to the entry's verification record (who verified it, when, with which verifier, full replay, the
rerun's seeds and test), and each entry row links its episode logs for download.

Pages are plain HTML with two small scripts (``assets/board.js``: sorting and filters;
``assets/viewer.js``: stepping through an episode). They work from ``file://`` as well as over HTTP.
Every piece of entry text goes through :func:`esc`, and data for the viewer is embedded as JSON with
``<``, ``>`` and ``&`` written as ``\\u`` escapes, so nothing a submitter writes can become markup.
"""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym.leaderboard.table import TIERS, Row, fmt_se, fmt_tokens, fmt_value, primary_column, rank, suite_columns
from agentgym.suites import SUITES, Suite

ASSETS = Path(__file__).with_name("assets")
#: Episodes per env embedded in a viewer page, and the longest text kept per field.
VIEWER_MAX_EPISODES = 100
VIEWER_MAX_CHARS = 20_000
#: Bars in a suite's chart.
CHART_TOP = 10
_SOURCE_COLOURS = {
    "rerun-verified": "#1b5e20",
    "replay-verified": "#43a047",
    "submitted": "#1565c0",
    "reported": "#757575",
}
#: Verified rows shown per suite on the front page.
HEADLINE_TOP = 3
_SIZE_LABELS = {"small": "≤ 2B", "medium": "2–8B", "large": "> 8B", "unknown": "unknown / closed"}


def esc(value: Any) -> str:
    """HTML-escape any value (quotes included, so it is safe in attributes too)."""
    return html.escape("" if value is None else str(value), quote=True)


def json_for_script(obj: Any) -> str:
    """JSON that can sit inside ``<script type="application/json">`` whatever strings it holds."""
    text = json.dumps(obj, ensure_ascii=False)
    for ch, rep in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, rep)
    return text


def _page(title: str, body: str, *, scripts: Sequence[str] = (), depth: int = 0) -> str:
    up = "../" * depth
    tags = "".join(f'<script src="{up}assets/{s}"></script>' for s in scripts)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{esc(title)}</title>"
        f"<link rel='stylesheet' href='{up}assets/board.css'></head><body>"
        f"<nav><a href='{up}index.html'>agentgym leaderboard</a></nav><main>{body}</main>{tags}</body></html>\n"
    )


def bar_chart_svg(suite: Suite, rows: Sequence[Row]) -> str:
    """A horizontal bar chart (inline SVG) of the top rows of a suite by its primary column."""
    col = primary_column(suite)
    top = [r for r in rank(rows, suite) if col in r.results and r.verified][:CHART_TOP]
    width, label_w, bar_h, gap, top_pad = 720, 330, 20, 6, 30
    height = top_pad + len(top) * (bar_h + gap) + 10
    vmax = max([100.0] + [r.results[col] for r in top])
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' viewBox='0 0 {width} {height}' "
        f"role='img' aria-label='{esc(suite.name)}: top entries by {esc(col)}' font-family='sans-serif' font-size='12'>",
        f"<text x='0' y='16' font-weight='bold'>{esc(suite.name)}: top {len(top)} verified by {esc(col)}</text>",
    ]
    for i, r in enumerate(top):
        y = top_pad + i * (bar_h + gap)
        v = r.results[col]
        w = max(1.0, (width - label_w - 60) * v / vmax)
        label = f"{r.name} · {r.model}"
        label = label if len(label) <= 48 else label[:47] + "…"
        parts.append(f"<text x='{label_w - 6}' y='{y + 14}' text-anchor='end'>{esc(label)}</text>")
        parts.append(
            f"<rect x='{label_w}' y='{y}' width='{w:.1f}' height='{bar_h}' fill='{_SOURCE_COLOURS[r.source]}'>"
            f"<title>{esc(label)} ({esc(r.source)}): {v:.1f}</title></rect>"
        )
        parts.append(f"<text x='{label_w + w + 4:.1f}' y='{y + 14}'>{v:.1f}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _badge(row_or_source: Row | str, up: str = "") -> str:
    """A tier badge; an entry's badge links to its verification record, and its flags follow it."""
    if isinstance(row_or_source, str):
        return f"<span class='badge badge-{esc(row_or_source)}'>{esc(row_or_source)}</span>"
    r = row_or_source
    title = esc(TIERS.get(r.source, ""))
    if r.record:
        badge = (
            f"<a class='badge badge-{esc(r.source)}' href='{up}{esc(r.record)}' title='{title}'>{esc(r.source)}</a>"
        )
    else:
        badge = f"<span class='badge badge-{esc(r.source)}' title='{title}'>{esc(r.source)}</span>"
    return badge + "".join(f" <span class='flag'>{esc(f)}</span>" for f in r.flags)


def _tier_rank(tier: str) -> int:
    """Sort key of a tier: higher is more trusted (the Tier column sorts best first)."""
    names = list(TIERS)
    return len(names) - names.index(tier) if tier in names else 0


def _rows_html(ranked: Sequence[Row], cols: Sequence[str], *, rerun: bool) -> str:
    body_rows = []
    for i, r in enumerate(ranked, 1):
        size = "" if r.model_size_b is None else f"{r.model_size_b:g}"
        size_val = "" if r.model_size_b is None else f"{r.model_size_b}"
        cells = [
            f"<td data-value='{i}'>{i}</td>",
            f"<td class='name'>{esc(r.name)}</td>",
            f"<td>{esc(r.model)}</td>",
            f"<td data-value='{esc(size_val)}'>{esc(size)}</td>",
            f"<td>{esc(r.method_type)}</td>",
            f"<td data-value='{_tier_rank(r.source)}'>{_badge(r)}</td>",
        ]
        for c in cols:
            v = r.results.get(c)
            cells.append(f"<td data-value='{'' if v is None else v}'>{esc(fmt_value(v, r.std.get(c)))}</td>")
        cells.append(f"<td class='se' data-value='{'' if r.se is None else r.se}'>{esc(fmt_se(r.se))}</td>")
        cells.append(
            f"<td class='tokens' data-value='{'' if r.tokens is None else r.tokens}'>{esc(fmt_tokens(r.tokens))}</td>"
        )
        if rerun:
            shown = ", ".join(f"{k} {v:.1f}" for k, v in r.rerun.items() if k in cols)
            cells.append(f"<td class='rerun'>{esc(shown)}</td>")
        cells.append(f"<td>{esc(r.date)}</td>")
        links = []
        if r.viewer:
            links.append(f"<a class='viewer-link' href='{esc(r.viewer)}'>trajectories</a>")
        for path in r.logs:
            links.append(f"<a class='log-link' href='{esc(path)}' download>{esc(path.rsplit('/', 1)[-1])}</a>")
        if r.link.startswith(("https://", "http://")):
            links.append(
                f"<a href='{esc(r.link)}' rel='nofollow noopener'>{'paper' if r.source == 'reported' else 'code'}</a>"
            )
        elif r.link and r.source != "reported":  # a path in this repository
            links.append(f"<span class='code'>code: <code>{esc(r.link)}</code></span>")
        if r.paper and r.source == "reported":
            links.append(f"<span class='paper'>{esc(r.paper)}</span>")
        cells.append(f"<td>{' '.join(links)}</td>")
        body_rows.append(
            f"<tr data-size='{esc(r.size_bucket)}' data-type='{esc(r.method_type)}' data-source='{esc(r.source)}' "
            f"data-slug='{esc(r.slug)}'>" + "".join(cells) + "</tr>"
        )
    return "".join(body_rows)


def _head(cols: Sequence[str], *, rerun: bool) -> str:
    return (
        "<tr><th data-sort='num'>#</th><th data-sort='text'>Method</th><th data-sort='text'>Model</th>"
        "<th data-sort='num'>Size (B)</th><th data-sort='text'>Type</th><th data-sort='num'>Tier</th>"
        + "".join(f"<th data-sort='num'>{esc(c)}</th>" for c in cols)
        + "<th data-sort='num' title='standard error of the first score column over the episodes'>s.e.</th>"
        + "<th data-sort='num'>Tokens/ep.</th>"
        + ("<th>Rerun (fresh seeds)</th>" if rerun else "")
        + "<th data-sort='text'>Date</th><th>Links</th></tr>"
    )


def render_suite_page(suite: Suite, rows: Sequence[Row], updated: str = "") -> str:
    ranked = rank(rows, suite)
    cols = suite_columns(suite)
    verified = [r for r in ranked if r.verified]
    others = [r for r in ranked if not r.verified]
    types = sorted({r.method_type for r in ranked})
    size_opts = "".join(f"<option value='{k}'>{esc(v)}</option>" for k, v in _SIZE_LABELS.items())
    type_opts = "".join(f"<option value='{esc(t)}'>{esc(t)}</option>" for t in types)
    source_opts = "".join(f"<option value='{s}'>{s}</option>" for s in TIERS)
    tiers = "".join(f"<li>{_badge(k)} {esc(v)}</li>" for k, v in TIERS.items())
    body = (
        f"<h1>{esc(suite.name)}</h1><p>{esc(suite.description)} — suite <code>{esc(suite.ref)}</code>, "
        f"{len(suite)} tasks. Click a column header to sort; click a badge for its verification record.</p>"
        "<form class='filters' onsubmit='return false'>"
        f"<label>Model size <select id='filter-size'><option value=''>all</option>{size_opts}</select></label> "
        f"<label>Method type <select id='filter-type'><option value=''>all</option>{type_opts}</select></label> "
        f"<label>Tier <select id='filter-source'><option value=''>all</option>{source_opts}</select></label> "
        f"<span id='shown'>{len(ranked)} of {len(ranked)} rows</span></form>"
        "<h2 id='verified'>Verified</h2>"
        "<p class='note'>Every episode replayed here and the results recomputed from the logs; "
        "<em>rerun-verified</em> rows were also re-run on fresh seeds.</p>"
        f"<table id='board' class='board'><thead>{_head(cols, rerun=True)}</thead>"
        f"<tbody>{_rows_html(verified, cols, rerun=True)}</tbody></table>"
        + ("" if verified else "<p class='note'>No verified rows yet.</p>")
        + f"<figure class='chart'>{bar_chart_svg(suite, rows)}</figure>"
        "<h2 id='others'>Submitted and reported</h2>"
        "<p class='note'>Not verified here. Reported rows are copied from papers and follow their protocols, "
        "which differ from this suite in places (see the README); they are ranked apart for that reason.</p>"
        f"<table id='board-other' class='board'><thead>{_head(cols, rerun=False)}</thead>"
        f"<tbody>{_rows_html(others, cols, rerun=False)}</tbody></table>"
        f"<h2>Tiers</h2><ul class='tiers'>{tiers}</ul>"
        + (f"<p class='updated'>Last updated {esc(updated)}.</p>" if updated else "")
    )
    return _page(f"{suite.name} · agentgym leaderboard", body, scripts=["board.js"])


def _methods_grid(rows: Sequence[Row]) -> str:
    """Suites x methods: the best verified primary value of each method (agent name) on each suite."""
    suites = [s for s in SUITES.values() if any(r.suite == s.name for r in rows)]
    best: dict[str, dict[str, Row]] = {}
    for s in suites:
        col = primary_column(s)
        for r in rank(rows, s):
            if r.verified and col in r.results:
                best.setdefault(r.name, {}).setdefault(s.name, r)
    head = "<tr><th class='method'>Method</th>" + "".join(
        f"<th><a href='{esc(s.name)}.html'>{esc(s.name)}</a></th>" for s in suites
    )
    body = []
    for name in sorted(best, key=str.lower):
        cells = []
        for s in suites:
            r = best[name].get(s.name)
            if r is None:
                cells.append("<td></td>")
                continue
            v = r.results[primary_column(s)]
            mark = "" if r.source == "rerun-verified" else "<sup title='replay-verified only'>†</sup>"
            cells.append(f"<td data-value='{v}'>{esc(fmt_value(v))}{mark}</td>")
        body.append(f"<tr><td class='method'>{esc(name)}</td>{''.join(cells)}</tr>")
    return (
        f"<table id='grid' class='grid'><thead>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        "<p class='note'>Each suite's primary column (Success, All, Score or F1), best verified row per method; "
        "† = replay-verified only (not re-run on fresh seeds).</p>"
    )


def render_index(rows: Sequence[Row], updated: str = "") -> str:
    headline = []
    for suite in SUITES.values():
        col = primary_column(suite)
        ranked = rank(rows, suite)
        top = [r for r in ranked if r.verified and col in r.results][:HEADLINE_TOP]
        n_other = sum(1 for r in ranked if not r.verified)
        lines = "".join(
            f"<tr><td>{i}</td><td class='name'>{esc(r.name)}</td><td>{esc(fmt_value(r.results[col]))}</td>"
            f"<td>{_badge(r)}</td></tr>"
            for i, r in enumerate(top, 1)
        )
        table = (
            f"<table class='headline-table'><thead><tr><th>#</th><th>Method</th><th>{esc(col)}</th><th>Tier</th>"
            f"</tr></thead><tbody>{lines}</tbody></table>"
            if top
            else "<p class='note'>No verified rows yet.</p>"
        )
        headline.append(
            f"<section class='suite' id='suite-{esc(suite.name)}'><h3><a href='{esc(suite.name)}.html'>"
            f"{esc(suite.name)}</a></h3><p class='note'>{esc(suite.description)}</p>{table}"
            f"<p class='note'>+ {n_other} submitted / reported row{'s' if n_other != 1 else ''} on the suite page</p>"
            "</section>"
        )
    tiers = "".join(f"<li>{_badge(k)} {esc(v)}</li>" for k, v in TIERS.items())
    body = (
        "<h1>agentgym leaderboard</h1>"
        "<p>LLM agents on text environments (ALFWorld, WebShop, Sokoban, FrozenLake, HotpotQA), scored on fixed, "
        "versioned suites. Every submitted run ships its episode logs; the board replays every episode before it "
        "shows a badge, and maintainers re-run the declared agent on fresh seeds for the top tier. Numbers copied "
        "from papers are shown apart, as <em>reported</em>.</p>"
        "<h2>How to submit</h2><ol>"
        "<li>Play a suite: <code>agentgym eval --suite sokoban --agent module:MyAgent --out runs/my-agent</code></li>"
        '<li>Describe it and pre-check it: <code>agentgym submit runs/my-agent --name "My agent" --model ID '
        "--method GRPO --method-type RL</code></li>"
        "<li>Open a pull request with <code>leaderboards/entries/&lt;slug&gt;/</code>; maintainers run "
        "<code>agentgym leaderboard verify DIR --rerun</code> and <code>agentgym leaderboard build</code>.</li></ol>"
        f"<h2>Top verified rows per suite</h2><div class='headline'>{''.join(headline)}</div>"
        f"<h2>Suites × methods</h2>{_methods_grid(rows)}"
        f"<h2>What the tiers mean</h2><ul class='tiers'>{tiers}</ul>"
        + (f"<p class='updated' id='updated'>Last updated {esc(updated)}.</p>" if updated else "")
    )
    return _page("agentgym leaderboard", body)


def render_record(row: Row) -> str:
    """The verification record behind an entry's badge: what the build checked, who reran it, the test."""
    v = row.verification
    facts = [
        ("Tier", _badge(row, "../")),
        (
            "Full replay",
            esc(
                f"{v.get('replayed', 0)} of {v.get('episodes', 0)} episodes, "
                f"{'accepted' if v.get('ok') else 'REJECTED'}"
                if v
                else "not run"
            ),
        ),
        (
            "Verified by",
            esc(
                f"{v.get('verified_by', '?')} on {v.get('verified_at', '?')}"
                + (" (cached verdict for the same bytes)" if v.get("cached") else "")
            ),
        ),
        (
            "Verifier",
            esc(f"agentgym {v.get('agentgym_version', '?')}, verifier version {v.get('verifier_version', '?')}"),
        ),
        ("Content sha256", f"<code>{esc(v.get('content_sha256', ''))}</code>"),
    ]
    if v.get("errors"):
        facts.append(("Problems", "<ul>" + "".join(f"<li>{esc(e)}</li>" for e in v["errors"][:10]) + "</ul>"))
    rr = v.get("rerun")
    if rr:
        comp = rr.get("comparison") or {}
        lines = []
        for env_id, c in comp.items():
            lines.append(
                f"<li>{esc(env_id)} ({esc(c.get('column'))}): submitted {100 * c['submitted_mean']:.1f}, rerun "
                f"{100 * c['rerun_mean']:.1f} over {c['n_rerun']} fresh episodes; difference "
                f"{100 * c['difference']:+.1f} (95% CI {100 * c['ci95'][0]:+.1f} to {100 * c['ci95'][1]:+.1f}), "
                f"p = {c['p_value']:.4f} — {'FLAGGED: not reproduced' if c['flagged'] else 'agrees'}</li>"
            )
        seeds = rr.get("seeds") or {}
        facts += [
            (
                "Rerun",
                esc(
                    f"{rr.get('agent_spec')} by {rr.get('rerun_by')} on {rr.get('rerun_at')}, "
                    f"{rr.get('seconds')} s, agent seed {rr.get('agent_seed')}; "
                    + ("checks out" if rr.get("ok") else "DOES NOT CHECK OUT")
                ),
            ),
            ("Rerun vs submission", "<ul>" + "".join(lines) + "</ul>"),
            (
                "Fresh seeds",
                "".join(
                    f"<details><summary>{esc(env)}: {len(s)} seeds</summary><code>{esc(' '.join(map(str, s)))}</code></details>"
                    for env, s in seeds.items()
                ),
            ),
        ]
        if rr.get("errors"):
            facts.append(
                ("Rerun problems", "<ul>" + "".join(f"<li>{esc(e)}</li>" for e in rr["errors"][:10]) + "</ul>")
            )
    else:
        facts.append(("Rerun", "none yet: the entry is at most replay-verified"))
    logs = " ".join(
        f"<a class='log-link' href='../{esc(p)}' download>{esc(p.rsplit('/', 1)[-1])}</a>" for p in row.logs
    )
    body = (
        f"<h1>Verification record: <span class='name'>{esc(row.name)}</span></h1>"
        f"<p>Suite <a href='../{esc(row.suite)}.html'>{esc(row.suite)}</a> · {esc(row.model)} · {esc(row.method)}</p>"
        "<dl class='record'>" + "".join(f"<dt>{esc(k)}</dt><dd>{val}</dd>" for k, val in facts) + "</dl>"
        f"<p>Episode logs: {logs}</p>"
        "<p class='note'>Replay proves the trajectories and the scores; it cannot prove which agent or model "
        "produced them. Only a rerun on fresh seeds tests the agent (see the README's trust model).</p>"
    )
    return _page(f"{row.name} · verification record", body, depth=1)


def _clip(text: Any) -> str | None:
    if text is None:
        return None
    s = str(text)
    return (
        s
        if len(s) <= VIEWER_MAX_CHARS
        else s[:VIEWER_MAX_CHARS] + f"\n… [{len(s) - VIEWER_MAX_CHARS} more characters]"
    )


def viewer_data(folder: Path, problems: list[str]) -> dict[str, Any]:
    """The episodes of an entry in the compact form the viewer script reads."""
    from agentgym.episodes import Episode
    from agentgym.leaderboard.archive import DEFAULT_LIMITS, SubmissionError, read_gz_capped
    from agentgym.results import describe

    data = json.loads((folder / "submission.json").read_text(encoding="utf-8"))
    episodes, total = [], 0
    for entry in data["episodes"]:
        try:
            raw = read_gz_capped(folder / entry["path"], DEFAULT_LIMITS)
        except (SubmissionError, OSError) as exc:
            problems.append(f"{folder.name}: {entry['path']}: {exc}")
            continue
        lines = [ln for ln in raw.split(b"\n") if ln.strip()]
        total += len(lines)
        for line in lines[:VIEWER_MAX_EPISODES]:
            try:
                ep = Episode.from_dict(json.loads(line))
            except (ValueError, TypeError):
                continue
            episodes.append(
                {
                    "label": f"{ep.env_id.split('/')[-1]} · {describe(ep)} · {'success' if ep.success else 'failure'}",
                    "env_id": ep.env_id,
                    "success": ep.success,
                    "return": ep.total_return,
                    "reset_observation": _clip(ep.reset_observation),
                    "steps": [
                        {
                            "output": _clip(s.output),
                            "action": _clip(s.action),
                            "observation": _clip(s.observation),
                            "reward": s.reward,
                            "valid": bool(s.info.get("is_action_valid", True)),
                            "invalid_reason": _clip(s.info.get("invalid_reason")),
                            "done": bool(s.terminated or s.truncated),
                        }
                        for s in ep.steps
                    ],
                }
            )
    return {"agent": data["agent"], "suite": data["suite"], "total": total, "episodes": episodes}


def render_viewer(row: Row, data: dict[str, Any]) -> str:
    shown = len(data["episodes"])
    body = (
        f"<h1>Trajectories: <span class='name'>{esc(row.name)}</span></h1>"
        f"<p>{esc(row.model)} · {esc(row.method)} ({esc(row.method_type)}) · suite {esc(row.suite)} · "
        f"{_badge(row, '../')} · showing {shown} of {data['total']} episodes "
        f"(<a href='../{esc(row.suite)}.html'>back to the table</a>)</p>"
        "<div class='controls'><label>Episode <select id='episode'></select></label> "
        "<button id='prev' type='button'>◀ Prev</button> <span id='position'></span> "
        "<button id='next' type='button'>Next ▶</button></div>"
        "<section class='step'>"
        "<h2>Observation</h2><pre id='observation'></pre>"
        "<h2>Model output</h2><pre id='output'></pre>"
        "<div class='facts'><span>Action: <code id='action'></code></span> "
        "<span>Reward: <b id='reward'></b></span> <span>Return after it: <b id='return'></b></span> "
        "<span id='status'></span></div></section>"
        f"<script type='application/json' id='episodes-data'>{json_for_script(data)}</script>"
    )
    return _page(f"{row.name} · trajectories", body, scripts=["viewer.js"], depth=1)


def render_site(rows: Sequence[Row], site_dir: Path, entries_dir: Path, problems: list[str], updated: str = "") -> int:
    """Write the whole site under ``site_dir`` (replacing it); the number of HTML pages written."""
    if site_dir.exists():
        shutil.rmtree(site_dir)
    (site_dir / "assets").mkdir(parents=True)
    (site_dir / "viewer").mkdir()
    (site_dir / "charts").mkdir()
    (site_dir / "records").mkdir()
    for asset in ("board.css", "board.js", "viewer.js"):
        shutil.copyfile(ASSETS / asset, site_dir / "assets" / asset)
    (site_dir / "index.html").write_text(render_index(rows, updated), encoding="utf-8")
    pages = 1
    for r in rows:
        if r.record:
            (site_dir / r.record).write_text(render_record(r), encoding="utf-8")
            pages += 1
    for suite in SUITES.values():
        (site_dir / f"{suite.name}.html").write_text(render_suite_page(suite, rows, updated), encoding="utf-8")
        (site_dir / "charts" / f"{suite.name}.svg").write_text(bar_chart_svg(suite, rows) + "\n", encoding="utf-8")
        pages += 1
    for r in rows:
        if not r.viewer:
            continue
        try:
            data = viewer_data(entries_dir / r.slug, problems)
        except (OSError, ValueError, KeyError) as exc:
            problems.append(f"{r.slug}: no viewer ({exc})")
            continue
        (site_dir / r.viewer).write_text(render_viewer(r, data), encoding="utf-8")
        pages += 1
    return pages


def screenshot(index: Path, out: Path, *, width: int = 1400, height: int = 1000) -> Path:
    """Draw the built site's front page into ``out`` with headless chromium (Debian's ``chromium``).

    The README's picture of the board is redrawn from the pages the build just wrote, so it cannot go stale.
    """
    import shutil
    import subprocess

    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        raise RuntimeError("no chromium found for the screenshot: apt-get install chromium (or build without it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    cmd += [f"--window-size={width},{height}", f"--screenshot={out.resolve()}", index.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"chromium could not draw {index}: {proc.stderr.strip()[-300:]}")
    return out
