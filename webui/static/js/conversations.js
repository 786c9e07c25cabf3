// The live conversations pages: the list, and one conversation driven
// from the page.

import { h } from './dom.js';

export async function conversationsPage(main) {
  main.append(h('h1', {}, 'Conversations'));
  return null;
}

export async function conversationPage(main, id) {
  main.append(h('h1', {}, id));
  return null;
}
