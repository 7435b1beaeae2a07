"""The plugin's two pages: static HTML with a small script that reads the JSON API every 5 s (the
attempts page only while its DAG run is queued or running) and renders tables with ``textContent``
(values from the store are never parsed as HTML). The API is addressed relative to the page
(``api/...``), so a base URL with a path prefix keeps working."""
from __future__ import annotations

import html
import json
from urllib.parse import quote

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1rem; color: #1a202c; }
h1 { font-size: 1.3rem; } h2 { font-size: 1.05rem; margin-top: 1.4rem; }
table { border-collapse: collapse; margin: .4rem 0; } td, th { border: 1px solid #cbd5e0; padding: .2rem .5rem; }
th { background: #edf2f7; text-align: left; } .muted { color: #718096; } .error { color: #c53030; }
"""

_SCRIPT = """
const API = %(api)s;
function table(id, columns, rows) {
  const box = document.getElementById(id); box.replaceChildren();
  if (!rows.length) { const p = document.createElement('p'); p.className = 'muted'; p.textContent = 'none';
                      box.appendChild(p); return; }
  const t = document.createElement('table'); const head = t.insertRow();
  for (const [title] of columns) {
    const th = document.createElement('th'); th.textContent = title; head.appendChild(th);
  }
  for (const row of rows) {
    const tr = t.insertRow();
    for (const [, get] of columns) {
      const v = get(row); tr.insertCell().textContent = v === null || v === undefined ? '' : String(v);
    }
  }
  box.appendChild(t);
}
function when(epoch) { return epoch ? new Date(epoch * 1000).toLocaleTimeString() : ''; }
async function refresh() {
  try {
    const response = await fetch(API, {credentials: 'same-origin'});
    const data = await response.json();
    if (!response.ok) { document.getElementById('status').textContent = data.detail || response.statusText; return; }
    document.getElementById('status').textContent = 'updated ' + new Date().toLocaleTimeString();
    render(data);
    if (data.active === false) {  // a view of a run that has ended: nothing will change any more
      clearInterval(timer);
      document.getElementById('status').textContent = `run ${data.run_state || 'ended'}: not refreshing`;
    }
  } catch (error) { document.getElementById('status').textContent = String(error); }
}
%(render)s
const timer = setInterval(refresh, 5000); refresh();
"""

_CLUSTER_RENDER = """
function render(d) {
  document.getElementById('summary').textContent =
    `${d.slots.used} of ${d.slots.total} slots granted, ${d.slots.free} free; ${d.queue.length} region(s) waiting` +
    (d.queue_hidden ? ` (+${d.queue_hidden} of DAGs you cannot see)` : '');
  table('hosts', [['host', h => h.name], ['slots', h => h.slots], ['used', h => h.used], ['free', h => h.free],
                  ['master', h => h.master], ['slot profile', h => h.slot_profile]], d.hosts);
  table('queue', [['#', q => q.position], ['DAG', q => q.dag_id], ['run', q => q.run_id], ['region', q => q.label],
                  ['shard', q => q.map_index], ['slots', q => q.slots_requested], ['waiting (s)', q => q.age_s],
                  ['why', q => q.why]], d.queue);
  table('blocklist', [['host', b => b.host], ['run', b => b.job_id], ['reason', b => b.reason],
                      ['expires in (s)', b => b.expires_in_s]], d.blocklist);
  table('grants', [['DAG', g => g.dag_id], ['run', g => g.run_id], ['regions holding slots',
                    g => g.grants.map(x => `${x.label} (${x.slots_requested} on ${x.hosts.join('+')})`).join('; ')]],
        d.grants);
}
"""

_ATTEMPTS_RENDER = """
function render(d) {
  const rows = [], copies = [], figures = [];
  for (const [task, t] of Object.entries(d.tasks)) {
    for (const a of t.attempts) rows.push({task, ...a});
    for (const c of t.copies) copies.push({task, ...c});
    for (const [name, value] of Object.entries(t.metrics)) figures.push({task, name, value});
  }
  table('attempts', [['task', a => a.task], ['shard', a => a.shard], ['attempt', a => a.attempt],
                     ['host', a => a.host], ['start', a => when(a.started_at)], ['end', a => when(a.ended_at)],
                     ['seconds', a => a.duration_s], ['state', a => a.state],
                     ['copy', a => a.speculative ? 'speculative' : ''], ['winner', a => a.winner ? 'winner' : ''],
                     ['message', a => a.message]], rows);
  table('copies', [['task', c => c.task], ['shard', c => c.shard], ['request', c => c.request],
                   ['state', c => c.state], ['attempt', c => c.attempt], ['host', c => c.host],
                   ['avoiding', c => c.excluded_hosts.join(', ')], ['message', c => c.message]], copies);
  table('figures', [['task', f => f.task], ['figure', f => f.name], ['value', f => f.value]], figures);
  table('blocklist', [['host', b => b.host], ['reason', b => b.reason], ['expires in (s)', b => b.expires_in_s]],
        d.blocklist);
}
"""


def _page(title: str, api: str, render: str, sections: list[tuple[str, str]], lead: str = "") -> str:
    body = "".join(f'<h2>{html.escape(name)}</h2><div id="{anchor}"></div>' for name, anchor in sections)
    script = _SCRIPT % {"api": json.dumps(api), "render": render}
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{lead}"
            f"<p id='summary'></p><p id='status' class='muted'>loading ...</p>{body}"
            f"<script>{script}</script></body></html>")


def cluster_page() -> str:
    """Hosts, FIFO queue, blocklist and grants, refreshed every 5 s."""
    return _page("regionflow: slot pool", "api/cluster", _CLUSTER_RENDER,
                 [("Hosts", "hosts"), ("FIFO queue (oldest first)", "queue"), ("Blocklist", "blocklist"),
                  ("Grants per DAG run", "grants")])


def attempts_page(dag_id: str, run_id: str, task_id: str | None) -> str:
    """Every attempt and speculative copy of a run's region tasks (or of one task), refreshed every 5 s."""
    api = f"api/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/attempts"
    if task_id:
        api += f"?task_id={quote(task_id, safe='')}"
    lead = (f"<p class='muted'>DAG {html.escape(dag_id)}, run {html.escape(run_id)}"
            f"{', task ' + html.escape(task_id) if task_id else ''}</p>")
    return _page("regionflow: attempts", api, _ATTEMPTS_RENDER,
                 [("Attempts", "attempts"), ("Speculative copies", "copies"), ("Speculation figures", "figures"),
                  ("Blocklist of the run", "blocklist")], lead)


__all__ = ["attempts_page", "cluster_page"]
