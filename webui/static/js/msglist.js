// The message list of the thread and conversation pages: a thread's
// messages a page at a time, in a window of at most WINDOW messages
// however long the thread (older pages read as the reader scrolls up,
// dropped ones read again on the way back down), kept where the reader
// is as pages come and go, and brought up to the head when it moves.

import { get } from './api.js';
import { h, showError } from './dom.js';
import { message, resultsOf } from './render.js';

const PAGE = 50;
// WINDOW is the most messages the page holds at once (one more page while
// one is read); EDGE is how near an end of the window, in pixels, the next
// page is read.
const WINDOW = 300;
const EDGE = 400;

// messageList makes the list of the thread whose API path is base. Its
// options:
//
//   - version: a past version to show (0: the head; see setVersion);
//   - ids: the element ids, {scroller, list, older, newer, newest}, where
//     a page's tests and styles know them by others than the thread page's;
//   - scrollerClass, empty: the scroller's class and the empty list's text;
//   - after: nodes shown in the scroller below the list (what is not in
//     the thread yet);
//   - actions(msg): extra controls for a message's header;
//   - arrange(msgs, lis): the list's items, from the window's messages and
//     their <li>s (by default the <li>s): a page may fold some away or add
//     its own; it is called on every render, so it keeps its own nodes;
//   - holdOlder(): true while no older page should be read on scrolling up
//     (what is above is folded away); the button still reads one;
//   - onAdded(msgs): the messages that came in at the head.
export function messageList(opts) {
  const { base, actions = () => null, arrange = (msgs, lis) => lis, holdOlder = () => false, onAdded = () => {} } = opts;
  const ids = { scroller: 'scroller', list: 'messages', older: 'load-older', newer: 'load-newer', newest: 'jump-newest', ...opts.ids };
  const st = {
    version: opts.version || 0, // 0: the head
    msgs: [], // the window's messages, oldest first
    pages: [], // the window, a page at a time: {msgs}
    below: [], // the pages dropped below the window: {before, n, first}, nearest last
    hasOlder: false,
    loading: false,
    gen: 0, // bumped when the messages shown are replaced, to drop stale answers
  };

  const olderBtn = h('button', { type: 'button', id: ids.older, class: 'link', hidden: true }, 'Load older messages');
  const list = h('ol', { id: ids.list, class: 'msgs' });
  const newerBtn = h('button', { type: 'button', id: ids.newer, class: 'link' }, 'Load newer messages');
  const newestBtn = h('button', { type: 'button', id: ids.newest, class: 'link' }, 'Jump to the newest');
  const newer = h('div', { class: 'row newer', hidden: true }, newerBtn, newestBtn);
  const scroller = h('div', { class: opts.scrollerClass || 'scroller', id: ids.scroller, tabindex: 0, role: 'region', 'aria-label': 'Messages' },
    olderBtn, list, newer, opts.after || []);

  // The list is a window over the thread. The pages dropped above the
  // window are read again with before = the window's first message; those
  // dropped below it are kept as {before, n, first} (how to read them
  // again, and what they began with, to check that they still fit),
  // nearest last.
  function msgQuery(extra) {
    const q = new URLSearchParams({ limit: PAGE });
    for (const [k, v] of Object.entries(extra || {})) if (v) q.set(k, v);
    if (st.version) q.set('version', st.version);
    return `${base}/messages?${q}`;
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
    const lis = st.msgs.map((m) => {
      const sig = signature(m, results, calls);
      let e = m.id ? rendered.get(m.id) : null;
      if (e && e.sig === sig) {
        for (const c of m.contents || []) if (c.type === 'function_call' && results.has(c.call_id)) shown.add(c.call_id);
      } else {
        const li = message(m, results, shown, actions(m));
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
    const items = arrange(st.msgs, lis);
    // Only what came or went is touched: a page read at one end costs the
    // layout of that page, not of the whole window.
    const want = new Set(items);
    for (const c of [...list.children]) if (!want.has(c)) c.remove();
    let at = list.firstChild;
    for (const li of items) {
      if (at === li) at = at.nextSibling;
      else list.insertBefore(li, at);
    }
    if (!items.length) list.append(h('li', { class: 'muted empty' }, opts.empty || 'No messages yet.'));
    olderBtn.hidden = !st.hasOlder;
    newer.hidden = !st.below.length;
  }

  // anchor notes the first message in view and where it is, so that the
  // view can be put back after messages are added or dropped around it.
  // Messages folded away (no box) are passed over.
  function anchor() {
    const top = scroller.getBoundingClientRect().top;
    for (const li of list.querySelectorAll('li.msg')) {
      const r = li.getBoundingClientRect();
      if (r.height && r.bottom > top) return { li, off: r.top - top };
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

  // nearBottom: the newest messages are in the window and in view, so
  // that what comes in after them should keep them in view.
  const nearBottom = () => !st.below.length && scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
  const toBottom = () => { scroller.scrollTop = scroller.scrollHeight; };

  // loadNewest reads the newest page afresh, in view.
  async function loadNewest() {
    const gen = ++st.gen;
    const res = await get(msgQuery());
    if (gen !== st.gen) return;
    st.pages = [{ msgs: res.messages }];
    st.below = [];
    st.hasOlder = olderThan(res, PAGE);
    render();
    toBottom();
    onAdded(res.messages);
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
    if (st.hasOlder && scrollTop < EDGE && !holdOlder()) loadOlder().catch(showError);
    else if (st.below.length && scrollHeight - scrollTop - clientHeight < EDGE) loadNewer().catch(showError);
  }
  scroller.addEventListener('scroll', edge, { passive: true });

  // refreshHead brings the messages shown up to the head: the new ones are
  // added, or, when the head moved elsewhere (a rollback, a compaction),
  // the newest page is read afresh. While the reader is back up the
  // thread, with the newest messages out of the window, nothing moves:
  // they are read when the reader comes back down.
  async function refreshHead() {
    if (st.version || st.below.length) return;
    const gen = st.gen;
    const res = await get(msgQuery());
    if (gen !== st.gen || st.below.length) return;
    const last = st.msgs.length ? st.msgs[st.msgs.length - 1].id : null;
    const i = last ? res.messages.findIndex((m) => m.id === last) : -1;
    const stick = nearBottom();
    let added;
    if (i >= 0) {
      const have = new Set(st.msgs.map((m) => m.id));
      added = res.messages.slice(i + 1).filter((m) => !have.has(m.id));
      if (!added.length) return;
      st.pages.push({ msgs: added });
      dropAbove();
    } else {
      st.gen++;
      added = res.messages;
      st.pages = [{ msgs: added }];
      st.hasOlder = olderThan(res, PAGE);
    }
    const a = stick || i < 0 ? null : anchor();
    render();
    if (a) restore(a); else toBottom();
    onAdded(added);
  }

  olderBtn.addEventListener('click', () => loadOlder().catch(showError));
  newerBtn.addEventListener('click', () => loadNewer().catch(showError));
  newestBtn.addEventListener('click', () => loadNewest().catch(showError));

  return {
    scroller,
    list,
    loadNewest,
    refreshHead,
    // toHead shows the newest messages after the reader wrote some: read
    // afresh when the reader was back up the thread.
    toHead: () => (st.below.length ? loadNewest() : refreshHead()),
    // setVersion shows the thread at version v (0: its head).
    setVersion(v) {
      st.version = v;
      return loadNewest();
    },
    // render draws the window again, for what arrange adds of its own.
    render,
    messages: () => st.msgs,
    nearBottom,
    toBottom,
    // cleanup drops the answers of reads still under way.
    cleanup() { st.gen++; },
  };
}
