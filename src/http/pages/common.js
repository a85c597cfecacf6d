// entiserve tools: sign-in, API calls with the bearer token, small DOM and CSV helpers.
// Shared by the uploader and the background requests pages. No dependencies.
'use strict';

const Tools = (() => {
  // The pages answer unprefixed and under /v2.5; the API calls follow the page.
  const PREFIX = location.pathname.startsWith('/v2.5/') ? '/v2.5' : '';
  const KEY = 'entiserve.token';
  const EXPIRES = 'entiserve.token.expires';

  const $ = (id) => document.getElementById(id);

  /** Creates an element: el('a', {href: '#', className: 'x'}, 'text', child, ...). */
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'dataset') Object.assign(e.dataset, v);
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k in e && k !== 'list') e[k] = v;
      else e.setAttribute(k, v);
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  /** `YYYY-MM-DD HH:MM:SS` (UTC) as milliseconds, or NaN. */
  function parseDt(dt) {
    return dt ? Date.parse(dt.replace(' ', 'T') + 'Z') : NaN;
  }

  function token() {
    const t = sessionStorage.getItem(KEY);
    const exp = parseDt(sessionStorage.getItem(EXPIRES));
    if (t && !(exp <= Date.now())) return t;
    forget();
    return null;
  }

  function forget() {
    sessionStorage.removeItem(KEY);
    sessionStorage.removeItem(EXPIRES);
  }

  /** The `description` of an error reply, or a sentence made of its status. */
  async function describe(resp) {
    let text = '';
    try {
      text = await resp.text();
      const body = JSON.parse(text);
      if (body && typeof body.description === 'string') return body.description;
    } catch (_) {
      // not JSON: fall through
    }
    return `the server answered ${resp.status} ${resp.statusText || ''}`.trim() +
      (text && text.length < 200 ? `: ${text}` : '');
  }

  class SessionEnded extends Error {}

  /** fetch() on the API with the bearer token. A 401 signs out and shows the sign-in form. */
  async function api(path, opts = {}) {
    const t = token();
    if (!t) {
      showLogin('Your session has ended. Sign in again.');
      throw new SessionEnded('not signed in');
    }
    const headers = Object.assign({}, opts.headers || {}, { Authorization: `Bearer ${t}` });
    const resp = await fetch(PREFIX + path, Object.assign({}, opts, { headers }));
    if (resp.status === 401) {
      forget();
      showLogin('Your session has ended. Sign in again.');
      throw new SessionEnded('401');
    }
    return resp;
  }

  /** GET a JSON document; throws an Error with the server's description on failure. */
  async function getJson(path) {
    const resp = await api(path);
    if (!resp.ok) throw new Error(await describe(resp));
    return resp.json();
  }

  /** Waits until background request `rid` is over; its record. */
  async function finished(rid, everyMs = 400) {
    for (;;) {
      const [rec] = await getJson(`/bgrs/${encodeURIComponent(rid)}`);
      if (rec.status_id !== '2') return rec;
      await new Promise((ok) => setTimeout(ok, everyMs));
    }
  }

  /** What failed in a finished request: `{ran, failed, columns, rows: [{line, res, status, cells}]}`. */
  function failures(rid, limit = 100) {
    return getJson(`/bgrs/${encodeURIComponent(rid)}/failed?limit=${limit}`);
  }

  /** A table of failed rows: line, `res`, then the row's other cells. */
  function failuresTable(found, caption) {
    const cols = found.columns.length ? found.columns : [];
    const resAt = cols.indexOf('res');
    const rest = cols.map((c, i) => [c, i]).filter(([, i]) => i !== resAt);
    const head = el('tr', {}, el('th', { scope: 'col' }, found.columns.length ? 'Line' : 'Item'),
      el('th', { scope: 'col' }, 'res'), rest.map(([c]) => el('th', { scope: 'col' }, c)));
    const rows = found.rows.map((r) => el('tr', { dataset: { line: String(r.line) } },
      el('td', { className: 'mono' }, String(r.line)),
      el('td', { className: 'res' }, r.res),
      rest.map(([, i]) => {
        const text = r.cells[i] ?? '';
        if (text.length > 120) return el('td', { className: 'mono long', title: text }, `${text.slice(0, 120)}…`);
        return el('td', { className: text.length > 24 ? 'mono long' : 'mono' }, text);
      })));
    const shown = found.rows.length < found.failed
      ? `The first ${found.rows.length} of ${found.failed.toLocaleString('en')} failures.`
      : '';
    return el('div', { className: 'failures' },
      el('div', { className: 'table-wrap' }, el('table', { className: 'grid failed' },
        el('caption', {}, caption), el('thead', {}, head), el('tbody', {}, rows))),
      shown ? el('p', { className: 'muted small' }, shown) : '');
  }

  /** The file name of a Content-Disposition header, or `fallback`. */
  function filenameOf(resp, fallback) {
    const cd = resp.headers.get('content-disposition') || '';
    const star = /filename\*=(?:UTF-8'')?([^;]+)/i.exec(cd);
    if (star) {
      try { return decodeURIComponent(star[1].trim().replace(/^"|"$/g, '')); } catch (_) { /* ignore */ }
    }
    const plain = /filename="?([^";]+)"?/i.exec(cd);
    return plain ? plain[1] : fallback;
  }

  /** Offers `blob` as a download named `name`, through a temporary link. */
  function saveBlob(blob, name) {
    const url = URL.createObjectURL(blob);
    const a = el('a', { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  // ---- CSV -------------------------------------------------------------------------------

  /**
   * The separator the server would choose from a header line: of `,`, `;`, tab and `|`, the
   * one found most often outside quotes (the earlier one on a tie, `,` when none is).
   */
  function detectSeparator(headerLine) {
    const seps = [',', ';', '\t', '|'];
    const counts = [0, 0, 0, 0];
    let quoted = false;
    for (const c of headerLine) {
      if (c === '"') quoted = !quoted;
      else if (!quoted && seps.includes(c)) counts[seps.indexOf(c)]++;
    }
    let best = 0;
    for (let i = 1; i < seps.length; i++) if (counts[i] > counts[best]) best = i;
    return seps[best];
  }

  /** The first line of `text` (outside quotes). */
  function firstLine(text) {
    let quoted = false;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (c === '"') quoted = !quoted;
      else if (!quoted && (c === '\n' || c === '\r')) return text.slice(0, i);
    }
    return text;
  }

  /**
   * Reads RFC 4180 records from `text`, calling `onRecord(fields)` for each until it returns
   * false or `max` records were read. Lenient: it is for showing, the server checks.
   * Returns whether the text ended inside a record cut short (the last one is then partial).
   */
  function readCsv(text, sep, onRecord, max = Infinity) {
    let i = 0, n = 0;
    const len = text.length;
    while (i < len && n < max) {
      const fields = [];
      let field = '';
      let inQuotes = false;
      let atStart = true;
      for (;;) {
        if (i >= len) { fields.push(field); break; }
        const c = text[i];
        if (inQuotes) {
          if (c === '"') {
            if (text[i + 1] === '"') { field += '"'; i += 2; continue; }
            inQuotes = false; i++; continue;
          }
          field += c; i++; continue;
        }
        if (c === '"' && atStart) { inQuotes = true; atStart = false; i++; continue; }
        if (c === sep) { fields.push(field); field = ''; atStart = true; i++; continue; }
        if (c === '\r' || c === '\n') {
          fields.push(field);
          i += (c === '\r' && text[i + 1] === '\n') ? 2 : 1;
          break;
        }
        field += c; atStart = false; i++;
      }
      n++;
      if (onRecord(fields) === false) break;
    }
  }

  // ---- Sign-in ---------------------------------------------------------------------------

  let onReady = null;

  function showLogin(message) {
    $('app-view').hidden = true;
    $('user').hidden = true;
    $('login-view').hidden = false;
    const box = $('login-error');
    box.textContent = message || '';
    box.hidden = !message;
    $('signin').disabled = false;
    (($('login').value ? $('password') : $('login'))).focus();
  }

  async function enter() {
    let me;
    try {
      me = await getJson('/users/me');
    } catch (e) {
      if (!(e instanceof SessionEnded)) showLogin(`Could not read your account: ${e.message}`);
      return;
    }
    $('whoami').textContent = me.display_name || me.login || `user ${me.id}`;
    $('role').textContent = me.role ? `(${me.role})` : '';
    $('user').hidden = false;
    $('login-view').hidden = true;
    $('app-view').hidden = false;
    if (onReady) onReady(me);
  }

  async function signIn(ev) {
    ev.preventDefault();
    const login = $('login').value.trim();
    const password = $('password').value;
    const box = $('login-error');
    box.hidden = true;
    if (!login || !password) {
      box.textContent = 'Enter your login and your password.';
      box.hidden = false;
      return;
    }
    $('signin').disabled = true;
    try {
      const resp = await fetch(PREFIX + '/auth/token', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ login, password }),
      });
      if (!resp.ok) {
        const why = resp.status === 401 ? 'The login or the password is wrong.' : await describe(resp);
        showLogin(why);
        return;
      }
      const t = await resp.json();
      sessionStorage.setItem(KEY, t.token);
      sessionStorage.setItem(EXPIRES, t.expires_dt || '');
      $('password').value = '';
      await enter();
    } catch (e) {
      showLogin(`The server could not be reached (${e.message}).`);
    } finally {
      $('signin').disabled = false;
    }
  }

  function signOut(ev) {
    if (ev) ev.preventDefault();
    forget();
    location.reload();
  }

  /** Wires the sign-in form and calls `ready(me)` once signed in. */
  function start(ready) {
    onReady = ready;
    $('login-form').addEventListener('submit', signIn);
    $('signout').addEventListener('click', signOut);
    if (token()) enter();
    else showLogin();
  }

  return {
    PREFIX, $, el, api, getJson, describe, token, filenameOf, saveBlob, parseDt, finished,
    failures, failuresTable,
    detectSeparator, firstLine, readCsv, start, SessionEnded,
  };
})();
