// The workflows pages: the list, and one workflow's execution state with
// links to its sub-threads.

import { get, APIError } from './api.js';
import { h, fmtTime, enc, json, showError } from './dom.js';

const PAGE = 50;

const status = (s) => h('span', { class: `status status-${s}` }, s);

export async function workflowsPage(main) {
  const cursors = [''];
  let page = 0;
  const tbody = h('tbody');
  const prev = h('button', { type: 'button' }, '← Previous');
  const next = h('button', { type: 'button' }, 'Next →');
  main.append(h('h1', {}, 'Workflows'),
    h('table', { class: 'list', id: 'workflows' },
      h('caption', { class: 'visually-hidden' }, 'Workflows'),
      h('thead', {}, h('tr', {}, ['Workflow', 'Title', 'Status', 'Round', 'Sub-threads', 'Updated'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody),
    h('nav', { class: 'row pager', 'aria-label': 'Pages' }, prev, next));
  async function load() {
    const q = new URLSearchParams({ limit: PAGE });
    if (cursors[page]) q.set('cursor', cursors[page]);
    const res = await get('/v1/workflows?' + q);
    cursors[page + 1] = res.next_cursor || null;
    tbody.replaceChildren(...res.workflows.map((w) => h('tr', {},
      h('td', {}, h('a', { href: `#/workflows/${enc(w.id)}` }, w.id)),
      h('td', {}, w.title), h('td', {}, status(w.status)), h('td', { class: 'num' }, w.round),
      h('td', {}, (w.sub_threads || []).join(', ')), h('td', {}, fmtTime(w.updated_at)))));
    if (!res.workflows.length) tbody.append(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No workflows.')));
    prev.disabled = page === 0;
    next.disabled = !res.next_cursor;
  }
  prev.addEventListener('click', () => { page--; load().catch(showError); });
  next.addEventListener('click', () => { page++; load().catch(showError); });
  await load();
  return null;
}

function value(label, v) {
  if (v === undefined || v === null) return null;
  return h('details', {}, h('summary', {}, label), h('pre', {}, json(v)));
}

export async function workflowPage(main, id) {
  let w;
  try {
    w = await get(`/v1/workflows/${enc(id)}`);
  } catch (e) {
    if (e instanceof APIError && e.status === 404) {
      main.append(h('h1', {}, 'Workflow not found'), h('p', {}, h('a', { href: '#/workflows' }, 'All workflows')));
      return null;
    }
    throw e;
  }
  const x = w.execution;
  const names = (a) => (a && a.length ? a.join(', ') : '—');
  main.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/workflows' }, 'Workflows'), ' / ', h('span', {}, id)),
    h('h1', {}, w.title || w.id),
    h('dl', { class: 'facts', id: 'workflow-facts' },
      h('dt', {}, 'Status'), h('dd', {}, status(x.status)),
      h('dt', {}, 'Version'), h('dd', {}, x.version),
      h('dt', {}, 'Round'), h('dd', {}, x.round),
      h('dt', {}, 'Current'), h('dd', {}, names(x.current)),
      h('dt', {}, 'Next'), h('dd', {}, names(x.next)),
      h('dt', {}, 'Completed'), h('dd', {}, names(x.completed)),
      x.error ? [h('dt', {}, 'Error'), h('dd', { class: 'msg-error' }, x.error)] : null),
    value('Input', x.input),
    x.waiting && x.waiting.length ? h('section', { class: 'panel' }, h('h2', {}, 'Waiting for input'),
      h('ul', {}, x.waiting.map((wt) => h('li', {}, h('strong', {}, wt.step), ' since ', fmtTime(wt.since), value('Prompt', wt.prompt))))) : null,
    h('section', { class: 'panel' }, h('h2', {}, 'Steps'),
      h('table', { class: 'list', id: 'steps' },
        h('thead', {}, h('tr', {}, ['Step', 'Status', 'Started', 'Ended', 'Details'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, x.steps.map((sr) => h('tr', {},
          h('td', {}, h('code', {}, sr.id)), h('td', {}, status(sr.status)), h('td', {}, fmtTime(sr.start)), h('td', {}, fmtTime(sr.end)),
          h('td', {}, value('Input', sr.input), value('Output', sr.output), value('Answer', sr.answer),
            sr.error ? h('p', { class: 'msg-error' }, sr.error) : null,
            sr.next && sr.next.length ? h('p', { class: 'muted' }, 'next: ' + sr.next.join(', ')) : null)))))),
    h('section', { class: 'panel' }, h('h2', {}, 'Sub-threads'),
      h('ul', { id: 'sub-threads' }, x.sub_threads.map((t) => h('li', {},
        h('a', { href: `#/threads/${enc(t.thread)}` }, t.key), ' ', h('code', { class: 'muted' }, t.thread), ` v${t.version}`)))));
  return null;
}
