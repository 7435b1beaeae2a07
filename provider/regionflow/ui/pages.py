"""The plugin's three pages: static HTML with a small script that reads the JSON API every 5 s (the
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
#drawing { position: relative; display: flex; gap: 3.5rem; align-items: flex-start; padding: .5rem; }
#drawing svg { position: absolute; left: 0; top: 0; pointer-events: none; overflow: visible; }
.column { display: flex; flex-direction: column; gap: 1.2rem; }
.region { border: 2px solid #4a5568; border-radius: 6px; padding: .3rem .5rem .5rem; background: #f7fafc; }
.region-head { font-size: .8rem; margin-bottom: .3rem; } .region-vertices { display: flex; gap: 3rem; }
.vertex { border: 1px solid #2b6cb0; border-radius: 4px; background: #ebf8ff; padding: .3rem .6rem;
          white-space: nowrap; }
.state-success { border-color: #38a169; } .state-running { border-color: #d69e2e; }
.state-failed, .state-upstream_failed { border-color: #e53e3e; } .state-queued { border-color: #805ad5; }
"""

_SCRIPT = """
let API = %(api)s;
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
    if (data.active === false) {  // a view of a run that has ended, or of no run: nothing will change any more
      clearInterval(timer);
      document.getElementById('status').textContent =
        data.run_state ? `run ${data.run_state}: not refreshing` : 'no run: not refreshing';
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
                  ['shard', q => q.map_index < 0 ? '' : q.map_index], ['slots', q => q.slots_requested],
                  ['waiting (s)', q => q.age_s], ['why', q => q.why]], d.queue);
  table('blocklist', [['host', b => b.host], ['run', b => b.job_id], ['reason', b => b.reason],
                      ['expires in (s)', b => b.expires_in_s]], d.blocklist);
  table('grants', [['DAG', g => g.dag_id], ['run', g => g.run_id], ['regions holding slots',
                    g => g.grants.map(x => `${x.label} (${x.slots_requested} on ${x.hosts.join('+')})`).join('; ')]],
        d.grants);
  table('schedulers', [['scheduler', s => s.scheduler_id], ['pid', s => s.pid],
                       ['last heartbeat (s ago)', s => s.heartbeat_age_s], ['state', s => s.state]], d.schedulers);
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
  table('figures', [['task', f => f.task], ['figure', f => f.name],
                    ['value', f => typeof f.value === 'number' ? +f.value.toFixed(3) : f.value]], figures);
  table('blocklist', [['host', b => b.host], ['reason', b => b.reason], ['expires in (s)', b => b.expires_in_s]],
        d.blocklist);
}
"""


