#!/usr/bin/env node
// Server-Sent-Events subscribers for benches/live.sh: entiserve's live changes
// (`GET /<res>/events`) or PocketBase's realtime API (`GET /api/realtime` + a subscription POST).
// Node's built-in modules only. Three modes:
//
//   latency  N subscribers; once every one is ready, K creates one at a time, each sent when the
//            previous one has reached every subscriber (or --timeout-ms passed). For each
//            subscriber and create: the delay from just before the create's POST is written to
//            the moment its event is read. Prints one JSON line: p50, p99, max (ms) and the
//            deliveries (expected N*K); also the creates' own answer times (post_p50_ms) and
//            the three slowest creates ([k, their last delivery in ms]: with 200 subscribers
//            and 50 creates, p99 is decided by the slowest one or two).
//   idle     N subscribers held open. Prints {"ready": N, ...} once all are ready, then holds
//            them until SIGTERM/SIGINT (or --hold-ms) and prints how many were still open.
//   count    M subscribers counting change events, each checking that its event ids strictly
//            increase. Prints {"ready": M} once all are ready; stops on SIGTERM/SIGINT, when
//            every subscriber has --expect events, or --idle-ms after the last event; then
//            prints the counts.
//
//   node benches/live/subscribers.mjs latency --server entiserve --url http://127.0.0.1:18241 \
//        --user admin:bench -n 1000 -k 30
//   node benches/live/subscribers.mjs latency --server pocketbase --url http://127.0.0.1:18242 \
//        --token "$PB_TOKEN" -n 200 -k 30
//   node benches/live/subscribers.mjs idle --url ... -n 10000
//   node benches/live/subscribers.mjs count --url ... -n 10 --expect 1000000
//
// Options (defaults in brackets):
//   --server entiserve|pocketbase [entiserve]   --url BASE [http://127.0.0.1:8080]
//   --res NAME [campaigns]      the entity (entiserve) or collection (PocketBase)
//   --user LOGIN:PASSWORD [admin:bench]   entiserve's credentials, sent as HTTP Basic
//   --token T        entiserve: sent as `_token=T` on the stream (and `Authorization: Bearer T` on
//                    creates) instead of Basic; PocketBase: the superuser token (required)
//   --query QS       more of the stream's query string (entiserve filters, `fields=`)
//   -n, --subscribers N [1]     -k, --creates K [20]     --warmup W [10] creates not measured
//   --timeout-ms T [5000]       the longest wait for one create to reach every subscriber
//   --ready-timeout-ms T [120000]   the longest wait for every subscriber to be ready
//   --concurrency C [100]       subscribers connecting (not yet ready) at one time
//   --workers W [0]             worker threads holding the subscribers (0: this thread). With
//                               1,000 subscribers one thread reading every socket in turn adds
//                               its own delay to the last ones; see benches/live.sh.
//   --expect E [0]   count: stop once every subscriber has E change events
//   --idle-ms T [0]  count: stop T ms after the last event (0: never); idle: --hold-ms T [0]
//   --json-errors    print failures as JSON on stdout too (they always go to stderr)
//
// Exit status: 0 when the run completed (the JSON line tells whether every event arrived),
// 1 on a usage error, a subscriber refused or a failed create, 2 when not every subscriber
// became ready in time.

import http from 'node:http';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';

const now = () => Number(process.hrtime.bigint()) / 1e6; // CLOCK_MONOTONIC, shared by threads

// --- Arguments. ---

function usage(msg) {
  process.stderr.write(`subscribers.mjs: ${msg}\n` +
    'usage: subscribers.mjs latency|idle|count [--server entiserve|pocketbase] [--url BASE] ' +
    '[-n N] [-k K] [--user L:P | --token T] (see the head of the file)\n');
  process.exit(1);
}

