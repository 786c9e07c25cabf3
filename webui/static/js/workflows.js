// The workflows pages: the list (and a form that starts a workflow the
// server has registered), and one workflow — its execution state at any
// version, its progress step by step (GET /v1/workflows/{id}/events),
// input for its waiting steps, checkpoints, restore and fork, and what to
// do when its runner is gone (resume it, when the server can); live from
// its progress stream.

import { get, post, watch, APIError } from './api.js';
import { h, fmtTime, enc, json, announce, showError, confirmDialog, throttle, setLive, changes } from './dom.js';

const PAGE = 50;

// The label that names the registered workflow a workflow was started as.
const NAME_LABEL = 'loom.workflow.name';

// definitions reads the workflows the server can start, by name; none when
// it cannot say.
async function definitions() {
  try {
    return (await get('/v1/workflow-definitions')).definitions || [];
  } catch (e) {
    if (e instanceof APIError && (e.status === 404 || e.status === 405)) return [];
    throw e;
  }
}

// startForm is the form that starts a registered workflow.
function startForm(defs) {
  const name = h('select', { id: 'start-name', name: 'name' }, defs.map((d) => h('option', { value: d.name }, d.title ? `${d.name} — ${d.title}` : d.name)));
  const about = h('p', { class: 'muted small', id: 'start-about' });
  const sayAbout = () => { const d = defs.find((x) => x.name === name.value); about.textContent = d && d.description ? d.description : ''; };
  name.addEventListener('change', sayAbout);
  sayAbout();
  const wid = h('input', { id: 'start-id', name: 'id', autocomplete: 'off', placeholder: 'optional', maxlength: 95, pattern: '[A-Za-z0-9_][A-Za-z0-9_.\\-]{0,94}' });
  const input = h('textarea', { id: 'start-input', name: 'input', rows: 2, placeholder: 'optional, JSON', 'aria-describedby': 'start-about start-error' });
  const err = h('p', { class: 'msg-error small', id: 'start-error', 'aria-live': 'polite' });
  const btn = h('button', { type: 'submit' }, 'Start');
  const form = h('form', { id: 'start-form', class: 'wf-start' },
    h('label', { for: 'start-name' }, 'Workflow'), name, about,
    h('label', { for: 'start-id' }, 'Id'), wid,
    h('label', { for: 'start-input' }, 'Input'), input, err, btn);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (!form.reportValidity()) return;
    const body = { name: name.value };
    if (wid.value.trim()) body.id = wid.value.trim();
    if (input.value.trim()) {
      try {
        body.input = JSON.parse(input.value);
      } catch (x) {
        input.setAttribute('aria-invalid', 'true');
        err.textContent = `Not JSON: ${x.message}`;
        input.focus();
        return;
      }
    }
    input.removeAttribute('aria-invalid');
    err.textContent = '';
    btn.disabled = true;
    try {
      const w = await post('/v1/workflows', body);
      announce(`Started ${w.id}`);
      location.hash = `#/workflows/${enc(w.id)}`;
    } catch (x) {
      err.textContent = x.message;
    } finally {
      btn.disabled = false;
    }
  });
  return h('section', { class: 'panel', 'aria-labelledby': 'start-title' }, h('h2', { id: 'start-title' }, 'Start a workflow'), form);
}

// progressItem shows one event of a workflow's progress.
function progressItem(ev) {
  const what = ev.kind.replace(/^(step|workflow)_/, '');
  const kindClass = { started: 'running', done: 'done', waiting: 'waiting', failed: 'failed', interrupted: 'interrupted', moved: 'pending' }[what] || 'pending';
  return h('li', { dataset: { cursor: ev.cursor, kind: ev.kind } },
    fmtTime(ev.time), ' ',
    ev.step ? h('code', {}, ev.step.id) : h('strong', {}, 'workflow'), ' ',
    h('span', { class: `status status-${kindClass}` }, what),
    ev.step && ev.step.error ? [' ', h('span', { class: 'msg-error' }, ev.step.error)] : null,
    ev.error ? [' ', h('span', { class: 'msg-error' }, ev.error)] : null);
}

const status = (s) => h('span', { class: `status status-${s}` }, s);

// stalledBadge marks a workflow that says running but that no runner holds.
const stalledBadge = (st) => h('span', { class: 'status status-stalled', title: `no runner since ${st.since}` }, 'stalled');

