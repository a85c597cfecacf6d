#!/usr/bin/env node
// The floor of benches/live.sh: how long the client harness and this machine take to carry an
// event to N subscribers from a server that writes it to every stream the moment a create
// arrives (no database, no ids kept beyond memory, nothing durable). The figures of entiserve
// and PocketBase are read against it. Node's built-in modules only. Started by benches/live.sh:
//
//   ENTISERVE_ADMIN_PASSWORD=bench benches/live/floor.mjs serve --bind 127.0.0.1:18243
//
// Serves, as CONTRACT.md's live changes describe them: GET /healthz; GET /<res>/events
// (HTTP Basic or `_token=<password>`; `event: ready` with `id: <seq>`, then `event: create`,
// `id: <seq>`, `data: {"op":"create","id":..,"object":{..}}`; `Last-Event-ID` or
// `last_event_id=` replays what came after it; a `:` comment every --heartbeat-ms; the lines
// of an event in poem's order: id, event, data);
// POST /<res> (one JSON object: a create); POST /tools/uploader.ex.php (multipart `entity` and
// `csvfile`, rows `c,...` only: one create each, a result CSV of `OK,<id>` lines); GET /<res>
// (`X-Total-Count`). Other flags of entiserve's are accepted and ignored.

import http from 'node:http';

const argv = process.argv.slice(2);
if (argv[0] === '--version' || argv[0] === '-V') {
  process.stdout.write('live-floor 0.0.0\n');
  process.exit(0);
}
if (argv[0] !== 'serve') {
  process.stderr.write('usage: floor.mjs serve [--bind HOST:PORT] [--heartbeat-ms MS] (other entiserve flags ignored)\n');
  process.exit(1);
}
let bind = process.env.ENTISERVE_BIND || '127.0.0.1:8080';
let heartbeatMs = 15000;
for (let i = 1; i < argv.length; i++) {
  const a = argv[i];
  const [name, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
  const value = () => (inline !== undefined ? inline : argv[++i]);
  if (name === '--bind') bind = value();
  else if (name === '--heartbeat-ms') heartbeatMs = Number(value());
  else if (name.startsWith('--') && inline === undefined && argv[i + 1] && !argv[i + 1].startsWith('--')
    && !['--dev'].includes(name)) i++; // a flag with a value we ignore
}
const password = process.env.ENTISERVE_ADMIN_PASSWORD || 'admin';
const [host, port] = [bind.slice(0, bind.lastIndexOf(':')), Number(bind.slice(bind.lastIndexOf(':') + 1))];

let seq = 0;
const tables = new Map();   // res -> {nextId, count}
const log = [];             // [{seq, res, frame}] for resuming
const subscribers = new Map(); // res -> Set of responses

const table = (res) => {
  if (!tables.has(res)) tables.set(res, { nextId: 1, count: 0 });
  return tables.get(res);
};

function authorized(req, url) {
  const h = req.headers.authorization || '';
  if (h.startsWith('Basic ')) return Buffer.from(h.slice(6), 'base64').toString() === `admin:${password}`;
  if (h.startsWith('Bearer ')) return h.slice(7) === password;
  return url.searchParams.get('_token') === password;
}

function json(res, status, obj, headers = {}) {
  const body = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

function create(resName, object) {
  const t = table(resName);
  const id = t.nextId++;
  t.count++;
  const now = new Date().toISOString();
  const stored = { id, ...object, created_dt: now, updated_dt: now };
  seq++;
  // As poem writes an event: `id:`, then `event:`, then `data:`.
  const frame = `id: ${seq}\nevent: create\ndata: ${JSON.stringify({ op: 'create', id, object: stored })}\n\n`;
  log.push({ seq, res: resName, frame });
  if (log.length > 2_000_000) log.splice(0, log.length - 1_000_000);
  const subs = subscribers.get(resName);
  if (subs) for (const r of subs) r.write(frame);
  return stored;
}

function events(req, res, resName, url) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const last = req.headers['last-event-id'] ?? url.searchParams.get('last_event_id');
  let from = seq;
  if (last !== null && last !== undefined && /^\d+$/.test(last)) {
    from = Number(last);
    res.write(`id: ${from}\nevent: ready\ndata: {"seq":${from}}\n\n`);
    for (const e of log) if (e.seq > from && e.res === resName) res.write(e.frame);
  } else {
    res.write(`id: ${from}\nevent: ready\ndata: {"seq":${from}}\n\n`);
  }
  if (!subscribers.has(resName)) subscribers.set(resName, new Set());
  subscribers.get(resName).add(res);
  const hb = setInterval(() => res.write(':\n\n'), heartbeatMs);
  const gone = () => { clearInterval(hb); subscribers.get(resName).delete(res); };
  req.on('close', gone);
  res.on('error', gone);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

// The `entity` and `csvfile` parts of a multipart/form-data body.
function multipart(body, type) {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/.exec(type || '');
  if (!m) return null;
  const boundary = Buffer.from('--' + (m[1] || m[2]));
  const fields = {};
  let pos = body.indexOf(boundary);
  while (pos >= 0) {
    const start = pos + boundary.length;
    if (body[start] === 45 && body[start + 1] === 45) break; // --boundary--
    const headEnd = body.indexOf('\r\n\r\n', start);
    if (headEnd < 0) break;
    const head = body.toString('utf8', start, headEnd);
    const next = body.indexOf(boundary, headEnd + 4);
    if (next < 0) break;
    const name = /name="([^"]*)"/.exec(head);
    if (name) fields[name[1]] = body.subarray(headEnd + 4, next - 2); // less the CRLF before it
    pos = next;
  }
  return fields;
}

