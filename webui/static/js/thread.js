// The thread page: the messages a page at a time (older ones as the reader
// scrolls up, in a window of at most WINDOW messages however long the
// thread), any past version, the fork tree, the history timeline (with
// diffs between versions), checkpoints, forks, export and runs of the agent
// where the server has a model; live from the thread's change feed.

import { get, post, request, watch, readEvents, APIError } from './api.js';
import { h, fmtTime, enc, short, announce, showError, confirmDialog, throttle, setLive } from './dom.js';
import { message, resultsOf } from './render.js';
import { forkTree, diffHash } from './forktree.js';

const PAGE = 50;
// WINDOW is the most messages the page holds at once (one more page while
// one is read); EDGE is how near an end of the window, in pixels, the next
// page is read.
const WINDOW = 300;
const EDGE = 400;

export async function threadPage(main, id, params) {
  const base = `/v1/threads/${enc(id)}`;
  const st = {
    rec: null,
    version: +(params.get('v') || 0), // 0: the head
    msgs: [], // the window's messages, oldest first
    pages: [], // the window, a page at a time: {msgs}
    below: [], // the pages dropped below the window: {before, n, first}, nearest last
    hasOlder: false,
    loading: false,
    history: [],
    histNext: null,
    gen: 0, // bumped when the messages shown are replaced, to drop stale answers
    keys: {}, // what each part shows, so that it is redrawn only when that changes
  };
  // changed reports whether part would now show other data than it does;
  // redrawing only then keeps the keyboard focus where it is.
  const changed = (part, data) => {
    const k = JSON.stringify(data);
    if (st.keys[part] === k) return false;
    st.keys[part] = k;
    return true;
  };
  const stops = [];

  // --- The layout ---
  const title = h('h1', { id: 'thread-title' }, id);
  const meta = h('p', { class: 'meta muted', id: 'thread-meta' });
  const withHistory = h('input', { type: 'checkbox', id: 'export-history' });
  const exportBtn = h('button', { type: 'button', id: 'export' }, 'Export');
  const banner = h('div', { class: 'past-banner', id: 'past-banner', hidden: true });
  const olderBtn = h('button', { type: 'button', id: 'load-older', class: 'link', hidden: true }, 'Load older messages');
  const list = h('ol', { id: 'messages', class: 'msgs' });
  const newerBtn = h('button', { type: 'button', id: 'load-newer', class: 'link' }, 'Load newer messages');
  const newestBtn = h('button', { type: 'button', id: 'jump-newest', class: 'link' }, 'Jump to the newest');
  const newer = h('div', { class: 'row newer', hidden: true }, newerBtn, newestBtn);
  const scroller = h('div', { class: 'scroller', id: 'scroller', tabindex: 0, role: 'region', 'aria-label': 'Messages' }, olderBtn, list, newer);

  const roleSel = h('select', { id: 'append-role' }, ['user', 'assistant', 'system'].map((r) => h('option', { value: r }, r)));
  const appendText = h('textarea', { id: 'append-text', rows: 2, required: true });
  const appendForm = h('form', { id: 'append-form', class: 'compose' },
    h('label', { for: 'append-role' }, 'Role'), roleSel,
    h('label', { for: 'append-text' }, 'Message'), appendText,
    h('button', { type: 'submit' }, 'Append'));

  const runText = h('textarea', { id: 'run-text', rows: 2 });
  const runBtn = h('button', { type: 'submit', id: 'run-button' }, 'Run agent');
  const runOut = h('div', { id: 'run-output', class: 'run-output', 'aria-live': 'polite', hidden: true });
  const runForm = h('form', { id: 'run-form', class: 'compose' },
    h('label', { for: 'run-text' }, 'Ask the agent'), runText, runBtn);

  // The run panel offers the form only where the server can run an agent
  // (GET /v1/server says so); elsewhere it says how to get a model.
  const noModel = h('p', { id: 'run-unavailable', class: 'note', hidden: true },
    'This server has no model: start ', h('code', {}, 'loom serve'), ' with ', h('code', {}, '--provider scripted'),
    ' (a demo model, no key) or ', h('code', {}, '--provider openai'), ', ', h('code', {}, 'responses'), ' or ', h('code', {}, 'anthropic'),
    ' with its key in the environment.');
  const runPanel = h('details', { class: 'panel', id: 'run-panel', open: true }, h('summary', {}, 'Run the agent'), noModel, runForm, runOut);

  const writeTools = h('div', { class: 'write-tools' },
    runPanel,
    h('details', { class: 'panel' }, h('summary', {}, 'Append a message'), appendForm));

  const treeBox = h('div', { id: 'fork-tree', class: 'tree-box' });
  const histList = h('ol', { id: 'history', class: 'timeline' });
  const histMore = h('button', { type: 'button', class: 'link', id: 'history-older', hidden: true }, 'Older versions');
  const compareBtn = h('button', { type: 'button', id: 'compare', class: 'small', disabled: true }, 'Compare');
  const compareHint = h('span', { class: 'muted small', id: 'compare-hint' }, 'Tick two versions to compare them.');
  const compareRow = h('div', { class: 'row compare' }, compareBtn, compareHint);
  const cpList = h('ul', { id: 'checkpoints', class: 'checkpoints' });
  const cpName = h('input', { id: 'cp-name', name: 'name', required: true, maxlength: 128, autocomplete: 'off' });
  const cpForm = h('form', { id: 'cp-form', class: 'row' }, h('label', { for: 'cp-name' }, 'Name'), cpName, h('button', { type: 'submit' }, 'Create checkpoint'));

  main.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/' }, 'Threads'), ' / ', h('span', {}, id)),
    h('div', { class: 'thread-head' },
      h('div', {}, title, meta),
      h('div', { class: 'row' }, exportBtn, h('label', { for: 'export-history', class: 'check' }, withHistory, ' with history'))),
    h('div', { class: 'thread-layout' },
      h('section', { class: 'conversation', 'aria-labelledby': 'thread-title' }, banner, scroller, writeTools),
      h('aside', { class: 'side', 'aria-label': 'Forks, history and checkpoints' },
        h('section', { class: 'panel', 'aria-labelledby': 'forks-title' }, h('h2', { id: 'forks-title' }, 'Fork tree'), treeBox),
        h('section', { class: 'panel', 'aria-labelledby': 'history-title' }, h('h2', { id: 'history-title' }, 'History'), histList, histMore, compareRow),
        h('section', { class: 'panel', 'aria-labelledby': 'cp-title' }, h('h2', { id: 'cp-title' }, 'Checkpoints'), cpList, cpForm))));

  // --- The record ---
  async function loadRecord() {
    st.rec = await get(base);
    const r = st.rec;
    if (!changed('record', r)) return;
    title.textContent = r.title || r.id;
    const labels = Object.entries(r.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');
    meta.replaceChildren(
      h('code', {}, r.id), ` · ${r.kind} · version ${r.version}`,
      labels ? ` · ${labels}` : '',
      r.forked_from ? h('span', {}, ' · forked from ', h('a', { href: `#/threads/${enc(r.forked_from.thread)}` }, r.forked_from.thread),
        r.forked_from.message ? ` at ${short(r.forked_from.message, 8)}` : '') : '',
      ' · updated ', fmtTime(r.updated_at));
    document.title = `${r.title || r.id} · loom`;
  }

  // --- Messages ---
  // The list is a window over the thread: at most WINDOW messages are in
  // the page at once, read a page at a time as the reader scrolls up or
  // back down. The pages dropped above the window are read again with
  // before = the window's first message; those dropped below it are kept
  // as {before, n, first} (how to read them again, and what they began
  // with, to check that they still fit), nearest last.
  function msgQuery(extra) {
    const q = new URLSearchParams({ limit: PAGE });
    for (const [k, v] of Object.entries(extra || {})) if (v) q.set(k, v);
    if (st.version) q.set('version', st.version);
    return `${base}/messages?${q}`;
  }

  function forkButton(m) {
    if (!m.id) return null;
    // The accessible name begins with the visible text, so that voice
    // control users can say what they see.
    return h('button', { type: 'button', class: 'small fork-here', 'aria-label': `Fork here at message ${m.id}`,
      on: { click: () => forkAt(m.id) } }, 'Fork here');
  }

  // Rendered messages by id, with what their look depends on beyond
  // themselves (which of their calls have results, which of their results
  // have calls shown): a render builds only what is new or changed, so a
  // change on a long thread costs what changed, not what is loaded.
  let rendered = new Map();
  function signature(m, results, calls) {
    let sig = '';
    for (const c of m.contents || []) {
      if (c.type === 'function_call') sig += results.has(c.call_id) ? 'r' : '-';
      else if (c.type === 'function_result') sig += calls.has(c.call_id) ? 'c' : '-';
    }
    return sig;
  }

  function render() {
    st.msgs = st.pages.flatMap((p) => p.msgs);
    const open = new Set([...list.querySelectorAll('details[open][data-key]')].map((d) => d.dataset.key));
    const results = resultsOf(st.msgs);
    const calls = new Set();
    for (const m of st.msgs) for (const c of m.contents || []) if (c.type === 'function_call') calls.add(c.call_id);
    const shown = new Set();
    const keep = new Map();
    const items = st.msgs.map((m) => {
      const sig = signature(m, results, calls);
      let e = m.id ? rendered.get(m.id) : null;
      if (e && e.sig === sig) {
        for (const c of m.contents || []) if (c.type === 'function_call' && results.has(c.call_id)) shown.add(c.call_id);
      } else {
        const li = message(m, results, shown, forkButton(m));
        li.querySelectorAll('details').forEach((d, i) => {
          d.dataset.key = `${m.id}:${i}`;
          if (open.has(d.dataset.key)) d.open = true;
        });
        e = { sig, li };
      }
      if (m.id) keep.set(m.id, e);
      return e.li;
    });
    rendered = keep;
    // Only what came or went is touched: a page read at one end costs the
    // layout of that page, not of the whole window.
    const want = new Set(items);
    for (const c of [...list.children]) if (!want.has(c)) c.remove();
    let at = list.firstChild;
    for (const li of items) {
      if (at === li) at = at.nextSibling;
      else list.insertBefore(li, at);
    }
    if (!st.msgs.length) list.append(h('li', { class: 'muted empty' }, 'No messages yet.'));
    olderBtn.hidden = !st.hasOlder;
    newer.hidden = !st.below.length;
  }

  // anchor notes the first message in view and where it is, so that the
  // view can be put back after messages are added or dropped around it.
  function anchor() {
    const top = scroller.getBoundingClientRect().top;
    for (const li of list.children) {
      const r = li.getBoundingClientRect();
      if (r.bottom > top) return { li, off: r.top - top };
    }
    return null;
  }
  function restore(a) {
    if (!a || !a.li.isConnected) return;
    scroller.scrollTop += a.li.getBoundingClientRect().top - scroller.getBoundingClientRect().top - a.off;
  }
  const count = () => st.pages.reduce((n, p) => n + p.msgs.length, 0);
  // olderThan says whether messages come before a page read with limit.
  const olderThan = (res, limit) => !!res.next_before || res.messages.length === limit;

  // dropBelow takes the window's newest pages out of the page while it
  // holds too many messages; dropAbove its oldest.
  function dropBelow() {
    while (count() > WINDOW && st.pages.length > 1) {
      const p = st.pages.pop();
      const next = st.below[st.below.length - 1];
      st.below.push({ before: next ? next.first : '', n: p.msgs.length, first: p.msgs[0].id });
    }
  }
  function dropAbove() {
    while (count() > WINDOW && st.pages.length > 1) {
      st.pages.shift();
      st.hasOlder = true;
    }
  }

  const nearBottom = () => !st.below.length && scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;

  async function loadNewest() {
    const gen = ++st.gen;
    const res = await get(msgQuery());
    if (gen !== st.gen) return;
    st.pages = [{ msgs: res.messages }];
    st.below = [];
    st.hasOlder = olderThan(res, PAGE);
    render();
    scroller.scrollTop = scroller.scrollHeight;
  }

  async function loadOlder() {
    if (!st.hasOlder || st.loading || !st.msgs.length) return;
    st.loading = true;
    const gen = st.gen;
    try {
      const res = await get(msgQuery({ before: st.msgs[0].id }));
      if (gen !== st.gen) return;
      const a = anchor();
      st.hasOlder = olderThan(res, PAGE);
      if (res.messages.length) st.pages.unshift({ msgs: res.messages });
      dropBelow();
      render();
      restore(a);
    } finally {
      st.loading = false;
    }
    edge();
  }

  // loadNewer reads again the page just below the window; when it no
  // longer fits there (the head moved on by more than a page, or
  // elsewhere), the newest page is read afresh.
  async function loadNewer() {
    if (!st.below.length || st.loading) return;
    st.loading = true;
    const gen = st.gen;
    let reset = false;
    try {
      const e = st.below[st.below.length - 1];
      const res = await get(msgQuery({ before: e.before, limit: e.n }));
      if (gen !== st.gen) return;
      const last = st.msgs[st.msgs.length - 1];
      let msgs = res.messages;
      const i = last ? msgs.findIndex((m) => m.id === last.id) : -1;
      if (i >= 0) msgs = msgs.slice(i + 1);
      else reset = !msgs.length || msgs[0].id !== e.first;
      if (!reset) {
        st.below.pop();
        const a = anchor();
        if (msgs.length) st.pages.push({ msgs });
        dropAbove();
        render();
        restore(a);
      }
    } finally {
      st.loading = false;
    }
    if (reset) await loadNewest();
    else edge();
  }

  // edge reads more when the view is near either end of the window.
  function edge() {
    if (st.loading) return;
    const { scrollTop, scrollHeight, clientHeight } = scroller;
    if (st.hasOlder && scrollTop < EDGE) loadOlder().catch(showError);
    else if (st.below.length && scrollHeight - scrollTop - clientHeight < EDGE) loadNewer().catch(showError);
  }
  scroller.addEventListener('scroll', edge, { passive: true });

  // refreshHead brings the messages shown up to the head: the new ones are
  // added, or, when the head moved elsewhere (a rollback), the newest page
  // is read afresh. While the reader is back up the thread, with the
  // newest messages out of the window, nothing moves: they are read when
  // the reader comes back down.
  async function refreshHead() {
    if (st.version || st.below.length) return;
    const gen = st.gen;
    const res = await get(msgQuery());
    if (gen !== st.gen || st.below.length) return;
    const last = st.msgs.length ? st.msgs[st.msgs.length - 1].id : null;
    const i = last ? res.messages.findIndex((m) => m.id === last) : -1;
    const stick = nearBottom();
    if (i >= 0) {
      const have = new Set(st.msgs.map((m) => m.id));
      const added = res.messages.slice(i + 1).filter((m) => !have.has(m.id));
      if (!added.length) return;
      st.pages.push({ msgs: added });
      dropAbove();
    } else {
      st.gen++;
      st.pages = [{ msgs: res.messages }];
      st.hasOlder = olderThan(res, PAGE);
    }
    const a = stick || i < 0 ? null : anchor();
    render();
    if (a) restore(a); else scroller.scrollTop = scroller.scrollHeight;
  }

  // toHead shows the newest messages after the reader wrote some: read
  // afresh when the reader was back up the thread.
  const toHead = () => (st.below.length ? loadNewest() : refreshHead());

  olderBtn.addEventListener('click', () => loadOlder().catch(showError));
  newerBtn.addEventListener('click', () => loadNewer().catch(showError));
  newestBtn.addEventListener('click', () => loadNewest().catch(showError));

  // --- Versions ---
  function renderBanner() {
    if (!st.version) { banner.hidden = true; writeTools.hidden = false; return; }
    const e = st.history.find((x) => x.version === st.version);
    banner.replaceChildren(
      h('strong', {}, `Past version ${st.version}`),
      e ? h('span', {}, ` (${e.op}, `, fmtTime(e.time), ')') : '',
      ': the thread as it was then, not its head. ',
      h('a', { href: `#/threads/${enc(id)}`, id: 'back-to-head' }, 'Back to the head'));
    banner.hidden = false;
    writeTools.hidden = true;
  }

  // The versions ticked to compare, at most two; the newest ticked last.
  const picked = [];
  function renderCompare() {
    compareBtn.disabled = picked.length !== 2;
    compareHint.textContent = picked.length === 2 ? `v${Math.min(...picked)} with v${Math.max(...picked)}` : 'Tick two versions to compare them.';
    for (const c of histList.querySelectorAll('input[type=checkbox]')) c.checked = picked.includes(+c.value);
  }
  compareBtn.addEventListener('click', () => {
    if (picked.length !== 2) return;
    location.hash = diffHash(id, Math.min(...picked), id, Math.max(...picked));
  });

  function renderHistory() {
    const selected = st.version || (st.rec && st.rec.version);
    histMore.hidden = st.histNext == null;
    if (!changed('history', [st.history, selected, st.rec && st.rec.version])) return;
    const head = st.rec && st.rec.version;
    histList.replaceChildren(...st.history.map((e) => {
      const cur = e.version === selected;
      const isHead = e.version === head;
      const tick = h('input', { type: 'checkbox', value: e.version, class: 'pick', 'aria-label': `Compare v${e.version}`,
        on: { change: (ev) => {
          const i = picked.indexOf(e.version);
          if (ev.target.checked && i < 0) picked.push(e.version);
          if (!ev.target.checked && i >= 0) picked.splice(i, 1);
          while (picked.length > 2) picked.shift();
          renderCompare();
        } } });
      return h('li', { class: cur ? 'current' : '', dataset: { version: e.version } },
        tick,
        h('a', { href: isHead ? `#/threads/${enc(id)}` : `#/threads/${enc(id)}?v=${e.version}`, class: 'version', 'aria-current': cur ? 'true' : null, dataset: { version: e.version } },
          h('span', { class: 'v' }, `v${e.version}`), ' ', h('span', { class: 'op' }, e.op), isHead ? h('span', { class: 'badge ok' }, 'head') : '', ' ', fmtTime(e.time)),
        isHead ? null : h('a', { href: diffHash(id, e.version, id, head), class: 'diff-head small', 'aria-label': `diff with head: v${e.version} with v${head}` }, 'diff with head'));
    }));
    renderCompare();
  }

  async function loadHistory(more) {
    const q = new URLSearchParams({ limit: PAGE });
    if (more && st.histNext != null) q.set('before', st.histNext);
    const res = await get(`${base}/history?${q}`);
    st.history = more ? st.history.concat(res.entries) : res.entries;
    st.histNext = res.next_before ?? null;
    renderHistory();
    renderBanner();
  }
  histMore.addEventListener('click', () => loadHistory(true).catch(showError));

  // --- Checkpoints ---
  async function loadCheckpoints() {
    const res = await get(`${base}/checkpoints`);
    if (!changed('checkpoints', res.checkpoints)) return;
    cpList.replaceChildren(...res.checkpoints.map((c) => h('li', { dataset: { name: c.name } },
      h('span', { class: 'cp-name' }, c.name), ' ', h('span', { class: 'muted' }, `v${c.version}`), ' ', fmtTime(c.created_at), ' ',
      h('button', { type: 'button', class: 'small', 'aria-label': `Roll back to ${c.name}`, on: { click: () => rollback(c.name) } }, 'Roll back'))));
    if (!res.checkpoints.length) cpList.append(h('li', { class: 'muted' }, 'No checkpoints.'));
  }

  async function rollback(name) {
    const ok = await confirmDialog('Roll back?', `Move the head of ${id} back to checkpoint “${name}”? Later messages leave the head; they stay in the history.`, 'Roll back');
    if (!ok) return;
    try {
      await post(`${base}/rollback`, { checkpoint: name });
      announce(`Rolled back to ${name}`);
      if (st.version) location.hash = `#/threads/${enc(id)}`;
      await refreshAll();
    } catch (e) { showError(e); }
  }

  cpForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      await post(`${base}/checkpoints`, { name: cpName.value.trim() });
      announce(`Checkpoint ${cpName.value.trim()} created`);
      cpName.value = '';
      await loadCheckpoints();
    } catch (err) { showError(err); }
  });

  // --- The fork family ---
  async function loadFamily() {
    let threads, partial = false;
    try {
      threads = (await get(`${base}/family`)).threads;
    } catch (e) {
      if (!(e instanceof APIError) || e.status !== 404) throw e;
      // A server without the family route: this thread and its ancestors.
      partial = true;
      threads = [st.rec];
      for (let t = st.rec; t && t.forked_from && threads.length < 20;) {
        try { t = await get(`/v1/threads/${enc(t.forked_from.thread)}`); } catch { break; }
        threads.unshift(t);
      }
    }
    if (!changed('family', threads)) return;
    treeBox.replaceChildren(forkTree(threads, id),
      partial ? h('p', { class: 'muted small' }, 'Only this thread’s ancestors: the server does not list fork families.') : '');
  }

  // forkAt forks at a message; the fork's title says where it comes from,
  // so that the list tells it from its parent.
  async function forkAt(msgId) {
    try {
      const v = st.version || st.rec.version;
      const parent = (st.rec.title || id).slice(0, 200);
      const body = { at: msgId, title: `${parent} · fork at v${v}` };
      if (st.version) body.version = st.version;
      const t = await post(`${base}/fork`, body);
      announce(`Forked as ${t.id}`);
      location.hash = `#/threads/${enc(t.id)}`;
    } catch (e) { showError(e); }
  }

  // --- What the server can do ---
  // A server without GET /v1/server (older) is taken to run agents: its
  // answer to a run says when it cannot.
  async function loadServer() {
    const srv = await get('/v1/server');
    if (srv && srv.runs === false) {
      runForm.hidden = true;
      noModel.hidden = false;
      runPanel.classList.add('no-model');
    }
  }

  // --- Writes ---
  appendForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = appendText.value;
    if (!text.trim()) return;
    try {
      await post(`${base}/messages`, { messages: [{ role: roleSel.value, contents: [{ type: 'text', text }] }] });
      appendText.value = '';
      await Promise.all([toHead(), loadRecord().then(() => loadHistory())]);
    } catch (err) { showError(err); }
  });

  runForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = runText.value.trim();
    runBtn.disabled = true;
    runOut.hidden = false;
    runOut.className = 'run-output running';
    const answer = h('p', { class: 'text', id: 'run-answer' });
    const reasoning = h('p', { class: 'reasoning muted' });
    const status = h('p', { class: 'muted', id: 'run-status' }, 'Running…');
    runOut.replaceChildren(reasoning, answer, status);
    try {
      const body = { stream: true };
      if (text) body.input = text;
      const res = await request('POST', `${base}/runs`, { body, raw: true, headers: { Accept: 'text/event-stream' } });
      if (!(res.headers.get('Content-Type') || '').startsWith('text/event-stream')) {
        const r = await res.json();
        answer.textContent = r.text;
        status.textContent = 'Done.';
      } else {
        for await (const ev of readEvents(res)) {
          const d = ev.data ? JSON.parse(ev.data) : {};
          if (ev.event === 'update') {
            if (d.text) answer.append(d.text);
            if (d.reasoning) reasoning.append(d.reasoning);
            if (d.call && d.call.name) status.textContent = `Calling ${d.call.name}…`;
          } else if (ev.event === 'step') {
            refreshHead().catch(() => {});
          } else if (ev.event === 'result') {
            if (!answer.textContent) answer.textContent = d.text || '';
            status.textContent = d.pending && d.pending.length ? `Stopped: ${d.pending.length} tool call(s) wait for approval.` : 'Done.';
          } else if (ev.event === 'error') {
            status.textContent = `Error: ${d.message || d.code || 'the run failed'}`;
            runOut.classList.add('failed');
          }
        }
      }
      runText.value = '';
      announce('The run finished');
    } catch (err) {
      status.textContent = `Error: ${err.message}`;
      runOut.classList.add('failed');
    } finally {
      runBtn.disabled = false;
      runOut.classList.remove('running');
      await Promise.all([toHead(), loadRecord().then(() => loadHistory())]).catch(() => {});
    }
  });

  exportBtn.addEventListener('click', async () => {
    try {
      const res = await request('GET', `${base}/export${withHistory.checked ? '?history=true' : ''}`, { raw: true });
      const url = URL.createObjectURL(await res.blob());
      const a = h('a', { href: url, download: `${id}.loom.json` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 5000);
      announce('Export downloaded');
    } catch (e) { showError(e); }
  });

  // --- Live ---
  // Refreshes run one after another, so that two never add the same
  // messages.
  let chain = Promise.resolve();
  const serial = (f) => { chain = chain.then(f).catch(() => {}); return chain; };
  function refreshAll() {
    return serial(async () => {
      await loadRecord();
      // Not the family: a change of this thread cannot change it, and it
      // costs a read of every record of the tenant.
      await Promise.all([refreshHead(), loadHistory(), loadCheckpoints()]);
    });
  }
  const kinds = new Set();
  const flush = throttle(() => {
    const k = [...kinds];
    kinds.clear();
    if (k.includes('delete')) {
      showError(new Error(`Thread ${id} was deleted.`));
    } else if (k.every((x) => x === 'checkpoint')) {
      serial(loadCheckpoints);
    } else {
      refreshAll();
    }
  }, 250);
  const onChange = (ev) => { kinds.add(ev.kind); flush(); };
  // Forks are made on other threads, which this thread's feed does not
  // tell of: the tree is read again whenever the tab comes back into view.
  const onVisible = () => { if (document.visibilityState === 'visible') loadFamily().catch(() => {}); };
  document.addEventListener('visibilitychange', onVisible);
  stops.push(() => document.removeEventListener('visibilitychange', onVisible));

  // --- Start ---
  try {
    await loadRecord();
  } catch (e) {
    if (e instanceof APIError && e.status === 404) {
      main.replaceChildren(h('h1', {}, 'Thread not found'), h('p', {}, 'There is no thread ', h('code', {}, id), '. ', h('a', { href: '#/' }, 'All threads')));
      return null;
    }
    throw e;
  }
  if (st.version) renderBanner();
  loadServer().catch(() => {});
  await Promise.all([loadNewest(), loadHistory(), loadCheckpoints(), loadFamily().catch(showError)]);

  // One feed per page: a browser keeps only six connections to a server
  // over HTTP/1.1, for all its tabs.
  // It resumes after the version just read, so nothing written in between
  // is missed.
  stops.push(watch(`${base}/events`, { lastId: String(st.rec.version), onChange, onGap: refreshAll, onStatus: setLive }));

  return {
    cleanup() { stops.forEach((f) => f()); document.title = 'loom'; },
    // update follows a change of ?v= on the same thread: time travel.
    async update(p) {
      st.version = +(p.get('v') || 0);
      writeTools.hidden = !!st.version;
      renderHistory();
      renderBanner();
      await loadNewest().catch(showError);
    },
  };
}
