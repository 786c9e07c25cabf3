// The live conversations pages: the list (sub-agents as a tree under
// their parent, a form to start one), and one conversation driven from
// the page — send, queue, abort, fork, compact — its answer streamed in
// from the conversation's events, its messages read from its thread (in
// the thread page's window: msglist.js).

import { get, post, request, readEvents, watch, APIError } from './api.js';
import { h, fmtTime, enc, short, announce, showError, throttle, setLive, changes } from './dom.js';
import { messageList } from './msglist.js';

// The answer of a server with no chat model (501 unsupported, or
// conversations:false in GET /v1/server), and what to do about it.
function noModel() {
  return h('div', { class: 'conv-no-model', id: 'conv-no-model', role: 'note' },
    h('strong', {}, 'This server has no chat model, so conversations cannot run. '),
    'Start ', h('code', {}, 'loom serve --provider scripted'),
    ' (a demo model, no key) or ', h('code', {}, '--provider openai'), ', ', h('code', {}, 'responses'), ' or ',
    h('code', {}, 'anthropic'), ' with a key in the environment.');
}

const isNoModel = (e) => e instanceof APIError && e.status === 501;

// capable tells whether the server runs conversations: true, false, or
// null when it does not say (a server without GET /v1/server).
async function capable() {
  try {
    const s = await get('/v1/server');
    return typeof s.conversations === 'boolean' ? s.conversations : null;
  } catch {
    return null;
  }
}

// statusText says an agent status as loom chat does.
function statusText(s) {
  if (!s) return '';
  if (s.kind === 'stopped') return s.reason ? `stopped (${s.reason.replace(/_/g, ' ')})` : 'stopped';
  if (s.kind === 'error') return `error: ${s.error || 'the stream failed'}`;
  return s.kind || '';
}

// modeText says a mode: normal, tool use (the tools), control flow (op).
function modeText(m) {
  if (!m) return '';
  if (m.kind === 'tool_use') {
    const tools = [...new Set(Object.values(m.active_tools || {}))];
    return tools.length ? `tool use: ${tools.join(', ')}` : 'tool use';
  }
  if (m.kind === 'control_flow') return `control flow: ${(m.op && m.op.kind) || '?'}`;
  return m.kind || '';
}

function statusBadge(s, m) {
  const busy = s.kind === 'streaming' || (m && m.kind !== 'normal');
  const cls = s.kind === 'error' ? 'bad' : busy ? 'busy' : 'ok';
  return h('span', { class: `badge conv-badge ${cls}` }, m && m.kind !== 'normal' ? `${statusText(s)} · ${modeText(m)}` : statusText(s));
}

// listAll reads the tenant's conversations, up to pages pages.
async function listAll(pages = 20) {
  let out = [], cursor = '';
  for (let i = 0; i < pages; i++) {
    const q = new URLSearchParams({ limit: 200 });
    if (cursor) q.set('cursor', cursor);
    const res = await get('/v1/conversations?' + q);
    out = out.concat(res.conversations || []);
    cursor = res.next_cursor || '';
    if (!cursor) return { items: out, more: false };
  }
  return { items: out, more: true };
}

// tree nests conversations under their parents: roots as given (newest
// first), each one's sub-agents in the order they were started. A
// sub-agent whose parent is not among them is a root.
function tree(items) {
  const ids = new Set(items.map((c) => c.id));
  const kids = new Map();
  const roots = [];
  for (const c of items) {
    if (c.parent && ids.has(c.parent) && c.parent !== c.id) {
      if (!kids.has(c.parent)) kids.set(c.parent, []);
      kids.get(c.parent).push(c);
    } else {
      roots.push(c);
    }
  }
  for (const k of kids.values()) k.reverse();
  return { roots, kids };
}