function splitCsvLine(line) {
  const out = [];
  let cur = '', q = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (q) {
      if (c === '"' && line[i + 1] === '"') { cur += '"'; i++; } else if (c === '"') q = false; else cur += c;
    } else if (c === '"') q = true;
    else if (c === ',') { out.push(cur); cur = ''; } else cur += c;
  }
  out.push(cur);
  return out;
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, `http://${req.headers.host || 'localhost'}`);
  const path = url.pathname.replace(/\/+$/, '') || '/';
  if (path === '/healthz') { res.writeHead(200, { 'content-type': 'text/plain' }); res.end('ok'); return; }
  if (!authorized(req, url)) { json(res, 401, { error: 'unauthorized' }, { 'www-authenticate': 'Basic' }); return; }
  let m;
  if (req.method === 'GET' && (m = /^\/([a-z_][a-z0-9_]*)\/events$/.exec(path))) { events(req, res, m[1], url); return; }
  if (req.method === 'POST' && path === '/tools/uploader.ex.php') {
    const fields = multipart(await readBody(req), req.headers['content-type']);
    if (!fields || !fields.entity || !fields.csvfile) { json(res, 400, { error: 'entity and csvfile required' }); return; }
    const resName = fields.entity.toString();
    const lines = fields.csvfile.toString().split(/\r?\n/);
    const head = splitCsvLine(lines[0]);
    const out = ['status,id'];
    for (let i = 1; i < lines.length; i++) {
      if (!lines[i]) continue;
      const cells = splitCsvLine(lines[i]);
      const obj = {};
      head.forEach((h, j) => { if (h !== 'op') obj[h] = cells[j]; });
      const stored = create(resName, obj);
      out.push(`OK,${stored.id}`);
      if (i % 1000 === 0) await new Promise((r) => setImmediate(r)); // let the streams drain
    }
    const body = out.join('\n') + '\n';
    res.writeHead(200, { 'content-type': 'text/csv', 'content-length': Buffer.byteLength(body) });
    res.end(body);
    return;
  }
  if ((m = /^\/([a-z_][a-z0-9_]*)$/.exec(path))) {
    if (req.method === 'POST') {
      let obj;
      try { obj = JSON.parse((await readBody(req)).toString()); } catch { json(res, 400, { error: 'bad json' }); return; }
      if (Array.isArray(obj)) { json(res, 400, { error: 'the floor takes single objects' }); return; }
      json(res, 201, create(m[1], obj));
      return;
    }
    if (req.method === 'GET') { json(res, 200, [], { 'x-total-count': String(table(m[1]).count) }); return; }
  }
  json(res, 404, { error: 'not_found' });
});
server.keepAliveTimeout = 30000;
server.headersTimeout = 35000;
server.requestTimeout = 0;
server.listen(port, host, () => process.stderr.write(`floor listening on ${bind}\n`));
const bye = () => { server.close(); process.exit(0); };
process.on('SIGTERM', bye);
process.on('SIGINT', bye);
