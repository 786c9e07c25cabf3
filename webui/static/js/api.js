// The API client: every request carries the API key, if one was given, in
// the Authorization header; a 401 asks for a key and tries again.

const KEY = 'loom.apiKey';

export class APIError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

let prompt = async () => { throw new APIError(401, 'unauthorized', 'an API key is needed'); };
let pending = null;

// setKeyPrompt installs the function that asks the user for a key; it is
// given whether the last key was refused and resolves to the new key.
export function setKeyPrompt(fn) { prompt = fn; }

export function getKey() { return sessionStorage.getItem(KEY) || ''; }
export function setKey(k) {
  if (k) sessionStorage.setItem(KEY, k); else sessionStorage.removeItem(KEY);
}

function askKey(refused) {
  if (!pending) {
    pending = prompt(refused).then((k) => { setKey(k); }).finally(() => { pending = null; });
  }
  return pending;
}

// request sends one API call and returns its decoded JSON body (null for
// 204), or, with raw, the Response itself. Errors are APIErrors.
export async function request(method, path, opts = {}) {
  for (;;) {
    const key = getKey();
    const headers = new Headers(opts.headers || {});
    if (key) headers.set('Authorization', 'Bearer ' + key);
    let body;
    if (opts.body !== undefined) {
      headers.set('Content-Type', 'application/json');
      body = JSON.stringify(opts.body);
    }
    const res = await fetch(path, { method, headers, body, signal: opts.signal, cache: 'no-store', credentials: 'omit' });
    if (res.status === 401) {
      await askKey(!!key);
      continue;
    }
    if (!res.ok) {
      let code = '', message = `${res.status} ${res.statusText}`;
      try {
        const j = await res.json();
        if (j && j.error) { code = j.error.code; message = j.error.message; }
      } catch { /* not the error shape */ }
      throw new APIError(res.status, code, message);
    }
    if (opts.raw) return res;
    if (res.status === 204) return null;
    return res.json();
  }
}

export const get = (path, opts) => request('GET', path, opts);
export const post = (path, body, opts = {}) => request('POST', path, { ...opts, body });

// readEvents reads a Server-Sent Events stream from a fetch Response and
// yields {event, data, id} for each event; comments are skipped.
export async function* readEvents(res) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let ev = { event: '', data: [], id: null };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      for (;;) {
        const m = /\r\n|\n|\r(?=[^\n])/.exec(buf);
        if (!m) break;
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === '') {
          if (ev.data.length || ev.event) yield { event: ev.event || 'message', data: ev.data.join('\n'), id: ev.id };
          ev = { event: '', data: [], id: ev.id };
          continue;
        }
        if (line.startsWith(':')) continue;
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        let v = i < 0 ? '' : line.slice(i + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (field === 'event') ev.event = v;
        else if (field === 'data') ev.data.push(v);
        else if (field === 'id') ev.id = v;
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

// watch follows a change feed (GET /v1/events or /v1/threads/{id}/events)
// until stopped: onChange gets each change event's data, onGap is called
// when changes may have been missed (a gap event, or a reconnect the server
// could not resume), onStatus gets 'live', 'reconnecting' or 'unavailable'.
// It reconnects with backoff, sending the last event id as Last-Event-ID
// (lastId, when given, from the first connection on). A 404 is final: the
// thread is gone.
// Events of other names (a workflow's progress, GET
// /v1/workflows/{id}/events) go to onEvent(name, data) when it is given.
// It returns the function that stops it.
export function watch(path, { onChange = () => {}, onGap, onEvent = null, onStatus = () => {}, lastId = null }) {
  const ac = new AbortController();
  let connected = false;
  (async () => {
    let delay = 500;
    while (!ac.signal.aborted) {
      try {
        const headers = { Accept: 'text/event-stream' };
        if (lastId) headers['Last-Event-ID'] = lastId;
        const res = await request('GET', path, { headers, raw: true, signal: ac.signal });
        onStatus('live');
        if (connected && !lastId) onGap();
        connected = true;
        delay = 500;
        for await (const ev of readEvents(res)) {
          if (ev.id) lastId = ev.id;
          if (ev.event === 'change') {
            try { onChange(JSON.parse(ev.data)); } catch (e) { console.error(e); }
          } else if (ev.event === 'gap') {
            onGap();
          } else if (onEvent) {
            try { onEvent(ev.event, JSON.parse(ev.data)); } catch (e) { console.error(e); }
          }
        }
        if (!ac.signal.aborted) onStatus('reconnecting');
      } catch (e) {
        if (ac.signal.aborted) return;
        if (e instanceof APIError && e.status === 404) {
          onStatus('unavailable');
          return;
        }
        if (e instanceof APIError && (e.status === 405 || e.status === 501)) {
          onStatus('unavailable');
          delay = 30000;
        } else {
          onStatus('reconnecting');
        }
      }
      await sleep(delay, ac.signal);
      delay = Math.min(delay * 2, 30000);
    }
  })();
  return () => ac.abort();
}