function convItem(c, kids, depth, current) {
  const sub = kids.get(c.id) || [];
  return h('li', { class: 'conv-item', dataset: { id: c.id } },
    h('div', { class: 'conv-line' },
      c.id === current
        ? h('span', { class: 'conv-name', 'aria-current': 'page' }, c.title || c.id)
        : h('a', { href: `#/conversations/${enc(c.id)}`, class: 'conv-name' }, c.title || c.id),
      c.title ? h('code', { class: 'muted small', title: c.id }, short(c.id, 12)) : null,
      c.live && c.status ? statusBadge(c.status, c.mode) : h('span', { class: 'muted small' }, 'not open'),
      c.parent ? h('span', { class: 'muted small' }, 'sub-agent') : null,
      c.forked_from ? h('span', { class: 'muted small' }, 'fork of ', h('a', { href: `#/conversations/${enc(c.forked_from)}` }, short(c.forked_from, 12))) : null,
      h('span', { class: 'muted small' }, 'updated ', fmtTime(c.updated_at))),
    sub.length && depth < 20 ? h('ul', { class: 'conv-tree', 'aria-label': `Sub-agents of ${c.title || c.id}` }, sub.map((k) => convItem(k, kids, depth + 1, current))) : null);
}

export async function conversationsPage(main) {
  const hint = h('div', { id: 'conv-hint' });
  const newTitle = h('input', { id: 'conv-new-title', name: 'title', autocomplete: 'off' });
  const newId = h('input', { id: 'conv-new-id', name: 'id', autocomplete: 'off', placeholder: 'optional', pattern: '[A-Za-z0-9_][A-Za-z0-9_.\\-]{0,127}' });
  const startBtn = h('button', { type: 'submit', id: 'conv-start' }, 'Start conversation');
  const form = h('form', { class: 'row', id: 'conv-new-form' },
    h('span', { class: 'conv-field' }, h('label', { for: 'conv-new-title' }, 'Title'), newTitle),
    h('span', { class: 'conv-field' }, h('label', { for: 'conv-new-id' }, 'Id'), newId), startBtn);
  const list = h('ul', { id: 'conversations', class: 'conv-tree conv-roots', 'aria-label': 'Conversations' });
  const more = h('p', { class: 'muted small', hidden: true }, 'Only the newest conversations are shown.');
  main.append(
    h('h1', {}, 'Conversations'),
    hint,
    h('section', { class: 'panel', 'aria-labelledby': 'conv-new-title-h' }, h('h2', { id: 'conv-new-title-h' }, 'New conversation'), form),
    h('section', { 'aria-labelledby': 'conv-list-title' }, h('h2', { id: 'conv-list-title' }, 'Newest first'), list, more));

  const showNoModel = () => { hint.replaceChildren(noModel()); startBtn.disabled = true; };
  capable().then((ok) => { if (ok === false) showNoModel(); });

  async function load() {
    const { items, more: truncated } = await listAll();
    const { roots, kids } = tree(items);
    list.replaceChildren(...roots.map((c) => convItem(c, kids, 0, '')));
    if (!items.length) list.append(h('li', { class: 'muted' }, 'No conversations yet: start one above.'));
    more.hidden = !truncated;
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = {};
    if (newTitle.value.trim()) body.title = newTitle.value.trim();
    if (newId.value.trim()) body.id = newId.value.trim();
    try {
      const c = await post('/v1/conversations', body);
      location.hash = `#/conversations/${enc(c.id)}`;
    } catch (err) {
      if (isNoModel(err)) showNoModel(); else showError(err);
    }
  });

  await load();
  const refresh = throttle(() => load().catch(() => {}), 1000);
  const stop = watch('/v1/events', { onChange: refresh, onGap: refresh, onStatus: setLive });
  return { cleanup: stop };
}

