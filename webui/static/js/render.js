// Rendering of messages in loom's wire format (docs/wire-format.md).

import { h, fmtTime, json, short } from './dom.js';

// results maps a call_id to its function_result, over the loaded messages,
// so that a tool call shows folded together with its result.
export function resultsOf(messages) {
  const m = new Map();
  for (const msg of messages) {
    for (const c of msg.contents || []) if (c.type === 'function_result') m.set(c.call_id, c);
  }
  return m;
}

function base64Blob(b64, type) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new Blob([bytes], { type: type || 'application/octet-stream' });
}

function resultBlock(r) {
  return h('div', { class: 'tool-result' + (r.is_error ? ' is-error' : '') },
    h('div', { class: 'label' }, r.is_error ? 'Error result' : 'Result'),
    h('pre', {}, json(r.result || '')));
}

function dataContent(c) {
  const type = c.media_type || '';
  const name = c.name || type || 'data';
  if (c.data !== undefined) {
    if (type.startsWith('image/')) {
      return h('figure', { class: 'data' },
        h('img', { src: `data:${type};base64,${c.data}`, alt: c.name || 'image', loading: 'lazy' }),
        c.name ? h('figcaption', {}, c.name) : null);
    }
    // The name and type come from the message: the file is saved, never
    // opened, as bytes (octet-stream) under a name with no path in it.
    const file = (c.name || 'data').replace(/[\\/\u0000-\u001f\u007f]/g, '_').replace(/^\.+/, '_').slice(0, 120) || 'data';
    const a = h('a', { href: '#', class: 'data', download: file }, `Download ${name}`);
    a.addEventListener('click', (e) => {
      e.preventDefault();
      const url = URL.createObjectURL(base64Blob(c.data, 'application/octet-stream'));
      const tmp = h('a', { href: url, download: file });
      tmp.click();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    });
    return a;
  }
  const uri = c.uri || '';
  if (uri.startsWith('data:image/')) {
    return h('figure', { class: 'data' }, h('img', { src: uri, alt: c.name || 'image', loading: 'lazy' }));
  }
  // Nothing is loaded from elsewhere: a link, followed only if clicked.
  const safe = /^https?:/i.test(uri);
  return h('p', { class: 'data' }, `${type || 'data'}: `,
    safe ? h('a', { href: uri, rel: 'noopener noreferrer', target: '_blank' }, c.name || uri) : h('code', {}, uri));
}

function usageText(u) {
  const parts = [];
  if (u.input_tokens) parts.push(`${u.input_tokens} in`);
  if (u.cached_input_tokens) parts.push(`${u.cached_input_tokens} cached`);
  if (u.output_tokens) parts.push(`${u.output_tokens} out`);
  if (u.reasoning_tokens) parts.push(`${u.reasoning_tokens} reasoning`);
  if (u.total_tokens) parts.push(`${u.total_tokens} total`);
  return 'Usage: ' + (parts.join(', ') || 'none') + ' tokens';
}

// content renders one content; shown holds the call ids whose results
// show with their call (those are not shown again).
function content(c, results, shown) {
  switch (c.type) {
    case 'text':
      return h('p', { class: 'text' }, c.text || '');
    case 'reasoning':
      return h('details', { class: 'reasoning' }, h('summary', {}, 'Reasoning'), h('p', { class: 'text' }, c.text || ''));
    case 'function_call': {
      const r = results.get(c.call_id);
      if (r) shown.add(c.call_id);
      const args = c.arguments || '';
      return h('details', { class: 'tool-call', dataset: { callId: c.call_id || '' } },
        h('summary', {}, h('span', { class: 'tag' }, 'tool'), ' ', h('strong', {}, c.name || '?'),
          h('code', { class: 'args' }, '(' + (args.length > 60 ? args.slice(0, 60) + '…' : args) + ')'),
          r ? (r.is_error ? h('span', { class: 'badge bad' }, 'error') : h('span', { class: 'badge ok' }, 'result')) : h('span', { class: 'badge' }, 'no result yet')),
        h('div', { class: 'label' }, `Call ${c.call_id || ''}`),
        h('pre', {}, json(args)),
        r ? resultBlock(r) : null);
    }
    case 'function_result':
      if (shown.has(c.call_id)) {
        return h('p', { class: 'muted folded-result', dataset: { resultFor: c.call_id || '' } }, `Result of ${c.call_id} (shown with its call)`);
      }
      return h('details', { class: 'tool-call', dataset: { resultFor: c.call_id || '' } },
        h('summary', {}, h('span', { class: 'tag' }, 'tool result'), ' ', h('code', {}, c.call_id || ''),
          c.is_error ? h('span', { class: 'badge bad' }, 'error') : null),
        resultBlock(c));
    case 'data':
      return dataContent(c);
    case 'usage':
      return h('p', { class: 'usage muted' }, usageText(c));
    case 'error':
      return h('p', { class: 'msg-error' }, h('strong', {}, 'Error'), c.code ? ` (${c.code})` : '', ': ', c.message || '');
    default:
      return h('details', { class: 'other' }, h('summary', {}, c.type), h('pre', {}, json(c)));
  }
}

// message renders a message as an <li> (or another tag: the diff page
// shows messages in table cells); actions are extra controls for its
// header (the fork button).
export function message(msg, results, shown, actions, tag = 'li') {
  const role = msg.role || '?';
  return h(tag, { class: `msg role-${role.replace(/[^a-z_]/g, '')}`, dataset: { id: msg.id || '' }, 'aria-label': `${role} message` },
    h('div', { class: 'msg-head' },
      h('span', { class: 'role' }, role),
      msg.author_name ? h('span', { class: 'author' }, msg.author_name) : null,
      fmtTime(msg.created_at),
      h('code', { class: 'muted', title: msg.id || '' }, short(msg.id, 8)),
      h('span', { class: 'spacer' }),
      actions || null),
    h('div', { class: 'msg-body' }, (msg.contents || []).map((c) => content(c, results, shown))),
    msg.metadata && Object.keys(msg.metadata).length
      ? h('details', { class: 'meta' }, h('summary', {}, 'Metadata'), h('pre', {}, json(msg.metadata))) : null);
}
