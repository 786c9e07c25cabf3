// The fork tree: a thread's fork family drawn as an SVG graph, each thread
// a node linked to its page, each fork an edge from the thread it was
// forked from, labelled with where it branches.

import { s, short } from './dom.js';

// A fork's row is CMP_H taller: under its node, a link to its diff with
// its parent.
const DX = 30, DY = 50, NODE_W = 200, NODE_H = 40, PAD = 8, CMP_H = 16;

// diffHash is the address of the diff page: thread from at version
// (0: its head) against thread to at toVersion (0: its head).
export function diffHash(from, version, to, toVersion) {
  const q = new URLSearchParams();
  if (version) q.set('version', version);
  if (to && to !== from) q.set('to', to);
  if (toVersion) q.set('to_version', toVersion);
  const qs = q.toString();
  return `#/threads/${encodeURIComponent(from)}/diff${qs ? '?' + qs : ''}`;
}

// branch says where a thread branches from its parent: the last message
// it shares with it.
function branch(t) {
  const f = t.forked_from;
  if (!f) return 'root';
  if (f.message) return `forked at msg ${short(f.message, 8)}`;
  if (f.commit) return `forked at commit ${short(f.commit, 6)}`;
  return 'forked at the head';
}

export function forkTree(threads, current) {
  const byId = new Map(threads.map((t) => [t.id, t]));
  const kids = new Map();
  const roots = [];
  for (const t of threads) {
    const p = t.forked_from && t.forked_from.thread;
    if (p && byId.has(p) && p !== t.id) {
      if (!kids.has(p)) kids.set(p, []);
      kids.get(p).push(t);
    } else {
      roots.push(t);
    }
  }
  // Rows in depth-first order, indented by depth: a tree that reads like
  // an outline, however wide the family.
  const pos = new Map();
  let y = PAD, maxDepth = 0;
  const seen = new Set();
  const place = (t, depth) => {
    if (seen.has(t.id)) return;
    seen.add(t.id);
    pos.set(t.id, { x: PAD + depth * DX, y });
    y += depth ? DY + CMP_H : DY;
    maxDepth = Math.max(maxDepth, depth);
    for (const k of kids.get(t.id) || []) place(k, depth + 1);
  };
  roots.forEach((r) => place(r, 0));
  const width = PAD * 2 + maxDepth * DX + NODE_W;
  const height = Math.max(y - (DY - NODE_H), PAD + NODE_H) + PAD;
  const svg = s('svg', { class: 'fork-tree', viewBox: `0 0 ${width} ${height}`, width, height, role: 'group',
    'aria-label': `Fork tree: ${threads.length} thread${threads.length === 1 ? '' : 's'}` });
  const edges = s('g', { class: 'edges', 'aria-hidden': 'true' });
  const nodes = s('g', { class: 'nodes' });
  svg.append(edges, nodes);
  for (const t of threads) {
    const p = t.forked_from && t.forked_from.thread;
    const a = pos.get(p), b = pos.get(t.id);
    if (!a || !b || p === t.id) continue;
    const x0 = a.x + 10, y0 = a.y + NODE_H, y1 = b.y + NODE_H / 2;
    edges.append(s('path', { d: `M${x0},${y0} V${y1} H${b.x}`, class: 'edge' }));
  }
  for (const t of threads) {
    const p = pos.get(t.id);
    if (!p) continue;
    const cur = t.id === current;
    const label = t.title || t.id;
    const shown = label.length > 26 ? label.slice(0, 25) + '…' : label;
    const at = t.forked_from && t.forked_from.message ? `forked at message ${t.forked_from.message}` : '';
    // The accessible name is the visible text, then, in parentheses, what
    // the node has no room to show: voice control users say what they see.
    const more = [label !== t.id ? `thread ${t.id}` : '', shown !== label ? label : '', at]
      .filter(Boolean).join(', ').replace(/[()]/g, (c) => (c === '(' ? '[' : ']'));
    const a = s('a', { href: `#/threads/${encodeURIComponent(t.id)}`, class: 'node' + (cur ? ' current' : ''),
      'aria-current': cur ? 'page' : null, 'aria-label': `${shown}, ${branch(t)}${more ? ` (${more})` : ''}`, dataset: { thread: t.id } },
    s('title', {}, `${t.id}${t.title ? ' — ' + t.title : ''}${at ? ', ' + at : ''}`),
    s('rect', { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: 6 }),
    // The space between the two lines keeps their words apart in the
    // node's text content.
    s('text', { x: p.x + 8, y: p.y + 16 }, shown), ' ',
    s('text', { x: p.x + 8, y: p.y + 32, class: 'where' }, branch(t)));
    nodes.append(a);
    const parent = t.forked_from && t.forked_from.thread;
    if (parent && pos.has(parent) && parent !== t.id) {
      // The accessible name begins with the visible text.
      nodes.append(s('a', { href: diffHash(parent, 0, t.id, 0), class: 'compare', dataset: { compare: t.id },
        'aria-label': `compare with parent: ${t.id} with ${parent}` },
      s('text', { x: p.x + 18, y: p.y + NODE_H + 12 }, 'compare with parent')));
    }
  }
  return svg;
}
