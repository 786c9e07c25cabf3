// The diff page: two versions of a thread, or a thread and its fork, side
// by side.

import { h } from './dom.js';

export async function diffPage(main, id) {
  main.append(h('h1', {}, 'Diff of ' + id));
  return null;
}
