// The diff page: two versions of a thread, or a thread and its fork, side
// by side (GET /v1/threads/{id}/diff). The messages both sides begin with
// are folded into one line; the rest are aligned, each row labelled in
// words (added, removed, changed, same) as well as in colour; the state's
// changes are a table. Pickers change either side: any version of any
// thread of the fork family.

import { get, APIError } from './api.js';
import { h, enc, fmtTime, json, showError } from './dom.js';
import { message, resultsOf } from './render.js';
import { diffHash } from './forktree.js';

const LIMIT = 500, MORE = 10000;

const LABELS = { same: 'same', added: 'added', removed: 'removed', changed: 'changed' };

// side renders one side of an entry: its message, or a dash for none.
function side(m, results, shown, which) {
  if (!m) return h('td', { class: 'side none', dataset: { label: which } }, h('span', { 'aria-hidden': 'true' }, '—'), h('span', { class: 'visually-hidden' }, 'no message'));
  return h('td', { class: 'side', dataset: { label: which } }, message(m, results, shown, null, 'article'));
}

// value shows a state value, or a dash where the key is absent.
function value(present, v) {
  if (!present) return h('span', { class: 'muted' }, h('span', { 'aria-hidden': 'true' }, '—'), h('span', { class: 'visually-hidden' }, 'absent'));
  return h('pre', {}, json(v));
}

function plural(n, one, many) { return `${n} ${n === 1 ? one : many}`; }