export function parseArgs(argv) {
  const o = {
    mode: null, server: 'entiserve', url: 'http://127.0.0.1:8080', res: 'campaigns',
    user: 'admin:bench', token: null, query: '', n: 1, k: 20, warmup: 10, timeoutMs: 5000,
    readyTimeoutMs: 120000, concurrency: 100, workers: 0, expect: 0, idleMs: 0, holdMs: 0,
  };
  const ints = {
    '-n': 'n', '--subscribers': 'n', '-k': 'k', '--creates': 'k', '--warmup': 'warmup',
    '--timeout-ms': 'timeoutMs', '--ready-timeout-ms': 'readyTimeoutMs',
    '--concurrency': 'concurrency', '--workers': 'workers', '--expect': 'expect',
    '--idle-ms': 'idleMs', '--hold-ms': 'holdMs',
  };
  const strs = { '--server': 'server', '--url': 'url', '--res': 'res', '--user': 'user',
    '--token': 'token', '--query': 'query' };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let v;
    const eq = a.indexOf('=');
    if (a.startsWith('--') && eq > 0) { v = a.slice(eq + 1); a = a.slice(0, eq); }
    const take = () => {
      if (v !== undefined) return v;
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a in ints) {
      const s = take();
      if (!/^\d+$/.test(s)) usage(`${a} takes a whole number, not ${JSON.stringify(s)}`);
      o[ints[a]] = Number(s);
    } else if (a in strs) {
      o[strs[a]] = take();
    } else if (a === '-h' || a === '--help') {
      usage('help');
    } else if (!a.startsWith('-') && o.mode === null) {
      o.mode = a;
    } else {
      usage(`unknown argument ${JSON.stringify(a)}`);
    }
  }
  if (!['latency', 'idle', 'count'].includes(o.mode)) usage('the mode is latency, idle or count');
  if (!['entiserve', 'pocketbase'].includes(o.server)) usage('--server is entiserve or pocketbase');
  if (o.server === 'pocketbase' && !o.token) usage('PocketBase needs --token (a superuser token)');
  if (o.server === 'entiserve' && !o.token && !o.user.includes(':')) usage('--user is LOGIN:PASSWORD');
  if (o.n < 1) usage('-n must be at least 1');
  if (o.mode === 'latency' && o.k < 1) usage('-k must be at least 1');
  if (o.concurrency < 1) usage('--concurrency must be at least 1');
  let u;
  try { u = new URL(o.url); } catch { usage(`--url ${o.url} is not a URL`); }
  if (u.protocol !== 'http:') usage('--url must be http://');
  o.url = o.url.replace(/\/+$/, '');
  o.workers = Math.min(o.workers, o.n);
  o.query = o.query.replace(/^[?&]+/, '');
  return o;
}

// --- Server-Sent Events, parsed from bytes. ---

const DATA = Buffer.from('data'), EVENT = Buffer.from('event');

// The usual event names without a new string each time.
const NAMES = ['create', 'update', 'delete', 'ready', 'reset'].map((n) => [n, Buffer.from(n)]);
function eventName(buf, vs, end) {
  const len = end - vs;
  for (const [name, b] of NAMES) {
    if (b.length === len && buf[vs] === b[0] && buf.compare(b, 0, len, vs, end) === 0) return name;
  }
  return buf.toString('utf8', vs, end);
}
// An id of up to 15 digits as a number (entiserve's seq), anything else as a string.
function idValue(buf, vs, end) {
  if (end > vs && end - vs <= 15) {
    let v = 0;
    for (let j = vs; j < end; j++) {
      const d = buf[j] - 48;
      if (d < 0 || d > 9) return buf.toString('utf8', vs, end);
      v = v * 10 + d;
    }
    return v;
  }
  return buf.toString('utf8', vs, end);
}