export async function workflowsPage(main) {
  const cursors = [''];
  let page = 0;
  const tbody = h('tbody');
  const prev = h('button', { type: 'button' }, '← Previous');
  const next = h('button', { type: 'button' }, 'Next →');
  // On a phone the round and the sub-threads are left out (wf-wide).
  const cols = [['Workflow'], ['Title'], ['Status'], ['Round', 'wf-wide'], ['Sub-threads', 'wf-wide'], ['Updated']];
  main.append(h('h1', {}, 'Workflows'),
    h('table', { class: 'list', id: 'workflows' },
      h('caption', { class: 'visually-hidden' }, 'Workflows'),
      h('thead', {}, h('tr', {}, cols.map(([c, cls]) => h('th', { scope: 'col', class: cls }, c)))),
      tbody),
    h('nav', { class: 'row pager', 'aria-label': 'Pages' }, prev, next));
  async function load() {
    const q = new URLSearchParams({ limit: PAGE });
    if (cursors[page]) q.set('cursor', cursors[page]);
    const res = await get('/v1/workflows?' + q);
    cursors[page + 1] = res.next_cursor || null;
    tbody.replaceChildren(...res.workflows.map((w) => h('tr', { dataset: { id: w.id } },
      h('td', {}, h('a', { href: `#/workflows/${enc(w.id)}` }, w.id)),
      h('td', {}, w.title || ''),
      h('td', { class: 'wf-status' }, status(w.status), w.stalled ? [' ', stalledBadge(w.stalled)] : null),
      h('td', { class: 'num wf-wide' }, w.round || ''),
      h('td', { class: 'wf-wide' }, (w.sub_threads || []).join(', ')), h('td', {}, fmtTime(w.updated_at)))));
    if (!res.workflows.length) tbody.append(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No workflows.')));
    prev.disabled = page === 0;
    next.disabled = !res.next_cursor;
  }
  prev.addEventListener('click', () => { page--; load().catch(showError); });
  next.addEventListener('click', () => { page++; load().catch(showError); });
  await load();
  const defs = await definitions();
  if (defs.length) main.append(startForm(defs));
  return null;
}

// value shows a JSON value folded under label, or nothing.
function value(label, v) {
  if (v === undefined || v === null) return null;
  return h('details', {}, h('summary', {}, label), h('pre', {}, json(v)));
}

const names = (a) => a.join(', ');

// promptParts shows what a waiting step asked: a string as it is; an
// object's question (question, prompt, text or message) as text, and the
// whole object folded below it.
function promptParts(p) {
  if (p === undefined || p === null) return [h('p', { class: 'muted' }, 'It asked nothing in particular.')];
  if (typeof p === 'string') return [h('p', { class: 'wf-prompt' }, p)];
  const q = typeof p === 'object' && ['question', 'prompt', 'text', 'message'].map((k) => p[k]).find((x) => typeof x === 'string');
  return [q ? h('p', { class: 'wf-prompt' }, q) : null, h('details', { open: !q }, h('summary', {}, 'What it asked (JSON)'), h('pre', {}, json(p)))];
}

// answerMode is how the form for a waiting step starts: as the prompt
// says (format or input: "json" or "text"), as JSON when the prompt gives
// a schema or an example, and as text otherwise. The reader may switch.
function answerMode(p) {
  if (p && typeof p === 'object') {
    const f = String(p.format || p.input || '').toLowerCase();
    if (f === 'json' || f === 'text') return f;
    if (p.schema !== undefined || p.example !== undefined) return 'json';
  }
  return 'text';
}

export async function workflowPage(main, id, params) {
  const base = `/v1/workflows/${enc(id)}`;
  const st = {
    version: +(params.get('v') || 0), // 0: the newest
    w: null, // the workflow as last read, at st.version
    history: [],
    histNext: null,
    defs: [], // the workflows the server can run, by name
  };
  const changed = changes();
  const stops = [];
  const link = (v) => (v ? `#/workflows/${enc(id)}?v=${v}` : `#/workflows/${enc(id)}`);

  // --- The layout ---
  const title = h('h1', { id: 'workflow-title' }, id);
  const meta = h('p', { class: 'meta muted', id: 'workflow-meta' });
  const banner = h('div', { class: 'past-banner', id: 'past-banner', hidden: true });
  const stalledBox = h('section', { class: 'panel wf-stalled', id: 'stalled', 'aria-labelledby': 'stalled-title', hidden: true });
  const facts = h('dl', { class: 'facts', id: 'workflow-facts' });
  const inputBox = h('div', { id: 'workflow-input' });
  const waitingBox = h('section', { class: 'panel', id: 'waiting', 'aria-labelledby': 'waiting-title', hidden: true });
  const stepsBody = h('tbody');
  const subList = h('ul', { id: 'sub-threads' });
  const resumeBox = h('div', { id: 'workflow-resume', class: 'row', hidden: true });
  // The events scroll in the list's own box, which the keyboard can reach.
  const progressList = h('ol', { id: 'progress', class: 'timeline wf-progress', tabindex: 0, 'aria-label': 'Progress, step by step' });
  const PROGRESS_KEPT = 200;

  const histList = h('ol', { id: 'history', class: 'timeline wf-timeline' });
  const histMore = h('button', { type: 'button', class: 'link', id: 'history-older', hidden: true }, 'Older versions');
  const cpList = h('ul', { id: 'checkpoints', class: 'checkpoints' });
  const cpName = h('input', { id: 'cp-name', name: 'name', required: true, maxlength: 128, autocomplete: 'off' });
  const cpForm = h('form', { id: 'cp-form', class: 'row' }, h('label', { for: 'cp-name' }, 'Name'), cpName, h('button', { type: 'submit' }, 'Create checkpoint'));
  const forkId = h('input', { id: 'fork-id', name: 'id', autocomplete: 'off', placeholder: 'optional', maxlength: 95, pattern: '[A-Za-z0-9_][A-Za-z0-9_.\\-]{0,94}' });
  const forkTitle = h('input', { id: 'fork-title', name: 'title', autocomplete: 'off', placeholder: 'optional' });
  const forkBtn = h('button', { type: 'submit', id: 'fork-button' }, 'Fork');
  const forkWhere = h('p', { class: 'muted small', id: 'fork-where' });
  const forkForm = h('form', { id: 'fork-form', class: 'wf-fork' },
    forkWhere,
    h('label', { for: 'fork-id' }, 'New id'), forkId,
    h('label', { for: 'fork-title' }, 'Title'), forkTitle,
    forkBtn);

  main.append(
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/workflows' }, 'Workflows'), ' / ', h('span', {}, id)),
    title, meta,
    h('div', { class: 'wf-layout' },
      h('div', { class: 'wf-main' },
        banner, stalledBox, facts, resumeBox, inputBox, waitingBox,
        h('section', { class: 'panel', 'aria-labelledby': 'progress-title' }, h('h2', { id: 'progress-title' }, 'Progress'), progressList),
        h('section', { class: 'panel', 'aria-labelledby': 'steps-title' }, h('h2', { id: 'steps-title' }, 'Steps'),
          h('div', { class: 'wf-scroll', tabindex: 0, role: 'region', 'aria-label': 'Steps table, scrolls sideways' }, h('table', { class: 'list', id: 'steps' },
            h('thead', {}, h('tr', {}, ['Step', 'Status', 'Started', 'Ended', 'Details'].map((c) => h('th', { scope: 'col' }, c)))),
            stepsBody))),
        h('section', { class: 'panel', 'aria-labelledby': 'subs-title' }, h('h2', { id: 'subs-title' }, 'Sub-threads'), subList)),
      h('aside', { class: 'side', 'aria-label': 'Fork, history and checkpoints' },
        h('section', { class: 'panel', 'aria-labelledby': 'fork-title-h' }, h('h2', { id: 'fork-title-h' }, 'Fork'), forkForm),
        h('section', { class: 'panel', 'aria-labelledby': 'history-title' }, h('h2', { id: 'history-title' }, 'History'), histList, histMore),
        h('section', { class: 'panel', 'aria-labelledby': 'cp-title' }, h('h2', { id: 'cp-title' }, 'Checkpoints'), cpList, cpForm))));

  // --- The workflow ---
  async function load() {
    const q = st.version ? `?version=${st.version}` : '';
    st.w = await get(base + q);
    render();
  }

  function render() {
    const w = st.w;
    const x = w.execution;
    const past = !!st.version;
    title.textContent = w.title || w.id;
    document.title = `${w.title || w.id} · loom`;
    if (changed('meta', [w.id, w.version, w.updated_at, w.labels])) {
      const labels = Object.entries(w.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');
      meta.replaceChildren(h('code', {}, w.id), ` · version ${w.version}`, labels ? ` · ${labels}` : '', ' · updated ', fmtTime(w.updated_at));
    }
    renderBanner();
    renderStalled();
    renderResume();
    if (changed('facts', [x, w.stalled])) renderFacts(x);
    if (changed('input', x.input)) inputBox.replaceChildren(...[value('Workflow input', x.input)].filter(Boolean));
    if (changed('waiting', [x.waiting, past])) renderWaiting(x, past);
    if (changed('steps', x.steps)) renderSteps(x);
    if (changed('subs', [x.sub_threads, past])) {
      subList.replaceChildren(...x.sub_threads.map((t) => h('li', { dataset: { key: t.key } },
        h('a', { href: past ? `#/threads/${enc(t.thread)}?v=${t.version}` : `#/threads/${enc(t.thread)}` }, t.key), ' ',
        h('code', { class: 'muted' }, t.thread), ` v${t.version}`)));
      if (!x.sub_threads.length) subList.append(h('li', { class: 'muted' }, 'No sub-threads.'));
    }
    cpForm.hidden = past;
    forkWhere.textContent = past ? `A new workflow from version ${st.version}: every sub-thread forked as it was then.` : 'A new workflow from now: every sub-thread forked as it is.';
    forkBtn.textContent = past ? `Fork at version ${st.version}` : 'Fork at the head';
    renderHistory();
    schedule();
  }

  function renderFacts(x) {
    const w = st.w;
    const ended = [];
    for (const s of x.steps) if (s.status === 'done' && !ended.includes(s.name)) ended.push(s.name);
    const waitingNames = new Set((x.waiting || []).map((wt) => wt.step));
    const lastRun = new Map(); // the newest attempt of each step of this round
    for (const s of x.steps) if (s.round === x.round) lastRun.set(s.name, s);
    const stateOf = (n) => {
      const run = lastRun.get(n);
      if (x.completed.includes(n)) return 'done';
      if (waitingNames.has(n)) return 'waiting for input';
      if (run && run.status === 'failed') return 'failed';
      if (w.stalled || x.status === 'failed') return run ? 'to run again' : 'to run';
      return run && run.status === 'running' ? 'running' : 'starting';
    };
    const row = (dt, ...dd) => [h('dt', {}, dt), h('dd', {}, ...dd)];
    const r = x.runner;
    facts.replaceChildren(...[
      row('Status', status(x.status), w.stalled && !st.version ? [' ', stalledBadge(w.stalled)] : null),
      row('Round', x.round ? String(x.round) : 'not started'),
      x.current.length ? row('This round', x.current.map((n, i) => [i ? ', ' : '', h('strong', {}, n), ` (${stateOf(n)})`])) : null,
      x.next.length ? row('Chosen next', names(x.next)) : null,
      row('Steps ended', ended.length ? names(ended) : (x.status === 'pending' ? 'none: it has not run yet' : 'none yet')),
      r && !w.stalled ? row('Runner', `${r.id}`, r.pid ? ` (pid ${r.pid}${r.host ? ' on ' + r.host : ''})` : '', ', lease until ', fmtTime(r.until)) : null,
      x.error ? row('Error', h('span', { class: 'msg-error' }, x.error)) : null,
    ].filter(Boolean).flat());
  }

  // The steps given input that no runner has taken on since: their last
  // attempt asked, and they no longer wait.
  function givenInput(x) {
    const waiting = new Set((x.waiting || []).map((wt) => wt.step));
    const last = new Map();
    for (const s of x.steps) if (s.round === x.round) last.set(s.name, s);
    return [...last.values()].filter((s) => s.status === 'waiting' && !waiting.has(s.name) && !x.completed.includes(s.name)).map((s) => s.name);
  }

  function renderStalled() {
    const w = st.w;
    if (!w.stalled || st.version) { stalledBox.hidden = true; changed.forget('stalled'); return; }
    const x = w.execution;
    const given = givenInput(x);
    if (!changed('stalled', [w.stalled, given, x.runner, resumable()])) { stalledBox.hidden = false; return; }
    const r = x.runner;
    stalledBox.replaceChildren(
      h('h2', { id: 'stalled-title' }, 'Stalled since ', fmtTime(w.stalled.since)),
      given.length
        ? h('p', {}, `Input was given to ${names(given)}, and no runner has taken the workflow on since: it says running, but nothing runs it.`)
        : h('p', {}, 'It says running, but no runner holds it: the program that ran it stopped (killed, crashed, or cut off long enough to lose its lease) before the workflow ended.'),
      r ? h('p', { class: 'muted small' }, `Its last runner: ${r.id}${r.pid ? `, pid ${r.pid}` : ''}${r.host ? ` on ${r.host}` : ''}, lease until `, fmtTime(r.until), '.') : '',
      ...(resumable()
        ? [h('p', {}, 'Resume it on this server (below): it goes on from its last committed step, and steps that ended do not run again.')]
        : [h('p', {}, 'To resume it, run the workflow again from its program (workflow.Run with the same steps): it goes on from its last committed step, and steps that ended do not run again.'),
          h('p', { class: 'muted' }, 'This server cannot run this workflow: it was not started by a name it has registered, and its steps are Go functions in the program that declares them.')]));
    stalledBox.hidden = false;
  }

  // resumable says whether this server can run the workflow: it was
  // started by a name the server has registered.
  function resumable() {
    const n = st.w && st.w.labels && st.w.labels[NAME_LABEL];
    return !!n && st.defs.some((d) => d.name === n);
  }

  // renderResume offers to resume a workflow the server can run that no
  // runner runs: stalled (killed, or given input since), or failed.
  function renderResume() {
    const w = st.w;
    const show = !st.version && resumable() && (!!w.stalled || w.execution.status === 'failed');
    resumeBox.hidden = !show;
    if (!changed('resume', [show, w.execution.status])) return;
    resumeBox.replaceChildren(...(show ? [
      h('button', { type: 'button', id: 'resume-button', on: { click: resume } }, 'Resume'),
      h('span', { class: 'muted small' }, w.execution.status === 'failed' ? ' runs the failed steps again.' : ' runs it on from its last committed step.'),
    ] : []));
  }

  async function resume() {
    const btn = resumeBox.querySelector('button');
    if (btn) btn.disabled = true;
    try {
      st.w = await post(`${base}/resume`, {});
      announce(`Resumed ${id}`);
      render();
    } catch (e) {
      showError(e);
    } finally {
      if (btn) btn.disabled = false;
    }
  }

  // onProgress adds an event of the workflow's progress, and reads the
  // workflow again.
  function onProgress(name, ev) {
    if (name === 'reset') { progressList.replaceChildren(); return; }
    if (name !== 'progress') return;
    progressList.append(progressItem(ev));
    while (progressList.childElementCount > PROGRESS_KEPT) progressList.firstElementChild.remove();
    if (!ev.step && Date.now() - new Date(ev.time).getTime() < 10000) announce(`Workflow ${ev.kind.replace('workflow_', '')}`);
    flush();
  }

  function renderWaiting(x, past) {
    const list = x.waiting || [];
    waitingBox.hidden = !list.length;
    if (!list.length) { waitingBox.replaceChildren(); return; }
    waitingBox.replaceChildren(
      h('h2', { id: 'waiting-title' }, past ? 'Was waiting for input' : 'Waiting for input'),
      ...list.map((wt) => (past
        ? h('div', { class: 'wf-wait', dataset: { step: wt.step } }, h('h3', {}, wt.step, ' ', h('span', { class: 'muted small' }, 'since ', fmtTime(wt.since))), ...promptParts(wt.prompt))
        : waitForm(wt))));
  }

  // waitForm is the form that gives input to one waiting step.
  function waitForm(wt) {
    const sid = wt.step;
    const mode = h('select', { id: `mode-${sid}`, name: 'mode' },
      h('option', { value: 'text' }, 'Text'), h('option', { value: 'json' }, 'JSON'));
    mode.value = answerMode(wt.prompt);
    const area = h('textarea', { id: `input-${sid}`, name: 'input', rows: 3, required: true, 'aria-describedby': `hint-${sid} error-${sid}` });
    if (mode.value === 'json' && wt.prompt && wt.prompt.example !== undefined) area.value = JSON.stringify(wt.prompt.example, null, 2);
    const hint = h('p', { class: 'muted small', id: `hint-${sid}` });
    const err = h('p', { class: 'msg-error small', id: `error-${sid}`, 'aria-live': 'polite' });
    const sayHint = () => {
      hint.textContent = mode.value === 'json' ? 'Any JSON value: {"approve": true}, 42, "text in quotes"…' : 'Sent as a JSON string.';
      area.removeAttribute('aria-invalid');
      err.textContent = '';
    };
    mode.addEventListener('change', sayHint);
    sayHint();
    const btn = h('button', { type: 'submit' }, 'Give input');
    const form = h('form', { class: 'wf-wait compose', dataset: { step: sid } },
      h('h3', {}, sid, ' ', h('span', { class: 'muted small' }, 'since ', fmtTime(wt.since))),
      ...promptParts(wt.prompt),
      h('div', { class: 'row' }, h('label', { for: `mode-${sid}` }, 'Answer as'), mode),
      h('label', { for: `input-${sid}` }, `Input for ${sid}`), area, hint, err, btn);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      let input = area.value;
      if (mode.value === 'json') {
        try {
          input = JSON.parse(area.value);
        } catch (x) {
          area.setAttribute('aria-invalid', 'true');
          err.textContent = `Not JSON: ${x.message}`;
          area.focus();
          return;
        }
      }
      btn.disabled = true;
      try {
        st.w = await post(`${base}/input`, { step: sid, input });
        announce(`Input given to ${sid}`);
        st.version = 0;
        render();
        await loadHistory();
      } catch (x) {
        err.textContent = x.message;
        showError(x);
      } finally {
        btn.disabled = false;
      }
    });
    return form;
  }

  function renderSteps(x) {
    stepsBody.replaceChildren(...x.steps.map((sr) => h('tr', { dataset: { step: sr.id } },
      h('td', {}, h('code', {}, sr.id)), h('td', {}, status(sr.status)), h('td', {}, fmtTime(sr.start)), h('td', {}, fmtTime(sr.end)),
      h('td', {}, value('Input', sr.input), value('Output', sr.output), value('Answer', sr.answer),
        sr.error ? h('p', { class: 'msg-error' }, sr.error) : null,
        sr.next && sr.next.length ? h('p', { class: 'muted' }, 'next: ' + sr.next.join(', ')) : null))));
    if (!x.steps.length) stepsBody.append(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No step has run yet.')));
  }

  // --- Versions ---
  function renderBanner() {
    if (!st.version) { banner.hidden = true; return; }
    const e = st.history.find((x) => x.version === st.version);
    if (!changed('banner', [st.version, e])) { banner.hidden = false; return; }
    banner.replaceChildren(
      h('strong', {}, `Past version ${st.version}`),
      e ? h('span', {}, ` (${e.op}, `, fmtTime(e.time), ')') : '',
      ': the workflow as it was then, not now. ',
      h('a', { href: link(0), id: 'back-to-head' }, 'Back to now'), ' · ',
      h('button', { type: 'button', class: 'link', id: 'restore-version', on: { click: () => restore({ version: st.version }, `version ${st.version}`) } }, 'Restore to this version'));
    banner.hidden = false;
  }

  function renderHistory() {
    const head = st.w && st.w.version;
    const selected = st.version || head;
    histMore.hidden = st.histNext == null;
    if (!changed('history', [st.history, selected, head])) return;
    histList.replaceChildren(...st.history.map((e) => {
      const cur = e.version === selected;
      const isHead = e.version === head;
      return h('li', { class: cur ? 'current' : '' },
        h('a', { href: link(isHead ? 0 : e.version), class: 'version', 'aria-current': cur ? 'true' : null, dataset: { version: e.version } },
          h('span', { class: 'v' }, `v${e.version}`), ' ', h('span', { class: 'op' }, e.op), isHead ? h('span', { class: 'badge ok' }, 'head') : '', ' ', fmtTime(e.time)));
    }));
    // The version read stays in sight in the timeline's own scroll.
    const cur = histList.querySelector('li.current');
    if (cur && (cur.offsetTop < histList.scrollTop || cur.offsetTop + cur.offsetHeight > histList.scrollTop + histList.clientHeight)) {
      histList.scrollTop = cur.offsetTop - histList.clientHeight / 2;
    }
  }

  async function loadHistory(more) {
    const q = new URLSearchParams({ limit: PAGE });
    if (more && st.histNext != null) q.set('before', st.histNext);
    const res = await get(`${base}/history?${q}`);
    st.history = more ? st.history.concat(res.entries) : res.entries;
    st.histNext = res.next_before ?? null;
    renderHistory();
    if (st.w) renderBanner();
  }
  histMore.addEventListener('click', () => loadHistory(true).catch(showError));

  // --- Checkpoints, restore, fork ---
  async function loadCheckpoints() {
    const res = await get(`${base}/checkpoints`);
    if (!changed('checkpoints', res.checkpoints)) return;
    cpList.replaceChildren(...res.checkpoints.map((c) => h('li', { dataset: { name: c.name } },
      h('span', { class: 'cp-name' }, c.name), ' ', h('a', { href: link(c.version), class: 'muted' }, `v${c.version}`), ' ', fmtTime(c.created_at), ' ',
      h('span', { class: 'wf-cp-actions' },
        h('button', { type: 'button', class: 'small restore', 'aria-label': `Restore to ${c.name}`, on: { click: () => restore({ checkpoint: c.name }, `checkpoint “${c.name}”`) } }, 'Restore'), ' ',
        h('button', { type: 'button', class: 'small fork', 'aria-label': `Fork from ${c.name}`, on: { click: () => fork({ checkpoint: c.name }) } }, 'Fork')))));
    if (!res.checkpoints.length) cpList.append(h('li', { class: 'muted' }, 'No checkpoints.'));
  }

  cpForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    const name = cpName.value.trim();
    if (!name) return;
    try {
      await post(`${base}/checkpoints`, { name });
      announce(`Checkpoint ${name} created`);
      cpName.value = '';
      await refreshAll();
    } catch (err) { showError(err); }
  });

  async function restore(point, what) {
    const ok = await confirmDialog('Restore the workflow?',
      `Move ${id} and every one of its sub-threads back to ${what}? What came after leaves the head; it stays in the history.`, 'Restore');
    if (!ok) return;
    try {
      st.w = await post(`${base}/restore`, point);
      announce(`Restored to ${what}`);
      if (st.version) {
        st.version = 0;
        location.hash = link(0);
      }
      render();
      await refreshAll();
    } catch (e) { showError(e); }
  }

  async function fork(point) {
    try {
      const body = { ...point };
      if (forkId.value.trim()) body.id = forkId.value.trim();
      if (forkTitle.value.trim()) body.title = forkTitle.value.trim();
      const f = await post(`${base}/fork`, body);
      announce(`Forked as ${f.id}`);
      location.hash = `#/workflows/${enc(f.id)}`;
    } catch (e) { showError(e); }
  }

  forkForm.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!forkForm.reportValidity()) return;
    fork({ version: st.version || st.w.version });
  });

  // --- Live ---
  // Refreshes run one after another; a runner's lease running out is no
  // change of the thread, so while the workflow runs it is read again when
  // its lease ends, and at least every 15 s (a runner killed on this host
  // frees it at once).
  let chain = Promise.resolve();
  const serial = (f) => { chain = chain.then(f).catch(showError); return chain; };
  const refreshAll = () => serial(() => Promise.all([load(), loadHistory(), loadCheckpoints()]));
  let timer = null;
  function schedule() {
    clearTimeout(timer);
    timer = null;
    const w = st.w;
    if (st.version || !w || w.stalled || w.execution.status !== 'running') return;
    let ms = 15000;
    const r = w.execution.runner;
    if (r && r.until) ms = Math.min(ms, Math.max(1000, new Date(r.until).getTime() - Date.now() + 500));
    timer = setTimeout(() => serial(load), ms);
  }
  stops.push(() => clearTimeout(timer));
  const flush = throttle(() => refreshAll(), 250);

  // --- Start ---
  try {
    await load();
  } catch (e) {
    if (e instanceof APIError && e.status === 404) {
      main.replaceChildren(h('h1', {}, st.version ? 'Version not found' : 'Workflow not found'),
        h('p', {}, st.version ? `Workflow ${id} has no version ${st.version}. ` : `There is no workflow ${id}. `,
          h('a', { href: st.version ? link(0) : '#/workflows' }, st.version ? 'Its newest version' : 'All workflows')));
      return null;
    }
    throw e;
  }
  await Promise.all([loadHistory(), loadCheckpoints(), definitions().then((d) => { st.defs = d; render(); })]);
  // One stream: the workflow's progress, each event of which reads the
  // workflow again (a browser holds few connections to a server).
  stops.push(watch(`${base}/events`, { onEvent: onProgress, onGap: refreshAll, onStatus: setLive }));

  return {
    cleanup() { stops.forEach((f) => f()); document.title = 'loom'; },
    // update follows a change of ?v= on the same workflow: time travel.
    async update(p) {
      st.version = +(p.get('v') || 0);
      await serial(load);
    },
  };
}
