// The API reference: Swagger UI on this server's own document (/openapi.json, built from the
// entities in force). "Try it out" sends the bearer token the console pages signed in with
// (kept in sessionStorage); without one, "Authorize" takes a login and password or a token.
'use strict';

(() => {
  const PREFIX = location.pathname.startsWith('/v2.5/') ? '/v2.5' : '';
  const KEY = 'entiserve.token';
  const EXPIRES = 'entiserve.token.expires';

  /** The console's token, unless it expired. */
  function token() {
    const t = sessionStorage.getItem(KEY);
    const exp = sessionStorage.getItem(EXPIRES);
    const ms = exp ? Date.parse(exp.replace(' ', 'T') + 'Z') : NaN;
    return t && !(ms <= Date.now()) ? t : null;
  }

  function hasAuthorization(headers) {
    return Object.keys(headers || {}).some((h) => h.toLowerCase() === 'authorization');
  }

  function note(text, link, warn) {
    const p = document.getElementById('auth-note');
    p.replaceChildren(text);
    if (link) {
      const a = document.createElement('a');
      a.href = link[0];
      a.textContent = link[1];
      p.append(' ', a, '.');
    }
    p.classList.toggle('warn', Boolean(warn));
  }

  async function whoami(t) {
    try {
      const r = await fetch(`${PREFIX}/users/me`, { headers: { Authorization: `Bearer ${t}` } });
      if (!r.ok) throw new Error(String(r.status));
      const me = await r.json();
      const strong = document.createElement('strong');
      strong.id = 'whoami';
      strong.textContent = me.login;
      document.getElementById('user').replaceChildren('Signed in as ', strong, ` (${me.role})`);
      note(`"Try it out" sends your requests as ${me.login}, with the token you signed in with on the console.`);
    } catch (_) {
      note('Your console session has ended: "Try it out" sends no credentials.',
        ['tools/data', 'Sign in again'], true);
    }
  }

  document.addEventListener('DOMContentLoaded', () => {
    const t = token();
    if (t) whoami(t);
    else note('You are not signed in: "Try it out" sends no credentials. Use "Authorize", or',
      ['tools/data', 'sign in on the console'], true);
    const ui = SwaggerUIBundle({
      url: `${PREFIX}/openapi.json`,
      dom_id: '#ui',
      deepLinking: true,
      filter: true,
      docExpansion: 'none',
      displayRequestDuration: true,
      validatorUrl: null,
      requestInterceptor: (req) => {
        const now = token();
        if (now && !hasAuthorization(req.headers)) req.headers.Authorization = `Bearer ${now}`;
        return req;
      },
      onComplete: () => {
        try {
          if (t) ui.preauthorizeApiKey('bearer', t);
        } catch (_) {
          // the request interceptor still sends the token
        }
        document.body.dataset.loaded = '1';
      },
    });
    window.entiserveReference = ui;
  });
})();
