"""The sortable tables' script (html.SORT_JS) sorts by each cell's raw value, run in Node on a tiny DOM
stand-in (skips without node; the browser tests load whole pages in Chromium)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from bubblescope.report.html_page import SORT_JS

FAKE_DOM = """
function cell(v){return {dataset:{sort:String(v)}};}
function makeTable(rows){
  var body={rows:[],appendChild:function(r){
    var i=this.rows.indexOf(r);if(i>=0){this.rows.splice(i,1);}this.rows.push(r);}};
  rows.forEach(function(r){body.rows.push({cells:r.map(cell),key:r[0]});});
  var table={tBodies:[body]};
  var ths=[0,1].map(function(){return {dataset:{},style:{},closest:function(){return table;},
    addEventListener:function(ev,fn){this.click=fn;}};});
  return {table:table,ths:ths};
}
var t=makeTable(ROWS);
global.document={querySelectorAll:function(){return t.ths;}};
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_header_click_sorts_by_raw_values_descending_then_ascending() -> None:
    # Column 1 holds ns: as text "9" > "10" > "100", as numbers 100 > 10 > 9.
    rows = [["a", 9], ["b", 100], ["c", 10], ["d", 2.5]]
    script = (
        FAKE_DOM.replace("ROWS", json.dumps(rows))
        + SORT_JS
        + "\nvar order=[];function keys(){return t.table.tBodies[0].rows.map(function(r){return r.key;});}"
        + "t.ths[1].click();order.push(keys());t.ths[1].click();order.push(keys());"
        + "console.log(JSON.stringify(order));"
    )
    done = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    first, second = json.loads(done.stdout)
    assert first == ["b", "c", "a", "d"] and second == ["d", "a", "c", "b"]