_PLAN_RENDER = """
const BASE = API.replace(/[?&]mode=[^&]*/, '');  // the mode switch appends its own
function el(tag, cls, text) {
  const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text;
  return e;
}
function regionHead(r) {
  let text = `region ${r.index}: task ${r.task_id}, ${r.execution_regions} execution region(s) of ` +
             `${r.slots_per_region} slot(s)`;
  if ('state' in r) {
    const shards = Object.entries(r.shards).map(([s, n]) => `${n} ${s}`).join(', ');
    text += ` · ${r.state || 'not started'}` + (shards && r.state === 'mixed' ? ` (${shards})` : '');
    if (r.started_at) text += ` · ${when(r.started_at)}` + (r.ended_at ? `-${when(r.ended_at)}` : '');
    if (r.shards_waiting_for_slots) text += ` · ${r.shards_waiting_for_slots} shard(s) waiting for slots`;
  }
  return text;
}
function draw(d) {
  const box = document.getElementById('drawing'); box.replaceChildren();
  const columns = [], vertices = new Map(d.vertices.map(v => [v.name, v]));
  for (const r of d.regions) {
    while (columns.length <= r.column) { const c = el('div', 'column'); columns.push(c); box.appendChild(c); }
    const region = el('div', 'region' + (r.state ? ' state-' + r.state : ''));
    region.dataset.region = r.index; region.dataset.task = r.task_id;
    region.appendChild(el('div', 'region-head', regionHead(r)));
    const row = el('div', 'region-vertices');
    for (const name of r.vertices) {
      const chip = el('div', 'vertex', `${name} ×${vertices.get(name).parallelism}`); chip.dataset.vertex = name;
      row.appendChild(chip);
    }
    region.appendChild(row); columns[r.column].appendChild(region);
  }
  const NS = 'http://www.w3.org/2000/svg', svg = document.createElementNS(NS, 'svg');
  const origin = box.getBoundingClientRect();
  svg.setAttribute('width', box.scrollWidth); svg.setAttribute('height', box.scrollHeight);
  svg.innerHTML = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" ' +
                  'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#2d3748"/></marker></defs>';
  for (const e of d.edges) {
    const a = box.querySelector(`[data-vertex="${CSS.escape(e.src)}"]`).getBoundingClientRect();
    const b = box.querySelector(`[data-vertex="${CSS.escape(e.dst)}"]`).getBoundingClientRect();
    const line = document.createElementNS(NS, 'line');
    const x1 = a.right - origin.left, y1 = a.top + a.height / 2 - origin.top;
    const x2 = b.left - origin.left, y2 = b.top + b.height / 2 - origin.top;
    Object.entries({x1, y1, x2, y2, stroke: '#2d3748', 'stroke-width': 1.5, 'marker-end': 'url(#arrow)'})
      .forEach(([k, v]) => line.setAttribute(k, v));
    if (e.exchange === 'blocking') line.setAttribute('stroke-dasharray', '5 4');
    const label = document.createElementNS(NS, 'text');
    label.setAttribute('x', (x1 + x2) / 2); label.setAttribute('y', (y1 + y2) / 2 - 4);
    label.setAttribute('font-size', '10'); label.setAttribute('text-anchor', 'middle');
    label.textContent = e.distribution;
    svg.appendChild(line); svg.appendChild(label);
  }
  box.appendChild(svg);
}
function render(d) {
  const select = document.getElementById('mode');
  if (!select.options.length) {
    for (const m of d.modes) { const o = el('option', '', m + (m === d.dag_mode ? " (the DAG's)" : '')); o.value = m;
                               select.appendChild(o); }
    select.addEventListener('change', () => {
      API = BASE + (BASE.includes('?') ? '&' : '?') + 'mode=' + encodeURIComponent(select.value); refresh();
    });
  }
  select.value = d.mode;
  document.getElementById('summary').textContent =
    `${d.region_count} pipelined region(s) in ${d.regions.length} logical region(s) under ${d.mode}; ` +
    `at least ${d.min_slots} slot(s)` + (d.preview ? ` · preview: the DAG runs under ${d.dag_mode}, so no ` +
    'region states are shown' : '') + (d.run_id ? ` · run ${d.run_id}: ${d.run_state}` : '');
  draw(d);
  table('edges', [['from', e => e.src], ['to', e => e.dst], ['distribution', e => e.distribution],
                  ['keys', e => e.keys.join(', ')], ['exchange', e => e.exchange + (e.declared ? ' (declared)' : '')]],
        d.edges);
  table('regions', [['region', r => r.index], ['task', r => r.task_id], ['vertices', r => r.vertices.join(', ')],
                    ['execution regions', r => r.execution_regions], ['slots each', r => r.slots_per_region],
                    ['state', r => r.state === undefined ? '(preview)' : (r.state || 'not started')],
                    ['start', r => when(r.started_at)], ['end', r => when(r.ended_at)]], d.regions);
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
                  ("Grants per DAG run", "grants"), ("Schedulers sharing the pool", "schedulers")])


def plan_page(dag_id: str, run_id: str | None, mode: str | None) -> str:
    """A DAG's vertices and edges with regions drawn as boxes around their vertices, under its own or a
    previewed exchange mode; with a run, each region's state and timing (refreshed while the run is active)."""
    api = f"api/dags/{quote(dag_id, safe='')}/plan"
    query = [f"{name}={quote(value, safe='')}" for name, value in (("run_id", run_id), ("mode", mode)) if value]
    if query:
        api += "?" + "&".join(query)
    lead = (f"<p class='muted'>DAG {html.escape(dag_id)}{', run ' + html.escape(run_id) if run_id else ''}</p>"
            "<p><label>exchange mode <select id='mode'></select></label> "
            "<span class='muted'>solid arrow: pipelined, dashed: blocking</span></p><div id='drawing'></div>")
    return _page("regionflow: plan", api, _PLAN_RENDER, [("Edges", "edges"), ("Regions", "regions")], lead)


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


__all__ = ["attempts_page", "cluster_page", "plan_page"]
