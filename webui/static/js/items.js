// The work items of a project, and its closed sessions.

import { get, APIError } from './api.js';
import { h, fmtTime, showError } from './dom.js';

export async function itemsPage(main, _id, params) {
  const project = h('input', { id: 'project', name: 'project', value: params.get('project') || 'default', required: true, maxlength: 200 });
  const all = h('input', { type: 'checkbox', id: 'include-resolved', checked: params.get('all') === '1' });
  const form = h('form', { class: 'row', id: 'items-form' },
    h('label', { for: 'project' }, 'Project'), project,
    h('label', { for: 'include-resolved', class: 'check' }, all, ' include resolved'),
    h('button', { type: 'submit' }, 'Show'));
  const out = h('div', { id: 'items' });
  main.append(h('h1', {}, 'Work items'), form, out);

  async function load() {
    const q = new URLSearchParams({ project: project.value.trim() || 'default' });
    if (all.checked) q.set('include_resolved', 'true');
    let res;
    try {
      res = await get('/v1/items?' + q);
    } catch (e) {
      if (e instanceof APIError && e.status === 501) {
        out.replaceChildren(h('p', { class: 'muted' }, 'This server keeps no work items.'));
        return;
      }
      throw e;
    }
    const closed = await get('/v1/sessions?' + new URLSearchParams({ project: q.get('project'), limit: 20 }));
    const counts = new Map();
    const note = (sid, what) => {
      if (!sid) return;
      if (!counts.has(sid)) counts.set(sid, { created: 0, resolved: 0 });
      counts.get(sid)[what]++;
    };
    for (const it of res.threads) { note(it.source_session, 'created'); note(it.resolved_by_session, 'resolved'); }
    const n = (sid, what) => (counts.get(sid) || {})[what] || 0;
    out.replaceChildren(
      h('p', { class: 'muted' }, `${res.total_open} open, ${res.total_resolved} resolved`),
      h('ol', { class: 'items' }, res.threads.map((it) => h('li', { class: `item ${it.status}` },
        h('span', { class: `status status-${it.status === 'open' ? 'running' : 'done'}` }, it.status), ' ',
        h('code', { class: 'muted' }, it.id), ' ', h('span', { class: 'item-text' }, it.text),
        h('div', { class: 'muted small' },
          it.created_at ? ['created ', fmtTime(it.created_at)] : '',
          it.source_session ? ` in session ${it.source_session}` : '',
          it.resolved_at ? [' · resolved ', fmtTime(it.resolved_at)] : '',
          it.resolved_by_session ? ` in session ${it.resolved_by_session}` : '',
          it.resolution_note ? ` · ${it.resolution_note}` : '')))),
      // replaceChildren, unlike h(), would show a null as the text "null".
      res.threads.length ? '' : h('p', { class: 'muted' }, 'No items.'),
      h('h2', {}, 'Sessions'),
      closed.sessions.length
        ? h('table', { class: 'list', id: 'sessions' },
          h('thead', {}, h('tr', {}, ['Session', 'Started', 'Closed', 'Items carried', 'Items created', 'Items resolved'].map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, closed.sessions.map((ss) => h('tr', {},
            h('td', {}, h('code', {}, ss.id)),
            h('td', {}, ss.started_at ? fmtTime(ss.started_at) : '—'),
            h('td', {}, fmtTime(ss.closed_at)),
            h('td', { class: 'num' }, (ss.open_threads || []).length),
            h('td', { class: 'num' }, n(ss.id, 'created')),
            h('td', { class: 'num' }, n(ss.id, 'resolved'))))))
        : h('p', { class: 'muted' }, 'No closed sessions.'));
  }
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams({ project: project.value.trim() });
    if (all.checked) q.set('all', '1');
    history.replaceState(null, '', '#/items?' + q);
    load().catch(showError);
  });
  await load();
  return null;
}
