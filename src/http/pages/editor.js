// The data page's editor: a dialog that creates an object (POST /<entity>) or changes one
// (PUT /<entity>/<id>, only the fields changed), with the server's validation errors beside
// their fields. Hooks: data-action="save|cancel" on its buttons.
'use strict';

const Editor = (() => {
  const { $, el, api } = Tools;

  let session = null; // { entity, def, id, original, controls, onSaved }

  /** May `me` set field `f`? (Some fields need a role, or admin, beyond the entity's rules.) */
  const settable = (f, me) => !f.write || f.write === me.role || me.role === 'admin';

  function clearErrors() {
    for (const e of $('editor-fields').querySelectorAll('[data-error]')) { e.textContent = ''; e.hidden = true; }
    for (const i of $('editor-fields').querySelectorAll('[aria-invalid]')) i.removeAttribute('aria-invalid');
    $('editor-error').hidden = true;
  }

  /** Shows a 400's `fields` beside their inputs; what has no input goes in the dialog's alert. */
  function showErrors(body, fallback) {
    clearErrors();
    const rest = [];
    let first = null;
    for (const [name, problem] of Object.entries((body && body.fields) || {})) {
      const box = $('editor-fields').querySelector(`[data-error="${CSS.escape(name)}"]`);
      const input = $('editor-fields').querySelector(`[data-field="${CSS.escape(name)}"]`);
      if (box && input) {
        box.textContent = problem;
        box.hidden = false;
        input.setAttribute('aria-invalid', 'true');
        first = first || input;
      } else {
        rest.push(`${name}: ${problem}`);
      }
    }
    const text = rest.length ? rest.join('; ') : first ? '' : (body && body.description) || fallback;
    $('editor-error').textContent = text ? `Not saved: ${text}` : '';
    $('editor-error').hidden = !text;
    (first || $('save')).focus();
  }

  function fieldRow(f, me, defs) {
    const id = `f-${f.name}`;
    const c = Forms.control(f, id, defs);
    if (!settable(f, me)) c.input.disabled = true;
    const label = el('label', { htmlFor: id }, f.name, f.required ? el('span', { className: 'req', 'aria-hidden': 'true' }, ' *') : '');
    const hint = el('div', { className: 'hint', id: `${id}-hint` }, Forms.hint(f),
      settable(f, me) ? '' : ' · only admins set it');
    const error = el('div', { className: 'field-error', id: `${id}-error`, dataset: { error: f.name }, hidden: true });
    const wide = f.type === 'text' ? ' wide' : '';
    const node = f.type === 'boolean'
      ? el('div', { className: `field${wide}` }, el('label', { className: 'check', htmlFor: id }, c.node, f.name), hint, error)
      : el('div', { className: `field${wide}` }, label, c.node, hint, error);
    return { f, c, node };
  }

  /** Opens the dialog: `object` null for a new one. */
  function open({ entity, def, defs, me, object, onSaved }) {
    const controls = def.fields.map((f) => fieldRow(f, me, defs));
    for (const { f, c } of controls) {
      if (f.secret) continue;
      if (object) c.set(object[f.name]);
      else if (f.default !== undefined) c.set(f.default);
    }
    session = { entity, def, id: object ? object.id : null, original: object, controls, onSaved };
    $('editor-title').textContent = object ? `Edit ${entity} ${object.id}` : `New object in ${entity}`;
    $('editor-meta').textContent = object
      ? ['created_dt', 'updated_dt'].filter((k) => object[k]).map((k) => `${k.replace('_dt', '')} ${object[k]} UTC`).join(' · ')
      : 'Fields marked * are required.';
    $('editor-fields').replaceChildren(...controls.map((x) => x.node));
    clearErrors();
    $('save').disabled = false;
    $('editor').showModal();
    const first = controls.find((x) => !x.c.input.disabled);
    if (first) first.c.input.focus();
  }

  /** The payload: every given field of a new object; only the changed fields of an edit. */
  function payload() {
    const out = {};
    for (const { f, c } of session.controls) {
      if (c.input.disabled) continue;
      const v = c.get();
      const empty = v === '' || v === null || v === undefined;
      if (!session.original) {
        if (!empty) out[f.name] = v;
        continue;
      }
      if (f.secret) { if (!empty) out[f.name] = v; continue; }
      const before = session.original[f.name];
      const beforeText = before === null || before === undefined ? '' : String(before);
      const nowText = empty ? '' : String(v);
      if (f.type === 'boolean' ? Boolean(before) !== v : beforeText !== nowText) out[f.name] = empty ? null : v;
    }
    return out;
  }

  async function save(ev) {
    ev.preventDefault();
    if (!session) return;
    const s = session;
    const body = payload();
    if (s.original && !Object.keys(body).length) { close(); return; }
    $('save').disabled = true;
    try {
      const path = s.original ? `/${encodeURIComponent(s.entity)}/${encodeURIComponent(s.id)}` : `/${encodeURIComponent(s.entity)}`;
      const resp = await api(path, {
        method: s.original ? 'PUT' : 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (!resp.ok) {
        const text = await resp.text();
        let parsed = null;
        try { parsed = JSON.parse(text); } catch (_) { /* not JSON */ }
        showErrors(parsed, `the server answered ${resp.status}`);
        return;
      }
      const saved = await resp.json();
      close();
      s.onSaved(saved, Boolean(s.original));
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) showErrors(null, e.message);
    } finally {
      $('save').disabled = false;
    }
  }

  function close() {
    session = null;
    if ($('editor').open) $('editor').close();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('editor-form').addEventListener('submit', save);
    $('editor-cancel').addEventListener('click', close);
    $('editor').addEventListener('close', () => { session = null; });
  });

  return { open, settable };
})();