// Lines end in LF or CRLF (a lone CR is not taken as an end of line). A blank line ends an
// event; `:` lines are comments (heartbeats); `data` lines are kept only when wantData is set.
export class SseParser {
  constructor(onEvent, wantData = true) {
    this.onEvent = onEvent;
    this.wantData = wantData;
    this.rest = null;
    this.comments = 0;
    this.reset();
  }
  reset() { this.event = ''; this.id = null; this.data = null; this.any = false; }
  push(chunk) {
    const buf = this.rest ? Buffer.concat([this.rest, chunk]) : chunk;
    const len = buf.length;
    let pos = 0;
    while (pos < len) {
      const nl = buf.indexOf(10, pos);
      if (nl < 0) break;
      let end = nl;
      if (end > pos && buf[end - 1] === 13) end--;
      if (end === pos) {
        if (this.any) {
          const ev = this.event || 'message', id = this.id, data = this.data;
          this.reset();
          this.onEvent(ev, id, data);
        }
      } else if (buf[pos] === 58) {
        this.comments++;
      } else {
        let colon = buf.indexOf(58, pos);
        if (colon < 0 || colon > end) colon = end;
        let vs = colon + 1;
        if (vs < end && buf[vs] === 32) vs++;
        if (vs > end) vs = end;
        const flen = colon - pos, c = buf[pos];
        if (flen === 4 && c === 100 && buf.compare(DATA, 0, 4, pos, colon) === 0) {
          this.any = true;
          if (this.wantData) {
            const s = buf.toString('utf8', vs, end);
            this.data = this.data === null ? s : this.data + '\n' + s;
          } else {
            this.data = '';
          }
        } else if (flen === 5 && c === 101 && buf.compare(EVENT, 0, 5, pos, colon) === 0) {
          this.any = true;
          this.event = eventName(buf, vs, end);
        } else if (flen === 2 && c === 105 && buf[pos + 1] === 100) {
          this.any = true;
          this.id = idValue(buf, vs, end);
        }
      }
      pos = nl + 1;
    }
    // Copy the unfinished line so that the whole chunk is not kept alive by it.
    this.rest = pos < len ? Buffer.from(buf.subarray(pos)) : null;
  }
}

// What the count mode needs of a stream once it is ready: every `id:` line (one per event, at
// a line start: a `data:` line is one line of JSON), found by a string search of each chunk
// without reading the other lines in JavaScript. The last two chunks are kept to look for an `event: reset`
// when the stream ends (the server closes a stream after a reset; its id, counted as an event,
// is taken off again then).
export class IdScanner {
  constructor(onId, carry = null) {
    this.onId = onId;
    // An unfinished line, from a line start, as latin1 text (one character per byte).
    this.carry = carry && carry.length ? carry.latin1Slice(0, carry.length) : '';
    this.prev = null;
    this.last = null;
  }
  // Each chunk becomes one latin1 string, searched by V8's own string search: a native
  // `Buffer.indexOf` per event cost more than the rest of the client together.
  push(chunk) {
    this.prev = this.last;
    this.last = chunk;
    const text = this.carry + chunk.latin1Slice(0, chunk.length);
    const lastNl = text.lastIndexOf('\n');
    if (lastNl < 0) { this.carry = text; return; }
    // The carry starts a line, so the text does; an id line read ends at or before lastNl.
    if (text.startsWith('id:')) this.idAt(text, 3);
    let p = 0;
    while ((p = text.indexOf('\nid:', p)) >= 0 && p < lastNl) {
      this.idAt(text, p + 4);
      p += 4;
    }
    this.carry = text.slice(lastNl + 1);
  }
  idAt(text, j) {
    if (text.charCodeAt(j) === 32) j++;
    let v = 0, digits = 0;
    for (;; j++) {
      const c = text.charCodeAt(j); // NaN past the end
      if (c === 10 || c === 13 || !(c === c)) break;
      const d = c - 48;
      if (d < 0 || d > 9) { v = NaN; break; }
      v = v * 10 + d;
      digits++;
    }
    this.onId(digits > 0 ? v : NaN);
  }
  sawReset() {
    const tail = Buffer.concat([this.prev || Buffer.alloc(0), this.last || Buffer.alloc(0)]).toString('latin1');
    return /(^|\n)event: ?reset\r?\n/.test(tail);
  }
}

// --- HTTP. ---

function basic(user) { return 'Basic ' + Buffer.from(user).toString('base64'); }

