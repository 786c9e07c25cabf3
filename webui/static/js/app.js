// The app: hash routing, the API key prompt, the pages.

import { setKeyPrompt, getKey, setKey } from './api.js';
import { h, showError, setLive } from './dom.js';
import { threadsPage } from './threads.js';
import { threadPage } from './thread.js';
import { workflowsPage, workflowPage } from './workflows.js';
import { itemsPage } from './items.js';
import { conversationsPage, conversationPage } from './conversations.js';
import { diffPage } from './diff.js';

const main = document.getElementById('main');
const forget = document.getElementById('forget-key');

// The key prompt: a modal dialog; resolves to the key entered.
setKeyPrompt((refused) => new Promise((resolve) => {
  const dlg = document.getElementById('key-dialog');
  const input = document.getElementById('key-input');
  document.getElementById('key-message').textContent = refused
    ? 'The server refused that key. Enter another API key.'
    : 'This server needs an API key.';
  input.value = '';
  const done = () => {
    const k = input.value.trim();
    if (!k) { dlg.showModal(); return; }
    dlg.removeEventListener('close', done);
    forget.hidden = false;
    resolve(k);
  };
  dlg.addEventListener('close', done);
  dlg.addEventListener('cancel', (e) => e.preventDefault(), { once: true });
  if (!dlg.open) dlg.showModal();
  input.focus();
}));

forget.hidden = !getKey();
forget.addEventListener('click', () => { setKey(''); forget.hidden = true; location.reload(); });


// route parses the hash: #/threads/ID?v=3 → {name, id, params}.
function route() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, query] = raw.split('?', 2);
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || '');
  switch (parts[0]) {
    case undefined: case 'threads':
      if (parts[1] && parts[2] === 'diff' && parts.length === 3) return { name: 'diff', id: parts[1], params };
      if (parts.length > 2) return { name: 'notfound', params };
      return parts[1] ? { name: 'thread', id: parts[1], params } : { name: 'threads', params };
    case 'workflows':
      if (parts.length > 2) return { name: 'notfound', params };
      return parts[1] ? { name: 'workflow', id: parts[1], params } : { name: 'workflows', params };
    case 'conversations':
      if (parts.length > 2) return { name: 'notfound', params };
      return parts[1] ? { name: 'conversation', id: parts[1], params } : { name: 'conversations', params };
    case 'items':
      return parts.length > 1 ? { name: 'notfound', params } : { name: 'items', params };
    default:
      return { name: 'notfound', params };
  }
}

const pages = {
  threads: threadsPage,
  thread: threadPage,
  workflows: workflowsPage,
  workflow: workflowPage,
  items: itemsPage,
  conversations: conversationsPage,
  conversation: conversationPage,
  diff: diffPage,
  notfound: (el) => {
    el.replaceChildren(h('h1', {}, 'Not found'),
      h('p', {}, 'No page is at this address. ', h('a', { href: '#/' }, 'Go to the threads'), '.'));
  },
};

let current = null; // {route, page}

async function show() {
  const r = route();
  for (const a of document.querySelectorAll('[data-nav]')) {
    const on = a.dataset.nav === r.name || a.dataset.nav + 's' === r.name || (a.dataset.nav === 'threads' && r.name === 'thread') || (a.dataset.nav === 'workflows' && r.name === 'workflow') || (a.dataset.nav === 'threads' && r.name === 'diff') || (a.dataset.nav === 'conversations' && r.name === 'conversation');
    if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  if (current && current.route.name === r.name && current.route.id === r.id && current.page && current.page.update) {
    current.route = r;
    current.page.update(r.params);
    return;
  }
  if (current && current.page && current.page.cleanup) current.page.cleanup();
  setLive('');
  main.replaceChildren();
  current = { route: r, page: null };
  try {
    const page = await pages[r.name](main, r.id, r.params);
    if (current.route === r) current.page = page; else if (page && page.cleanup) page.cleanup();
  } catch (e) {
    showError(e);
  }
  if (document.activeElement === document.body) main.focus({ preventScroll: true });
}

window.addEventListener('hashchange', show);
window.addEventListener('unhandledrejection', (e) => showError(e.reason));
document.getElementById('skip').addEventListener('click', (e) => { e.preventDefault(); main.focus(); });
show();
