// The threads page: search, filters, one page of threads at a time (the
// most recently updated first; loom's own threads only when asked), and a
// form to create one; kept fresh by the tenant's change feed. On a phone
// the table is a stack of cards.

import { get, post, watch } from './api.js';
import { h, fmtTime, enc, short, announce, showError, throttle, setLive } from './dom.js';

const PAGE = 50;

// highlight marks the query's words in a snippet, as text nodes only.
function highlight(text, q) {
  const words = q.split(/\s+/).filter(Boolean).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  if (!words.length) return [text];
  const re = new RegExp(`\\b(${words.join('|')})\\b`, 'giu');
  const out = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    out.push(text.slice(last, m.index), h('mark', {}, m[0]));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}

function labelsText(labels) {
  return Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');
}

// origin says where a fork comes from, under its title: a fork often keeps
// its parent's title, and the list would show twins.
function origin(t) {
  const f = t.forked_from;
  if (!f || !f.thread) return null;
  return h('span', { class: 'origin muted' }, 'fork of ', h('a', { href: `#/threads/${enc(f.thread)}` }, f.thread),
    f.message ? ` at msg ${short(f.message, 8)}` : '');
}

// cell is a table cell that, in the narrow (card) layout, says what it is.
const cell = (label, attrs, ...children) => h('td', { ...attrs, dataset: { label } }, ...children);