// One request with a JSON body; resolves to {status, body}.
function postJson(agent, url, headers, body, timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    const data = typeof body === 'string' ? body : JSON.stringify(body);
    const req = http.request(url, {
      method: 'POST', agent, timeout: timeoutMs,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), ...headers },
    }, (res) => {
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(parts).toString() }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`POST ${url}: no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(data);
  });
}

// The names of the measured creates: live-<k>-<run>; the run token keeps other rows out.
const NAME_RE = /"name":\s*"live-(\d+)-([A-Za-z0-9]+)"/;

// --- The subscribers of one thread. ---

// A Pool opens its subscribers and reports to `send` (the main thread's handler, or
// parentPort.postMessage in a worker):
//   {t: 'up'}                     one more subscriber is ready
//   {t: 'fail', msg, before}      a subscriber failed (before: while connecting)
//   {t: 'all', k}                 latency: every open subscriber of this pool has create k
//   {t: 'done'}                   count: every subscriber has --expect events
//   {t: 'report', ...}            the answer to {t: 'report'}
class Pool {
  constructor(o, count, send) {
    this.o = o;
    this.send = send;
    this.count = count;
    this.subs = [];
    this.next = 0;
    this.connecting = 0;
    this.ready = 0;
    this.closed = 0;      // closed after being ready
    this.failed = 0;      // never became ready
    this.doneCount = 0;   // count mode: subscribers that reached --expect
    this.got = new Map(); // latency: k -> subscribers of this pool that have it
    this.stopping = false;
    this.agent = new http.Agent({ keepAlive: true, maxSockets: count + 16, maxFreeSockets: 16 });
    this.postAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    this.run = o.run;
  }

  start() {
    this.fill();
    // count: the newest event's time and the events so far, twice a second, for --idle-ms and
    // the progress line.
    if (this.o.mode === 'count') {
      this.ticker = setInterval(() => {
        let lastAt = 0, events = 0;
        for (const s of this.subs) if (s) { if (s.lastAt > lastAt) lastAt = s.lastAt; events += s.count; }
        this.send({ t: 'tick', lastAt, events });
      }, 500);
    }
  }

  fill() {
    while (!this.stopping && this.next < this.count && this.connecting < this.o.concurrency) {
      this.connecting++;
      this.connect(this.next++);
    }
  }

  streamUrl() {
    const o = this.o;
    if (o.server === 'pocketbase') return `${o.url}/api/realtime`;
    const q = [];
    if (o.token) q.push('_token=' + encodeURIComponent(o.token));
    if (o.query) q.push(o.query);
    return `${o.url}/${o.res}/events${q.length ? '?' + q.join('&') : ''}`;
  }

  connect(i) {
    const o = this.o;
    const s = {
      i, ready: false, closed: false, lastId: -Infinity, count: 0, disorder: 0, resets: 0,
      arrivals: [], firstAt: 0, lastAt: 0, req: null, res: null,
    };
    this.subs[i] = s;
    const headers = { accept: 'text/event-stream', 'cache-control': 'no-cache' };
    if (o.server === 'entiserve' && !o.token) headers.authorization = basic(o.user);
    const req = http.request(this.streamUrl(), { method: 'GET', agent: this.agent, headers });
    s.req = req;
    req.on('response', (res) => {
      s.res = res;
      const type = res.headers['content-type'] || '';
      if (res.statusCode !== 200 || !type.startsWith('text/event-stream')) {
        const parts = [];
        res.on('data', (c) => parts.push(c));
        res.on('end', () => this.failBefore(s, `GET ${this.streamUrl().replace(/_token=[^&]*/, '_token=...')}: ` +
          `${res.statusCode} ${type} ${Buffer.concat(parts).toString().slice(0, 300)}`));
        return;
      }
      const parser = new SseParser((ev, id, data) => this.onEvent(s, ev, id, data), o.mode !== 'count');
      s.parser = parser;
      res.on('data', (c) => {
        // Every event of a chunk arrived when the chunk did: one clock read per chunk.
        if (s.scanner) { s.chunkAt = now(); s.scanner.push(c); return; }
        parser.push(c);
        if (s.ready && o.mode === 'count' && o.server === 'entiserve') this.toScanner(s);
      });
      res.on('end', () => this.onClose(s, 'the server ended the stream'));
      res.on('error', (e) => this.onClose(s, e.message));
    });
    req.on('error', (e) => (s.res ? this.onClose(s, e.message) : this.failBefore(s, `GET ${o.url}: ${e.message}`)));
    req.end();
  }

  becomeReady(s) {
    if (s.ready || s.closed) return;
    s.ready = true;
    this.ready++;
    this.connecting--;
    this.send({ t: 'up' });
    this.fill();
  }

  failBefore(s, msg) {
    if (s.closed || s.ready) return;
    s.closed = true;
    this.failed++;
    this.connecting--;
    this.send({ t: 'fail', before: true, msg });
    this.fill();
  }

  // count (entiserve): once ready, the stream's `id:` lines are read by an IdScanner, which
  // skips the rest natively; an event the parser had begun is finished here.
  toScanner(s) {
    const p = s.parser;
    if (p.any && p.event === 'reset') s.resets++;
    else if (p.any && typeof p.id === 'number' && ['create', 'update', 'delete', ''].includes(p.event)) {
      s.chunkAt = now();
      this.idSeen(s, p.id); // its `id:` line came before its `event:` line, or alone so far
    }
    s.scanner = new IdScanner((id) => this.idSeen(s, id), p.rest);
  }

  idSeen(s, seq) {
    if (!(seq > s.lastId)) s.disorder++;
    if (!Number.isNaN(seq)) s.lastId = seq;
    this.counted(s, s.chunkAt);
  }

  onClose(s, why) {
    if (s.closed) return;
    if (s.scanner && s.scanner.sawReset()) {
      s.resets++;
      s.count = Math.max(0, s.count - 1); // the reset's own id was counted
      why = `event: reset after ${s.count} events, then ${why}`;
    }
    if (!s.ready) { this.failBefore(s, `subscriber ${s.i}: ${why} before it was ready`); return; }
    s.closed = true;
    this.closed++;
    if (!this.stopping) this.send({ t: 'fail', before: false, msg: `subscriber ${s.i}: ${why}` });
    this.checkAllClosed();
  }

  checkAllClosed() {
    // latency: the creates in flight need no longer wait for a subscriber that is gone.
    if (this.o.mode === 'latency') for (const k of this.got.keys()) this.checkAll(k);
    if (this.o.mode === 'count') this.checkDone();
  }

  onEvent(s, ev, id, data) {
    const o = this.o;
    const t = now();
    if (o.server === 'pocketbase') {
      if (ev === 'PB_CONNECT') { this.subscribe(s, data); return; }
      if (!s.ready) return;
      if (o.mode === 'latency') this.arrival(s, t, data);
      else this.counted(s, t, null);
      return;
    }
    // entiserve
    if (ev === 'ready') {
      if (id !== null) s.lastId = Number(id);
      this.becomeReady(s);
      return;
    }
    if (ev === 'reset') {
      s.resets++;
      if (!s.ready) this.failBefore(s, `subscriber ${s.i}: began with event: reset (id ${id})`);
      else this.send({ t: 'fail', before: false, msg: `subscriber ${s.i}: event: reset (id ${id}) after ${s.count} events` });
      return;
    }
    if (ev !== 'create' && ev !== 'update' && ev !== 'delete') return;
    if (!s.ready) return;
    const seq = id === null ? NaN : Number(id);
    if (!(seq > s.lastId)) s.disorder++;
    if (!Number.isNaN(seq)) s.lastId = seq;
    if (o.mode === 'latency') { if (ev === 'create') this.arrival(s, t, data); } else this.counted(s, t);
  }

  // PocketBase: subscribe this client to <res>/* with the superuser's token.
  subscribe(s, data) {
    let clientId;
    try { clientId = JSON.parse(data).clientId; } catch { /* below */ }
    if (!clientId) { this.failBefore(s, `PB_CONNECT without a clientId: ${data}`); return; }
    const o = this.o;
    postJson(this.postAgent, `${o.url}/api/realtime`, { authorization: o.token },
      { clientId, subscriptions: [`${o.res}/*`] })
      .then(({ status, body }) => {
        if (status === 204 || status === 200) this.becomeReady(s);
        else this.failBefore(s, `POST /api/realtime: ${status} ${body.slice(0, 300)}`);
      }, (e) => this.failBefore(s, `POST /api/realtime: ${e.message}`));
  }

  arrival(s, t, data) {
    const m = data && NAME_RE.exec(data);
    if (!m || m[2] !== this.run) return;
    const k = Number(m[1]);
    s.arrivals.push(k, t);
    this.got.set(k, (this.got.get(k) || 0) + 1);
    this.checkAll(k);
  }

  checkAll(k) {
    const n = this.got.get(k);
    if (n !== undefined && n >= this.ready - this.closed) {
      this.got.delete(k);
      this.send({ t: 'all', k });
    }
  }

  counted(s, t) {
    s.count++;
    if (s.count === 1) s.firstAt = t;
    s.lastAt = t;
    if (this.o.expect > 0 && s.count === this.o.expect) { this.doneCount++; this.checkDone(); }
  }

  checkDone() {
    if (this.o.expect > 0 && this.doneCount + this.closed >= this.count && !this.doneSent) {
      this.doneSent = true;
      this.send({ t: 'done' });
    }
  }

  report() {
    const arrivals = [];
    let comments = 0;
    const subs = [];
    for (const s of this.subs) {
      if (!s) continue;
      comments += s.parser ? s.parser.comments : 0;
      if (this.o.mode === 'latency') for (const x of s.arrivals) arrivals.push(x);
      subs.push({ count: s.count, disorder: s.disorder, resets: s.resets, lastId: s.lastId,
        firstAt: s.firstAt, lastAt: s.lastAt, open: s.ready && !s.closed });
    }
    return { t: 'report', arrivals, subs, comments, ready: this.ready, closed: this.closed, failed: this.failed };
  }

  stop() {
    this.stopping = true;
    clearInterval(this.ticker);
    for (const s of this.subs) if (s && s.req) s.req.destroy();
    this.agent.destroy();
    this.postAgent.destroy();
  }

  command(m) {
    if (m.t === 'report') this.send(this.report());
    else if (m.t === 'stop') { this.stop(); this.send({ t: 'stopped' }); }
  }
}

// --- Worker threads. ---

if (!isMainThread) {
  const { o, count } = workerData;
  const pool = new Pool(o, count, (m) => parentPort.postMessage(m));
  parentPort.on('message', (m) => pool.command(m));
  pool.start();
}

// --- The main thread. ---

// Pools behind one interface: send(m) to each, handler(m) for what they say.
function startPools(o, handler) {
  const pools = [];
  if (o.workers === 0) {
    const p = new Pool(o, o.n, (m) => setImmediate(() => handler(m, 0)));
    pools.push({ cmd: (m) => p.command(m) });
    p.start();
    return pools;
  }
  const file = fileURLToPath(import.meta.url);
  for (let w = 0; w < o.workers; w++) {
    const count = Math.floor(o.n / o.workers) + (w < o.n % o.workers ? 1 : 0);
    const worker = new Worker(file, { workerData: { o, count } });
    worker.on('message', (m) => handler(m, w));
    worker.on('error', (e) => { process.stderr.write(`worker ${w}: ${e.stack || e}\n`); process.exit(1); });
    pools.push({ cmd: (m) => worker.postMessage(m), worker });
  }
  return pools;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}
const r3 = (x) => (x === null || x === undefined ? null : Math.round(x * 1000) / 1000);

function emit(obj) { process.stdout.write(JSON.stringify(obj) + '\n'); }

async function main() {
  const o = parseArgs(process.argv.slice(2));
  o.run = Math.random().toString(36).slice(2, 10).replace(/[^a-z0-9]/g, '') || 'run';
  const t0 = now();
  let up = 0, failedBefore = 0, failures = [];
  const waiters = { all: null, report: null, done: null, stopped: null };
  const allFrom = new Map(); // latency: k -> pools that reported 'all'
  let reports = [];
  let donePools = 0;

  let readyResolve;
  const allReady = new Promise((r) => { readyResolve = r; });
  const note = (msg) => {
    if (failures.length < 20) process.stderr.write(`subscribers: ${msg}\n`);
    failures.push(msg);
  };

  const ticks = [];
  const handler = (m, w) => {
    switch (m.t) {
      case 'up':
        up++;
        if (up + failedBefore === o.n) readyResolve();
        break;
      case 'fail':
        if (m.before) { failedBefore++; if (up + failedBefore === o.n) readyResolve(); }
        note(m.msg);
        break;
      case 'all': {
        const n = (allFrom.get(m.k) || 0) + 1;
        allFrom.set(m.k, n);
        if (n === pools.length && waiters.all && waiters.all.k === m.k) waiters.all.resolve();
        break;
      }
      case 'done':
        donePools++;
        if (donePools === pools.length && waiters.done) waiters.done();
        break;
      case 'report':
        reports.push(m);
        if (reports.length === pools.length && waiters.report) waiters.report();
        break;
      case 'tick':
        ticks[w] = m;
        break;
      case 'stopped':
        break;
    }
  };
  const pools = startPools(o, handler);

  // Progress on stderr while connecting.
  const progress = setInterval(() => {
    process.stderr.write(`subscribers: ${up} of ${o.n} ready${failedBefore ? `, ${failedBefore} failed` : ''}\n`);
  }, 5000);
  const readyTimer = new Promise((r) => setTimeout(() => r('timeout'), o.readyTimeoutMs).unref());
  const which = await Promise.race([allReady.then(() => 'ok'), readyTimer]);
  clearInterval(progress);
  const readyMs = now() - t0;

  const collect = () => new Promise((resolve) => {
    reports = [];
    waiters.report = resolve;
    for (const p of pools) p.cmd({ t: 'report' });
  });
  const finish = (code) => {
    for (const p of pools) p.cmd({ t: 'stop' });
    // Let the last lines leave, then end the sockets and the workers with the process.
    setTimeout(() => process.exit(code), 50);
  };

  if (which !== 'ok' || failedBefore > 0) {
    emit({ mode: o.mode, server: o.server, error: which !== 'ok' ? 'not ready in time' : 'subscribers failed',
      subscribers: o.n, ready: up, failed: failedBefore, ready_ms: Math.round(readyMs), first_errors: failures.slice(0, 5) });
    finish(which !== 'ok' ? 2 : 1);
    return;
  }

  if (o.mode === 'idle') {
    emit({ mode: 'idle', server: o.server, ready: up, subscribers: o.n, ready_ms: Math.round(readyMs) });
    await new Promise((resolve) => {
      process.once('SIGTERM', resolve);
      process.once('SIGINT', resolve);
      if (o.holdMs > 0) setTimeout(resolve, o.holdMs);
    });
    await collect();
    const subs = reports.flatMap((r) => r.subs);
    const closed = reports.reduce((a, r) => a + r.closed, 0);
    emit({ mode: 'idle', server: o.server, subscribers: o.n, open: subs.filter((s) => s.open).length,
      received: subs.filter((s) => s.count > 0).length, events: subs.reduce((a, s) => a + s.count, 0),
      out_of_order: subs.reduce((a, s) => a + s.disorder, 0), closed_early: closed, heartbeats: reports.reduce((a, r) => a + r.comments, 0),
      held_ms: Math.round(now() - t0 - readyMs), first_errors: failures.slice(0, 5) });
    finish(0);
    return;
  }

  if (o.mode === 'count') {
    emit({ mode: 'count', server: o.server, ready: up, subscribers: o.n, ready_ms: Math.round(readyMs) });
    await new Promise((resolve) => {
      process.once('SIGTERM', resolve);
      process.once('SIGINT', resolve);
      waiters.done = resolve;
      let shown = 0;
      const tick = setInterval(() => {
        const last = Math.max(0, ...ticks.map((m) => (m ? m.lastAt : 0)));
        const events = ticks.reduce((a, m) => a + (m ? m.events : 0), 0);
        if (now() - shown >= 10000 && events > 0) {
          shown = now();
          process.stderr.write(`subscribers: ${events} events so far\n`);
        }
        if (o.idleMs > 0 && last > 0 && now() - last >= o.idleMs) resolve();
      }, 250);
      waiters.stopTick = () => clearInterval(tick);
    });
    waiters.stopTick();
    await collect();
    const subs = reports.flatMap((r) => r.subs);
    const counts = subs.map((s) => s.count);
    const firstAt = Math.min(...subs.map((s) => (s.firstAt > 0 ? s.firstAt : Infinity)));
    const lastAt = Math.max(0, ...subs.map((s) => s.lastAt));
    // Wall-clock times (ms since the epoch) of the first and last event, for the shell's clock.
    const wall = (t) => (t > 0 && Number.isFinite(t) ? Math.round(Date.now() - (now() - t)) : null);
    const disorder = subs.reduce((a, s) => a + s.disorder, 0);
    const resets = subs.reduce((a, s) => a + s.resets, 0);
    emit({
      mode: 'count', server: o.server, subscribers: o.n, counts,
      min: Math.min(...counts), max: Math.max(...counts), expect: o.expect || null,
      exact: o.expect > 0 ? counts.every((c) => c === o.expect) : null,
      in_order: disorder === 0, out_of_order: disorder, resets,
      closed_early: reports.reduce((a, r) => a + r.closed, 0),
      first_event_at_ms: wall(firstAt), last_event_at_ms: wall(lastAt),
      first_errors: failures.slice(0, 5),
    });
    finish(0);
    return;
  }

  // latency
  const pagent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let createUrl, headers;
  if (o.server === 'pocketbase') {
    createUrl = `${o.url}/api/collections/${o.res}/records`;
    headers = { authorization: o.token };
  } else {
    createUrl = `${o.url}/${o.res}`;
    headers = { authorization: o.token ? `Bearer ${o.token}` : basic(o.user) };
  }
  const sent = new Map(); // k -> time just before the POST
  const postMs = [];
  let timeouts = 0;
  const total = o.warmup + o.k;
  for (let k = 1; k <= total; k++) {
    const body = JSON.stringify({ name: `live-${k}-${o.run}`, type: 2, description: 'live changes benchmark', is_active: true });
    const delivered = new Promise((resolve) => { waiters.all = { k, resolve }; });
    if ((allFrom.get(k) || 0) === pools.length) waiters.all.resolve();
    let timer;
    const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve('timeout'), o.timeoutMs); });
    const t = now();
    sent.set(k, t);
    let r;
    try {
      r = await postJson(pagent, createUrl, headers, body);
    } catch (e) {
      clearTimeout(timer);
      note(`create ${k}: ${e.message}`);
      emit({ mode: 'latency', server: o.server, error: `create failed: ${e.message}` });
      finish(1);
      return;
    }
    if (k > o.warmup) postMs.push(now() - t);
    if (r.status !== 200 && r.status !== 201) {
      clearTimeout(timer);
      emit({ mode: 'latency', server: o.server, error: `create ${k}: ${r.status} ${r.body.slice(0, 300)}` });
      finish(1);
      return;
    }
    const res = await Promise.race([delivered.then(() => 'ok'), timeout]);
    clearTimeout(timer);
    waiters.all = null;
    if (res === 'timeout') timeouts++;
  }
  // Late events of the last create may still come: wait for them briefly when it timed out.
  await collect();
  const delays = [];
  const worstOf = new Map(); // k -> its slowest delivery
  for (const r of reports) {
    const a = r.arrivals;
    for (let j = 0; j < a.length; j += 2) {
      const k = a[j];
      if (k <= o.warmup) continue;
      const d = a[j + 1] - sent.get(k);
      delays.push(d);
      if (!(worstOf.get(k) >= d)) worstOf.set(k, d);
    }
  }
  const worst = [...worstOf].sort((x, y) => y[1] - x[1]).slice(0, 3).map(([k, d]) => [k - o.warmup, r3(d)]);
  delays.sort((x, y) => x - y);
  postMs.sort((x, y) => x - y);
  const subs = reports.flatMap((r) => r.subs);
  const mean = delays.length ? delays.reduce((a, b) => a + b, 0) / delays.length : null;
  emit({
    mode: 'latency', server: o.server, subscribers: o.n, creates: o.k, warmup: o.warmup,
    workers: o.workers, deliveries: delays.length, expected: o.n * o.k,
    p50_ms: r3(percentile(delays, 50)), p99_ms: r3(percentile(delays, 99)), max_ms: r3(delays.at(-1)),
    mean_ms: r3(mean), min_ms: r3(delays[0]),
    post_p50_ms: r3(percentile(postMs, 50)), post_p99_ms: r3(percentile(postMs, 99)),
    worst_creates: worst, timeouts, out_of_order: subs.reduce((a, s) => a + s.disorder, 0),
    resets: subs.reduce((a, s) => a + s.resets, 0),
    closed_early: reports.reduce((a, r) => a + r.closed, 0),
    ready_ms: Math.round(readyMs), first_errors: failures.slice(0, 5),
  });
  pagent.destroy();
  finish(0);
}

if (isMainThread && process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e) => { process.stderr.write(`subscribers.mjs: ${e.stack || e}\n`); process.exit(1); });
}
