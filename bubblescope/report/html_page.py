"""The HTML page skeleton: head, CSS, inlined plotly.js, figure data and the page's small scripts.

Every HTML surface (`bubblescope report`, a run's or an ablation's report.html, a profile page, `diff`)
collects its sections into a `Page`; this file alone knows how a page becomes one self-contained document
that opens offline, so the sections (html_blocks.py, html_run.py, html_ablation.py, html.py) only add markup.

Safety: every string from a trace or record is escaped with `escape.html_text` (report/escape.py)
before it enters markup, and all JSON placed inside a `<script>` goes through `script_safe_json` (`<`,
`>`, `&`, U+2028/9 become \\uXXXX), so a kernel named `</script><script>...` stays text. Plotly's own
hover/labels get `figures.plot_text`.

Browser hooks (used by the headless-browser test and handy when debugging a page): the `<html>` element
counts uncaught errors in `data-js-errors` (first message in `data-js-first-error`), and `<body>` gets
`data-figures-rendered="N"` once every `Plotly.newPlot` promise has resolved.
"""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go

from bubblescope.report import figures
from bubblescope.report.escape import html_text
from bubblescope.report.html_tables import TABLE_CSS, esc

JS_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_safe_json(obj: Any) -> str:
    """JSON text that cannot end or open a `<script>` element or break a JS string literal."""
    text = json.dumps(obj, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in JS_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


class Page:
    """Collects sections and figures; `render()` returns the whole self-contained document."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.parts: list[str] = []
        self.figure_specs: list[dict[str, Any]] = []

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def heading(self, text: str) -> None:
        """An `<h1>` for one input; the first one also names the page when the page has no title yet."""
        if not self.title:
            self.title = f"bubblescope · {text}"
        self.parts.append(f"<h1>{esc(text)}</h1>")

    def figure(self, fig: go.Figure) -> None:
        fig_id = f"bs-fig-{len(self.figure_specs)}"
        spec = json.loads(fig.to_json())
        self.figure_specs.append(
            {
                "id": fig_id,
                "data": spec.get("data", []),
                "layout": spec.get("layout", {}),
                "config": {"responsive": True, "displaylogo": False},
            }
        )
        self.parts.append(f'<div class="figure" id="{fig_id}"></div>')

    def figure_or_note(self, fig: go.Figure, note: str) -> None:
        """The figure, or `note` in its place when it would draw nothing (bare axes say nothing)."""
        if figures.draws_something(fig):
            self.figure(fig)
        else:
            self.add(f'<p class="muted">{esc(note)}</p>')

    def render(self) -> str:
        scripts = ""
        if self.figure_specs:
            scripts = (
                f"<script>{_plotly_js()}</script>\n"
                '<script type="application/json" id="bs-figures">'
                f"{script_safe_json(self.figure_specs)}</script>\n"
                f"<script>{RENDER_JS}{SORT_JS}</script>"
            )
        else:
            scripts = f"<script>document.body.dataset.figuresRendered = '0';{SORT_JS}</script>"

        body = "\n".join(self.parts)
        title = self.title or "bubblescope report"
        return (
            f'<!DOCTYPE html>\n<html lang="en" data-js-errors="0">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html_text(title)}</title>\n<script>{ERROR_HOOK_JS}</script>\n"
            f"<style>{STYLE_CSS}{TABLE_CSS}</style>\n</head>\n<body>\n{body}\n{scripts}\n</body>\n</html>\n"
        )


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    source = get_plotlyjs()
    # The bundled library never contains this today; if a future build did, inlining would cut the page.
    if "</script" in source.lower():
        raise RuntimeError("plotly.js bundle contains '</script'; cannot inline it safely")
    return source


ERROR_HOOK_JS = """
(function(){var root=document.documentElement;function note(msg){
var n=parseInt(root.dataset.jsErrors||'0',10)+1;root.dataset.jsErrors=String(n);
if(!root.dataset.jsFirstError){root.dataset.jsFirstError=String(msg).slice(0,300);}}
window.addEventListener('error',function(e){note(e.message||e);});
window.addEventListener('unhandledrejection',function(e){note(e.reason||'unhandled rejection');});})();
"""


RENDER_JS = """
(function(){var specs=JSON.parse(document.getElementById('bs-figures').textContent);
var jobs=specs.map(function(s){return Plotly.newPlot(s.id,s.data,s.layout,s.config);});
Promise.all(jobs).then(function(){var n=0;specs.forEach(function(s){
if(document.getElementById(s.id).querySelector('.main-svg')){n+=1;}});
document.body.dataset.figuresRendered=String(n);});})();
"""


# Click a header of a `table.sortable` to sort by that column (numbers by value), again to reverse.
SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th,col){th.style.cursor='pointer';
th.addEventListener('click',function(){var body=th.closest('table').tBodies[0];
var down=th.dataset.dir!=='desc';th.dataset.dir=down?'desc':'asc';
var rows=Array.prototype.slice.call(body.rows);rows.sort(function(a,b){
var x=a.cells[col].dataset.sort,y=b.cells[col].dataset.sort,nx=parseFloat(x),ny=parseFloat(y);
var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:String(x).localeCompare(String(y));return down?-c:c;});
rows.forEach(function(r){body.appendChild(r);});});});
"""


STYLE_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1280px;
color:#222;padding:0 16px}
h1{font-size:1.6em;margin-bottom:4px;overflow-wrap:anywhere}
h2{overflow-wrap:anywhere;border-bottom:2px solid #eee;padding-bottom:4px;margin-top:36px}
.sub{color:#666;margin-top:0;overflow-wrap:anywhere}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:150px;background:#fafafa}
.card .label{font-size:.8em;color:#666}.card .value{font-size:1.25em;font-weight:600}
.warn{color:#8a5a00;background:#fff7e0;padding:6px 10px;border-radius:4px}
.figure{margin:8px 0 20px 0}.muted{color:#888}code{background:#f3f3f3;padding:1px 4px;border-radius:3px}
"""
