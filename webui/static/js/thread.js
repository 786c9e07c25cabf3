// The thread page: the messages a page at a time (older ones as the reader
// scrolls up, in a window that keeps the page small however long the
// thread: msglist.js), any past version, the fork tree, the history
// timeline (with diffs between versions), checkpoints, forks, export and
// runs of the agent where the server has a model; live from the thread's
// change feed.

import { get, post, request, watch, readEvents, APIError } from './api.js';
import { h, fmtTime, enc, short, announce, showError, confirmDialog, throttle, setLive, changes } from './dom.js';
import { forkTree, diffHash } from './forktree.js';
import { messageList } from './msglist.js';

const PAGE = 50;

export async function threadPage(main, id, params) {
  const base = `/v1/threads/${enc(id)}`;
  const st = {
    rec: null,
    version: +(params.get('v') || 0), // 0: the head
    history: [],
    histNext: null,
  };
  const changed = changes();
  const stops = [];

  // --- The layout ---
  const title = h('h1', { id: 'thread-title' }, id);
  const meta = h('p', { class: 'meta muted', id: 'thread-meta' });
  const withHistory = h('input', { type: 'checkbox', id: 'export-history' });
  const exportBtn = h('button', { type: 'button', id: 'export' }, 'Export');
  const banner = h('div', { class: 'past-banner', id: 'past-banner', hidden: true });
  // The accessible name of a fork button begins with its visible text,
  // so that voice control users can say what they see.
  const forkButton = (m) => (m.id ? h('button', { type: 'button', class: 'small fork-here', 'aria-label': `Fork here at message ${m.id}`,
    on: { click: () => forkAt(m.id) } }, 'Fork here') : null);
  const msgs = messageList({ base, version: st.version, actions: forkButton });
  stops.push(msgs.cleanup);

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
      h('section', { class: 'conversation', 'aria-labelledby': 'thread-title' }, banner, msgs.scroller, writeTools),
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
      ' · updated ', fmtTime(r.updated_at),
      // Retention: when GC deletes the thread if nothing changes it.
      r.expires_at ? h('span', { class: 'expires', title: 'deleted then unless it changes (retention: loom.ttl or the server\'s --ttl)' },
        ' · expires ', fmtTime(r.expires_at)) : '');
    document.title = `${r.title || r.id} · loom`;
  }

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
      await Promise.all([msgs.toHead(), loadRecord().then(() => loadHistory())]);
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
            msgs.refreshHead().catch(() => {});
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
      await Promise.all([msgs.toHead(), loadRecord().then(() => loadHistory())]).catch(() => {});
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
      await Promise.all([msgs.refreshHead(), loadHistory(), loadCheckpoints()]);
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
  await Promise.all([msgs.loadNewest(), loadHistory(), loadCheckpoints(), loadFamily().catch(showError)]);

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
      await msgs.setVersion(st.version).catch(showError);
    },
  };
}