export async function threadsPage(main) {
  const state = { kind: '', labels: '', internal: false, cursors: [''], page: 0, q: '', searchNext: '' };

  const searchInput = h('input', { type: 'search', id: 'search-q', name: 'q', autocomplete: 'off', placeholder: 'words in messages' });
  const searchForm = h('form', { role: 'search', class: 'row', id: 'search-form' },
    h('label', { for: 'search-q' }, 'Search messages'), searchInput, h('button', { type: 'submit' }, 'Search'),
    h('button', { type: 'button', class: 'link', on: { click: () => { searchInput.value = ''; runSearch(''); } } }, 'Clear'));
  const results = h('section', { id: 'search-results', 'aria-labelledby': 'search-title', hidden: true });

  const kindSel = h('select', { id: 'kind', name: 'kind' },
    ['', 'undetermined', 'local', 'service', 'workflow'].map((k) => h('option', { value: k }, k || 'any')));
  const labelInput = h('input', { id: 'labels', name: 'labels', placeholder: 'team=support, lang=en', autocomplete: 'off' });
  // loom's own threads (work logs, sessions, workflow sub-threads) are
  // left out unless asked for.
  const internalBox = h('input', { type: 'checkbox', id: 'internal', name: 'internal' });
  const filterForm = h('form', { class: 'row', id: 'filter-form' },
    h('label', { for: 'kind' }, 'Kind'), kindSel,
    h('label', { for: 'labels' }, 'Labels'), labelInput,
    h('label', { for: 'internal', class: 'check' }, internalBox, ' show loom’s own threads'),
    h('button', { type: 'submit' }, 'Filter'));
  internalBox.addEventListener('change', () => {
    Object.assign(state, { internal: internalBox.checked, cursors: [''], page: 0 });
    load().catch(showError);
  });

  const newId = h('input', { id: 'new-id', name: 'id', autocomplete: 'off', placeholder: 'optional', pattern: '[A-Za-z0-9_][A-Za-z0-9_.\\-]{0,127}' });
  const newTitle = h('input', { id: 'new-title', name: 'title', autocomplete: 'off' });
  const createForm = h('form', { class: 'row', id: 'create-form' },
    h('label', { for: 'new-id' }, 'Id'), newId, h('label', { for: 'new-title' }, 'Title'), newTitle,
    h('button', { type: 'submit' }, 'Create thread'));

  const tbody = h('tbody');
  const table = h('table', { class: 'list cards', id: 'threads' },
    h('caption', { class: 'visually-hidden' }, 'Threads'),
    h('thead', {}, h('tr', {}, ['Thread', 'Title', 'Kind', 'Labels', 'Version', 'Updated'].map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  const prev = h('button', { type: 'button', id: 'prev-page' }, '← Previous');
  const next = h('button', { type: 'button', id: 'next-page' }, 'Next →');
  const pageInfo = h('span', { class: 'muted' });

  main.append(
    h('h1', {}, 'Threads'),
    searchForm, results,
    h('section', { 'aria-label': 'Threads list' }, filterForm, table, h('nav', { class: 'row pager', 'aria-label': 'Pages' }, prev, pageInfo, next)),
    h('details', { class: 'panel' }, h('summary', {}, 'New thread'), createForm));

  async function load() {
    // Newest by time: the thread written to last comes first.
    const q = new URLSearchParams({ limit: PAGE, order: 'updated' });
    if (state.internal) q.set('internal', 'include');
    if (state.kind) q.set('kind', state.kind);
    for (const l of state.labels.split(',').map((x) => x.trim()).filter(Boolean)) {
      const i = l.search(/[=:]/);
      q.append('label', i < 0 ? l : l.slice(0, i).trim() + ':' + l.slice(i + 1).trim());
    }
    const c = state.cursors[state.page];
    if (c) q.set('cursor', c);
    const res = await get('/v1/threads?' + q);
    state.cursors[state.page + 1] = res.next_cursor || null;
    tbody.replaceChildren(...res.threads.map((t) => h('tr', { class: t.forked_from ? 'fork' : null, dataset: { thread: t.id } },
      cell('Thread', { class: 'id' }, h('a', { href: `#/threads/${enc(t.id)}` }, t.id)),
      cell('Title', { class: 'title' }, t.title ? h('span', {}, t.title) : '', origin(t)),
      cell('Kind', {}, t.kind || ''),
      cell('Labels', { class: 'labels' }, labelsText(t.labels)),
      cell('Version', { class: 'num' }, t.version ?? ''),
      cell('Updated', {}, fmtTime(t.updated_at)))));
    if (!res.threads.length) tbody.append(h('tr', { class: 'none' }, h('td', { colspan: 6, class: 'muted' }, 'No threads.')));
    prev.disabled = state.page === 0;
    next.disabled = !res.next_cursor;
    pageInfo.textContent = `Page ${state.page + 1}`;
  }

  async function runSearch(q, more) {
    state.q = q;
    if (!q) { results.hidden = true; results.replaceChildren(); return; }
    const p = new URLSearchParams({ q, limit: 20 });
    if (more) p.set('before', state.searchNext);
    const res = await get('/v1/search?' + p);
    state.searchNext = res.next || '';
    if (!more) {
      results.replaceChildren(h('h2', { id: 'search-title' }, `Results for “${q}”`), h('ol', { class: 'hits' }));
    }
    const ol = results.querySelector('ol');
    results.querySelector('.more')?.remove();
    for (const hit of res.hits || []) {
      const role = hit.message && hit.message.role;
      // A hit found in a past version (not the head) opens that version.
      const href = `#/threads/${enc(hit.thread)}` + (hit.version ? `?v=${hit.version}` : '');
      ol.append(h('li', { class: 'hit' },
        h('a', { href }, hit.thread), hit.version ? h('span', { class: 'badge' }, `v${hit.version}`) : null,
        ' ', role ? h('span', { class: 'role' }, role) : null, ' ', fmtTime(hit.time),
        h('p', { class: 'snippet' }, highlight(hit.snippet || '', q))));
    }
    if (!ol.children.length) ol.append(h('li', { class: 'muted' }, 'No messages match.'));
    if (state.searchNext) {
      results.append(h('button', { type: 'button', class: 'more', on: { click: () => runSearch(q, true).catch(showError) } }, 'More results'));
    }
    results.hidden = false;
    announce(`${ol.querySelectorAll('.hit').length} results`);
  }

  searchForm.addEventListener('submit', (e) => { e.preventDefault(); runSearch(searchInput.value.trim()).catch(showError); });
  filterForm.addEventListener('submit', (e) => {
    e.preventDefault();
    Object.assign(state, { kind: kindSel.value, labels: labelInput.value, internal: internalBox.checked, cursors: [''], page: 0 });
    load().catch(showError);
  });
  prev.addEventListener('click', () => { if (state.page > 0) { state.page--; load().catch(showError); } });
  next.addEventListener('click', () => { if (state.cursors[state.page + 1]) { state.page++; load().catch(showError); } });
  createForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const body = {};
      if (newId.value.trim()) body.id = newId.value.trim();
      if (newTitle.value.trim()) body.title = newTitle.value.trim();
      const t = await post('/v1/threads', body);
      location.hash = `#/threads/${enc(t.id)}`;
    } catch (err) { showError(err); }
  });

  await load();
  // The time from navigation to the first rows, for the page's benchmark
  // (and anyone's devtools): performance.getEntriesByName('loom:threads').
  performance.mark('loom:threads');
  const refresh = throttle(() => load().catch(() => {}), 1000);
  const stop = watch('/v1/events', { onChange: refresh, onGap: refresh, onStatus: setLive });
  return { cleanup: stop };
}
