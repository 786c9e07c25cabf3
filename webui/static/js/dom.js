// Small DOM helpers: elements are built with h() and text is only ever set
// as text, never parsed as HTML.

const SVGNS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'on') {
      for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    } else if (k === 'text') {
      el.textContent = v;
    } else if (k === 'dataset') {
      Object.assign(el.dataset, v);
    } else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'hidden') {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// h makes an HTML element: h('a', {href: '#/'}, 'text', child…).
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// s makes an SVG element.
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVGNS, tag), attrs, children);
}

// fmtTime shows an RFC 3339 time in the reader's locale, in a <time>.
export function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h('time', {}, iso);
  return h('time', { datetime: iso, title: iso }, d.toLocaleString());
}

// short shortens an id for display, keeping its end, which differs most.
export function short(id, n = 10) {
  if (!id) return '';
  return id.length > n ? '…' + id.slice(-n) : id;
}

// enc escapes a path segment.
export const enc = encodeURIComponent;

// json pretty-prints a value for a <pre>.
export function json(v) {
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// announce tells screen readers (and sighted users, for errors) what happened.
export function announce(msg) {
  const el = document.getElementById('announce');
  el.textContent = '';
  requestAnimationFrame(() => { el.textContent = msg; });
}

let alertTimer;
export function showError(err) {
  const el = document.getElementById('alert');
  el.replaceChildren(h('span', {}, err && err.message ? err.message : String(err)),
    h('button', { type: 'button', class: 'link', on: { click: () => { el.hidden = true; } } }, 'Dismiss'));
  el.hidden = false;
  clearTimeout(alertTimer);
  alertTimer = setTimeout(() => { el.hidden = true; }, 10000);
}

// confirmDialog asks a yes/no question in the page's modal dialog.
export function confirmDialog(title, message, ok = 'Confirm') {
  const dlg = document.getElementById('confirm-dialog');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-message').textContent = message;
  document.getElementById('confirm-ok').textContent = ok;
  dlg.returnValue = '';
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
    dlg.showModal();
  });
}

// setLive shows the state of the change feed the page follows.
export function setLive(state) {
  const el = document.getElementById('live');
  el.textContent = { live: '● live', reconnecting: '○ reconnecting…', unavailable: '○ no live updates' }[state] || '';
  el.className = 'live ' + (state || '');
}

// throttle calls fn at once, then at most once per ms while calls go on:
// a busy feed refreshes the page steadily rather than never.
export function throttle(fn, ms) {
  let timer = null, pending = false;
  const fire = () => {
    pending = false;
    fn();
    timer = setTimeout(() => { timer = null; if (pending) fire(); }, ms);
  };
  return () => { if (timer) pending = true; else fire(); };
}

// changes makes a page's changed(part, data), which reports whether part
// would now show other data than it does: a page redraws a part only
// then, which keeps the keyboard focus, and what is typed, where it is.
// changed.forget(part) has part drawn again the next time, whatever its
// data.
export function changes() {
  const keys = new Map();
  const changed = (part, data) => {
    const k = JSON.stringify(data);
    if (keys.get(part) === k) return false;
    keys.set(part, k);
    return true;
  };
  changed.forget = (part) => keys.delete(part);
  return changed;
}