export async function conversationPage(main, id) {
  const base = `/v1/conversations/${enc(id)}`;
  const tbase = `/v1/threads/${enc(id)}`;
  const st = {
    rec: null,
    status: null,
    mode: null,
    partial: '',
    queued: [], // texts sent queued, not yet in the thread
    aborted: [], // {after, text, li}: answers aborted mid-stream, which the thread does not keep
    model: true,
  };
  const ac = new AbortController();
  const stops = [() => ac.abort()];
  const changed = changes();

  // --- The layout ---
  const title = h('h1', { id: 'conv-title' }, id);
  const meta = h('p', { class: 'meta muted', id: 'conv-meta' });
  const statusEl = h('span', { id: 'conv-status', class: 'conv-badge badge' }, '…');
  const modeEl = h('span', { id: 'conv-mode', class: 'conv-badge badge' }, '…');
  const hint = h('div', { id: 'conv-hint' });
  const errorEl = h('p', { id: 'conv-error', class: 'msg-error', role: 'alert', hidden: true });
  // Not a live region: a screen reader would read every piece of the
  // stream; the stop is announced instead.
  const pending = h('ol', { id: 'conv-pending', class: 'msgs' });
  // The conversation goes on from its last compaction's summary: what
  // came before stays in the thread, folded away in this item.
  const foldSummary = h('summary');
  const foldList = h('ol', { class: 'msgs' });
  const foldDetails = h('details', { id: 'conv-before-compact' }, foldSummary, foldList);
  const fold = h('li', { class: 'conv-compacted' }, foldDetails);
  const msgs = messageList({
    base: tbase,
    ids: { scroller: 'conv-scroller', list: 'conv-messages', older: 'conv-older', newer: 'conv-newer', newest: 'conv-newest' },
    scrollerClass: 'scroller conv-scroller',
    empty: 'No messages yet: say something below.',
    after: [pending],
    arrange,
    // Scrolling up over the closed fold would read, and fold away, page
    // after page the reader does not see.
    holdOlder: () => fold.isConnected && !foldDetails.open,
    onAdded: (added) => { dropArrived(added); renderPending(); },
  });
  stops.push(msgs.cleanup);
  const scroller = msgs.scroller;

  const text = h('textarea', { id: 'conv-text', rows: 3, placeholder: 'Message (Enter sends, Shift+Enter a new line; “@async ” queues it)' });
  const queue = h('input', { type: 'checkbox', id: 'conv-queue' });
  const sendBtn = h('button', { type: 'submit', id: 'conv-send' }, 'Send');
  const abortBtn = h('button', { type: 'button', id: 'conv-abort', class: 'danger', disabled: true }, 'Abort');
  const forkBtn = h('button', { type: 'button', id: 'conv-fork' }, 'Fork');
  const compactBtn = h('button', { type: 'button', id: 'conv-compact' }, 'Compact');
  const form = h('form', { id: 'conv-form', class: 'compose conv-compose' },
    h('label', { for: 'conv-text' }, 'Message'), text,
    h('div', { class: 'row' }, sendBtn,
      h('label', { for: 'conv-queue', class: 'check' }, queue, ' Queue until the turn ends'),
      h('span', { class: 'spacer' }), abortBtn, forkBtn, compactBtn),
    h('p', { class: 'muted small' }, 'Fork and Compact take the text above, if any, as what to do next: the fork’s first message, or what to do after compacting.'));
  const subs = h('div', { id: 'conv-subagents' });

  main.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/conversations' }, 'Conversations'), ' / ', h('span', {}, id)),
    title, meta,
    h('p', { class: 'row conv-state' }, h('span', {}, 'Status'), statusEl, h('span', {}, 'Mode'), modeEl),
    hint,
    h('div', { class: 'conv-layout' },
      h('section', { class: 'conv-main', 'aria-labelledby': 'conv-title' }, scroller, errorEl, form),
      h('aside', { class: 'side', 'aria-label': 'Sub-agents' },
        h('section', { class: 'panel', 'aria-labelledby': 'conv-subs-title' }, h('h2', { id: 'conv-subs-title' }, 'Sub-agents'), subs))));

  const showNoModel = () => {
    st.model = false;
    hint.replaceChildren(noModel());
    for (const b of [sendBtn, abortBtn, forkBtn, compactBtn]) b.disabled = true;
    statusEl.textContent = 'not running';
    modeEl.textContent = 'none';
  };

  // --- The record ---
  async function loadRecord() {
    const r = await get(tbase);
    st.rec = r;
    if (!changed('record', r)) return;
    title.textContent = r.title || r.id;
    const parent = (r.labels || {})['loom.conversation.parent'];
    meta.replaceChildren(
      h('code', {}, r.id), ` · version ${r.version} · `,
      h('a', { href: `#/threads/${enc(r.id)}` }, 'its thread'),
      parent ? h('span', { id: 'conv-parent' }, ' · sub-agent of ', h('a', { href: `#/conversations/${enc(parent)}` }, parent)) : '',
      r.forked_from && r.forked_from.thread !== parent ? h('span', {}, ' · forked from ', h('a', { href: `#/conversations/${enc(r.forked_from.thread)}` }, r.forked_from.thread)) : '',
      ' · updated ', fmtTime(r.updated_at));
    document.title = `${r.title || r.id} · loom`;
  }

  // --- State ---
  const busy = () => !!st.status && (st.status.kind === 'streaming' || (st.mode && st.mode.kind !== 'normal'));
  function renderState() {
    if (!st.model || !st.status) return;
    statusEl.textContent = statusText(st.status);
    statusEl.dataset.kind = st.status.kind;
    statusEl.dataset.reason = st.status.reason || '';
    statusEl.className = `conv-badge badge ${st.status.kind === 'error' ? 'bad' : busy() ? 'busy' : 'ok'}`;
    modeEl.textContent = modeText(st.mode);
    modeEl.dataset.kind = (st.mode && st.mode.kind) || '';
    abortBtn.disabled = !busy();
  }

  // --- Messages: the thread's, a page at a time ---
  // arrange puts the answers aborted mid-stream (which the thread does not
  // keep) after the message they answered, and folds away what came
  // before the window's last compaction.
  function arrange(ms, lis) {
    const ghost = (a) => a.li || (a.li = h('li', { class: 'msg role-assistant conv-aborted' },
      h('div', { class: 'msg-head' }, h('span', { class: 'role' }, 'assistant'), h('span', { class: 'badge bad' }, 'aborted'),
        h('span', { class: 'muted' }, 'not kept in the thread')),
      h('div', { class: 'msg-body' }, h('p', { class: 'text' }, a.text))));
    const ghosts = (after) => st.aborted.filter((a) => a.after === after).map(ghost);
    let cut = -1;
    for (let i = ms.length - 1; i >= 0; i--) {
      if (ms[i].author_name === 'compact' && ms[i].role === 'user') { cut = i; break; }
    }
    const before = [], items = [];
    ms.forEach((m, i) => {
      const out = i < cut ? before : items;
      out.push(lis[i], ...ghosts(m.id));
    });
    if (!ms.length) items.push(...ghosts(''));
    if (before.length) {
      foldSummary.textContent = `${before.length} earlier message${before.length === 1 ? '' : 's'}, compacted into the summary below`;
      foldList.replaceChildren(...before);
      items.unshift(fold);
    }
    return items;
  }

  // renderPending shows what is not in the thread yet: the answer
  // streaming in, and the messages queued until the turn ends.
  function renderPending() {
    const items = [];
    if (st.partial) {
      items.push(h('li', { class: 'msg role-assistant conv-partial', id: 'conv-partial' },
        h('div', { class: 'msg-head' }, h('span', { class: 'role' }, 'assistant'), h('span', { class: 'badge' }, 'streaming')),
        h('div', { class: 'msg-body' }, h('p', { class: 'text' }, st.partial))));
    }
    for (const q of st.queued) {
      items.push(h('li', { class: 'msg role-user conv-queued' },
        h('div', { class: 'msg-head' }, h('span', { class: 'role' }, 'user'), h('span', { class: 'badge' }, 'queued'),
          h('span', { class: 'muted' }, 'sent when the turn ends')),
        h('div', { class: 'msg-body' }, h('p', { class: 'text' }, q))));
    }
    const stick = msgs.nearBottom();
    pending.replaceChildren(...items);
    if (stick) msgs.toBottom();
  }

  // A queued text leaves the queue once the thread has it as a user
  // message after the ones it had when it was queued.
  function dropArrived(added) {
    for (const m of added) {
      if (m.role !== 'user') continue;
      const t = (m.contents || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
      const i = st.queued.indexOf(t);
      if (i >= 0) st.queued.splice(i, 1);
    }
  }

  let chain = Promise.resolve();
  const serial = (f) => { chain = chain.then(f).catch(() => {}); return chain; };
  // refresh(true) also brings the reader down to the newest messages,
  // after they wrote.
  const refresh = (down) => serial(() => Promise.all([down ? msgs.toHead().then(msgs.toBottom) : msgs.refreshHead(), loadRecord()]));

  // --- Sub-agents: this conversation's, as a tree ---
  async function loadSubs() {
    const { items } = await listAll(5);
    const { kids } = tree(items);
    const mine = kids.get(id) || [];
    subs.replaceChildren(mine.length
      ? h('ul', { class: 'conv-tree conv-roots', id: 'conv-subtree', 'aria-label': 'Sub-agents' }, mine.map((k) => convItem(k, kids, 0, id)))
      : h('p', { class: 'muted' }, 'None started.'));
  }
  const refreshSubs = throttle(() => loadSubs().catch(() => {}), 500);

  // --- Commands ---
  async function command(body) {
    try {
      return await post(`${base}/commands`, body);
    } catch (e) {
      if (isNoModel(e)) showNoModel(); else showError(e);
      return null;
    }
  }

  async function send() {
    let t = text.value;
    if (!t.trim() || !st.model) return;
    let queued = queue.checked;
    if (t.startsWith('@async ')) { t = t.slice(7); queued = true; }
    const compact = /^@compact(\s|$)/.exec(t);
    text.value = '';
    if (compact) {
      await doCompact(t.slice(8).trim());
      return;
    }
    const wasBusy = busy();
    if (queued && wasBusy) { st.queued.push(t); renderPending(); }
    const r = await command({ command: 'send', text: t, queued });
    if (!r) {
      const i = st.queued.indexOf(t);
      if (i >= 0) { st.queued.splice(i, 1); renderPending(); }
      text.value = t;
      return;
    }
    errorEl.hidden = true;
    announce(queued && wasBusy ? 'Queued until the turn ends' : 'Sent');
    refresh(true);
  }

  async function doCompact(prompt) {
    const r = await command({ command: 'compact', text: prompt });
    if (r) { announce('Compacting'); refresh(true); }
  }

  form.addEventListener('submit', (e) => { e.preventDefault(); send(); });
  text.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  abortBtn.addEventListener('click', async () => {
    if (await command({ command: 'abort' })) announce('Aborted');
  });
  compactBtn.addEventListener('click', () => {
    const t = text.value.trim();
    text.value = '';
    doCompact(t);
  });
  forkBtn.addEventListener('click', async () => {
    const t = text.value.trim();
    const r = await command({ command: 'fork', text: t });
    if (!r || !r.fork) return;
    text.value = '';
    // The fork starts stopped with its prompt: it goes on with it.
    if (t) {
      try { await post(`/v1/conversations/${enc(r.fork)}/commands`, { command: 'continue' }); } catch (e) { showError(e); }
    }
    announce(`Forked as ${r.fork}`);
    location.hash = `#/conversations/${enc(r.fork)}`;
  });

  // --- Live: the conversation's events ---
  function onEvent(ev) {
    let d;
    try { d = JSON.parse(ev.data || '{}'); } catch { return; }
    const partial = st.partial;
    if (d.status) st.status = d.status;
    if (d.mode) st.mode = d.mode;
    let reload = false;
    switch (ev.event) {
      case 'state':
        st.partial = d.partial || '';
        reload = true; // a reconnect may have missed changes
        break;
      case 'content':
        // "" between blocks: the last block's text stays until the stop.
        if (d.partial) st.partial = d.partial;
        break;
      case 'stopped':
        if (d.status && d.status.reason === 'aborted' && partial) {
          // The thread does not keep an aborted block: it stays here,
          // marked, after the message it answered.
          const ms = msgs.messages();
          st.aborted.push({ after: ms.length ? ms[ms.length - 1].id : '', text: partial });
          st.partial = '';
          msgs.render();
        }
        reload = true;
        refreshSubs();
        announce(`The answer ${d.status && d.status.reason === 'aborted' ? 'was aborted' : 'is in'}`);
        break;
      case 'error':
        errorEl.textContent = d.error || 'The conversation failed.';
        errorEl.hidden = false;
        reload = true;
        break;
      case 'compacted':
        reload = true;
        announce('Compacted');
        break;
      case 'mode':
        reload = true;
        break;
      case 'spawned':
      case 'yielded':
        refreshSubs();
        break;
      case 'forked':
        if (d.thread) announce(`The agent forked the conversation as ${d.thread}`);
        break;
      default:
        break;
    }
    renderState();
    renderPending();
    if (reload) {
      // The answer streamed stays until the thread shows it.
      refresh().then(() => {
        if (st.partial && st.status && st.status.kind !== 'streaming') { st.partial = ''; renderPending(); }
      });
    }
  }

  async function follow() {
    let delay = 500;
    while (!ac.signal.aborted) {
      try {
        const res = await request('GET', `${base}/events`, { raw: true, signal: ac.signal, headers: { Accept: 'text/event-stream' } });
        setLive('live');
        delay = 500;
        for await (const ev of readEvents(res)) onEvent(ev);
        if (ac.signal.aborted) return;
        setLive('reconnecting');
        refresh();
      } catch (e) {
        if (ac.signal.aborted) return;
        if (isNoModel(e)) { showNoModel(); setLive('unavailable'); return; }
        if (e instanceof APIError && e.status === 404) { setLive('unavailable'); return; }
        setLive('reconnecting');
      }
      await new Promise((r) => { const t = setTimeout(r, delay); ac.signal.addEventListener('abort', () => { clearTimeout(t); r(); }, { once: true }); });
      delay = Math.min(delay * 2, 15000);
    }
  }

  // --- Start ---
  try {
    await loadRecord();
  } catch (e) {
    if (e instanceof APIError && e.status === 404) {
      main.replaceChildren(h('h1', {}, 'Conversation not found'),
        h('p', {}, 'There is no conversation ', h('code', {}, id), '. ', h('a', { href: '#/conversations' }, 'All conversations')));
      return null;
    }
    throw e;
  }
  // The conversation itself: 404 when the thread is not one, 501 when the
  // server has no model (its messages still show).
  try {
    const c = await get(base);
    st.status = c.status;
    st.mode = c.mode;
    st.partial = c.partial || '';
  } catch (e) {
    if (isNoModel(e)) {
      showNoModel();
    } else if (e instanceof APIError && e.status === 404) {
      main.replaceChildren(h('h1', {}, 'Not a conversation'),
        h('p', {}, 'The thread ', h('a', { href: `#/threads/${enc(id)}` }, id), ' is not a live conversation’s.'));
      return null;
    } else {
      throw e;
    }
  }
  if (st.model && (await capable()) === false) showNoModel();
  renderState();
  await Promise.all([msgs.loadNewest(), loadSubs().catch(showError)]);
  if (st.model) follow();
  return { cleanup() { stops.forEach((f) => f()); setLive(''); document.title = 'loom'; } };
}