export async function diffPage(main, id, params) {
  const st = { family: null, histories: new Map(), limit: LIMIT };

  const title = h('h1', { id: 'diff-title' }, 'Diff');
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' },
    h('a', { href: '#/' }, 'Threads'), ' / ', h('a', { href: `#/threads/${enc(id)}` }, id), ' / ', h('span', {}, 'diff'));

  const picker = (which, label) => {
    const thread = h('select', { id: `${which}-thread`, name: `${which}-thread` });
    const version = h('select', { id: `${which}-version`, name: `${which}-version` });
    const box = h('fieldset', { class: 'side-picker' }, h('legend', {}, label),
      h('label', { for: `${which}-thread` }, 'Thread'), thread,
      h('label', { for: `${which}-version` }, 'Version'), version);
    thread.addEventListener('change', () => versions(thread.value, version, '').catch(showError));
    return { thread, version, box };
  };
  const from = picker('from', 'From'), to = picker('to', 'To');
  const swap = h('button', { type: 'button', id: 'diff-swap', class: 'small' }, 'Swap sides');
  const form = h('form', { id: 'diff-form', class: 'diff-pickers' }, from.box, to.box,
    h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Compare'), swap));

  const summary = h('p', { id: 'diff-summary', class: 'diff-summary' });
  const body = h('div', { id: 'diff-body', 'aria-live': 'polite' });
  main.append(crumbs, title, form, summary, body);
  document.title = `Diff of ${id} · loom`;

  // versions fills a version picker with a thread's versions, newest first
  // (its last 100; the one asked for is added when older).
  async function versions(t, sel, want) {
    let entries = st.histories.get(t);
    if (!entries) {
      try {
        entries = (await get(`/v1/threads/${enc(t)}/history?limit=100`)).entries || [];
      } catch (e) {
        if (!(e instanceof APIError) || e.status !== 404) throw e;
        entries = [];
      }
      st.histories.set(t, entries);
    }
    const head = entries.length ? entries[0].version : 0;
    const opts = [h('option', { value: '' }, head ? `head (v${head})` : 'head')];
    for (const e of entries) opts.push(h('option', { value: e.version }, `v${e.version} · ${e.op}`));
    if (want && !entries.some((e) => String(e.version) === String(want))) opts.push(h('option', { value: want }, `v${want}`));
    sel.replaceChildren(...opts);
    sel.value = want && String(want) !== String(head) ? String(want) : '';
  }

  // family lists the threads either side can be: the fork family of id,
  // and whatever thread the address names.
  async function family(extra) {
    if (!st.family) {
      try {
        st.family = (await get(`/v1/threads/${enc(id)}/family`)).threads.map((t) => ({ id: t.id, title: t.title || '' }));
      } catch (e) {
        if (!(e instanceof APIError) || e.status !== 404) throw e;
        st.family = [{ id, title: '' }];
      }
    }
    for (const t of extra) if (t && !st.family.some((f) => f.id === t)) st.family.push({ id: t, title: '' });
    const opts = () => st.family.map((t) => h('option', { value: t.id }, t.title && t.title !== t.id ? `${t.id} — ${t.title}` : t.id));
    from.thread.replaceChildren(...opts());
    to.thread.replaceChildren(...opts());
  }

  function fail(e) {
    const missing = e instanceof APIError && e.status === 404;
    body.replaceChildren(h('p', { class: 'msg-error', id: 'diff-error' },
      h('strong', {}, missing ? 'Not found' : 'Cannot compare'), ': ', e.message || String(e)));
    summary.replaceChildren();
  }

  function show(d) {
    const link = (s) => h('a', { href: `#/threads/${enc(s.thread)}?v=${s.version}` }, `${s.thread} v${s.version}`);
    summary.replaceChildren('From ', link(d.from), ` (${plural(d.from.messages, 'message', 'messages')}) to `,
      link(d.to), ` (${plural(d.to.messages, 'message', 'messages')}).`);
    const entries = d.entries || [];
    const counts = {};
    for (const e of entries) counts[e.change] = (counts[e.change] || 0) + 1;
    const tally = ['added', 'removed', 'changed'].filter((c) => counts[c]).map((c) => `${counts[c]} ${c}`);
    summary.append(' ', h('span', { id: 'diff-tally' }, tally.length ? tally.join(', ') + '.' : 'No messages differ.'));

    const fromResults = resultsOf(entries.map((e) => e.from).filter(Boolean));
    const toResults = resultsOf(entries.map((e) => e.to).filter(Boolean));
    const fromShown = new Set(), toShown = new Set();
    const rows = [];
    if (d.shared > 0) {
      rows.push(h('tr', { class: 'shared', id: 'diff-shared' }, h('td', { colspan: 3 },
        h('span', {}, `${plural(d.shared, 'message', 'messages')} in common`), ' · ',
        h('a', { href: `#/threads/${enc(d.from.thread)}?v=${d.from.version}` }, 'read them'))));
    }
    for (const e of entries) {
      const c = LABELS[e.change] ? e.change : 'changed';
      rows.push(h('tr', { class: `entry chg-${c}`, dataset: { change: c } },
        h('td', { class: 'change' }, h('span', { class: `chg-label chg-${c}` }, LABELS[c])),
        side(e.from, fromResults, fromShown, 'From'),
        side(e.to, toResults, toShown, 'To')));
    }
    if (!entries.length) {
      rows.push(h('tr', { class: 'empty' }, h('td', { colspan: 3, class: 'muted' },
        d.shared ? 'Nothing else: both sides have the same messages.' : 'Neither side has messages.')));
    }
    const table = h('table', { class: 'diff', id: 'diff-entries' },
      h('caption', { class: 'visually-hidden' }, 'Messages, side by side'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', class: 'change' }, 'Change'),
        h('th', { scope: 'col' }, `From: ${d.from.thread} v${d.from.version}`),
        h('th', { scope: 'col' }, `To: ${d.to.thread} v${d.to.version}`))),
      h('tbody', {}, rows));

    const more = d.truncated
      ? h('p', { class: 'note', id: 'diff-truncated' }, `Only the first ${plural(entries.length, 'entry', 'entries')} are shown. `,
        st.limit < MORE ? h('button', { type: 'button', class: 'link', on: { click: () => { st.limit = MORE; load(current).catch(showError); } } }, 'Show more') : '')
      : null;

    const changes = d.state || [];
    const state = h('section', { 'aria-labelledby': 'diff-state-title', class: 'diff-state' },
      h('h2', { id: 'diff-state-title' }, 'State'),
      changes.length
        ? h('table', { class: 'list', id: 'diff-state' },
          h('caption', { class: 'visually-hidden' }, 'Changes of the state'),
          h('thead', {}, h('tr', {}, ['Key', 'Change', 'From', 'To'].map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, changes.map((c) => h('tr', { class: `chg-${c.change}`, dataset: { key: c.key } },
            h('td', {}, h('code', {}, c.key)),
            h('td', {}, h('span', { class: `chg-label chg-${c.change}` }, c.change)),
            h('td', {}, value('from' in c, c.from)),
            h('td', {}, value('to' in c, c.to))))))
        : h('p', { class: 'muted', id: 'diff-state-none' }, 'The state is the same on both sides.'));
    // replaceChildren would print a null: the parts are filtered.
    body.replaceChildren(...[h('h2', { class: 'visually-hidden' }, 'Messages'), table, more, state].filter(Boolean));
  }

  let current = params;
  async function load(p) {
    current = p;
    const version = p.get('version') || '';
    const other = p.get('to') || id;
    const toVersion = p.get('to_version') || '';
    await family([id, other]);
    from.thread.value = id;
    to.thread.value = other;
    await Promise.all([versions(id, from.version, version), versions(other, to.version, toVersion)]);
    const q = new URLSearchParams({ limit: st.limit });
    if (version) q.set('version', version);
    if (other !== id) q.set('to', other);
    if (toVersion) q.set('to_version', toVersion);
    body.replaceChildren(h('p', { class: 'muted' }, 'Comparing…'));
    let d;
    try {
      d = await get(`/v1/threads/${enc(id)}/diff?${q}`);
    } catch (e) {
      fail(e);
      return;
    }
    title.textContent = d.from.thread === d.to.thread
      ? `Diff of ${d.from.thread}: v${d.from.version} and v${d.to.version}`
      : `Diff of ${d.from.thread} and ${d.to.thread}`;
    show(d);
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    location.hash = diffHash(from.thread.value, +from.version.value || 0, to.thread.value, +to.version.value || 0);
  });
  swap.addEventListener('click', () => {
    location.hash = diffHash(to.thread.value, +to.version.value || 0, from.thread.value, +from.version.value || 0);
  });

  await load(params);
  return {
    // update follows a change of the address's query on the same thread.
    update(p) { st.limit = LIMIT; load(p).catch(showError); },
    cleanup() { document.title = 'loom'; },
  };
}
