// The data page's create and edit form, built from an entity's definition (GET /tools/entities):
// a labelled input per field by its type, a search-as-you-type picker for references, and the
// server's validation errors (the `fields` of a 400) shown beside their fields.
// Hooks: data-field="<field>" on each input, data-error="<field>" on its message.
'use strict';

const Forms = (() => {
  const { $, el, api } = Tools;

  /** `YYYY-MM-DD HH:MM:SS` (the API's form) to a datetime-local value, and back. */
  const toLocal = (v) => (v ? String(v).replace(' ', 'T') : '');
  const fromLocal = (v) => {
    if (!v) return '';
    const [d, t] = v.split('T');
    return `${d} ${t.length === 5 ? `${t}:00` : t}`;
  };

  function hint(f) {
    const parts = [];
    if (f.required) parts.push('required');
    if (f.max_length) parts.push(`at most ${f.max_length.toLocaleString('en')} characters`);
    if (f.type === 'decimal') parts.push('a decimal number, kept exact');
    if (f.type === 'datetime') parts.push('UTC');
    if (f.type === 'reference') parts.push(`type to search ${f.entity}, or an id`);
    if (f.secret) parts.push('write only: leave empty to keep it');
    if (f.description) parts.push(f.description);
    return parts.join(' · ');
  }

  // ---- The reference picker -------------------------------------------------------------

  /** A combobox that searches the referenced entity as one types; the chosen id in dataset.value. */
  function picker(f, id, defs) {
    const target = defs[f.entity] || {};
    const label = target.label;
    const input = el('input', {
      type: 'text', id, autocomplete: 'off', spellcheck: false, role: 'combobox',
      'aria-autocomplete': 'list', 'aria-expanded': 'false', 'aria-controls': `${id}-list`,
      dataset: { field: f.name },
    });
    const list = el('ul', { id: `${id}-list`, role: 'listbox', className: 'listbox', hidden: true,
      'aria-label': `${f.entity} found` });
    let timer = null;
    let active = -1;
    let asked = 0; // the latest search: replies to earlier ones are dropped
    const options = () => [...list.querySelectorAll('[role=option]')];
    const close = () => { list.hidden = true; input.setAttribute('aria-expanded', 'false'); active = -1; input.removeAttribute('aria-activedescendant'); };
    const choose = (li) => {
      input.dataset.value = li.dataset.id;
      input.value = li.dataset.text;
      close();
    };
    const mark = (i) => {
      const opts = options();
      if (!opts.length) return;
      active = (i + opts.length) % opts.length;
      opts.forEach((o, n) => o.setAttribute('aria-selected', String(n === active)));
      input.setAttribute('aria-activedescendant', opts[active].id);
    };
    async function search() {
      const q = input.value.trim();
      const p = new URLSearchParams({ limit: '8', fields: label ? `id,${label}` : 'id' });
      if (/^\d+$/.test(q)) p.set('id', q);
      else if (q && label) p.set(`${label}[contains]`, q);
      else if (q) { close(); return; }
      if (label) p.set('sort', label);
      const mine = ++asked;
      try {
        const resp = await api(`/${encodeURIComponent(f.entity)}?${p}`);
        if (!resp.ok || mine !== asked) return;
        const found = await resp.json();
        if (mine !== asked) return;
        list.replaceChildren(...found.map((o, n) => {
          const text = label ? `${o[label]} (#${o.id})` : `#${o.id}`;
          return el('li', { id: `${id}-opt-${n}`, role: 'option', 'aria-selected': 'false',
            dataset: { id: String(o.id), text }, onmousedown: (ev) => { ev.preventDefault(); choose(ev.currentTarget); } }, text);
        }));
        if (!found.length) list.replaceChildren(el('li', { className: 'none' }, `No ${f.entity} match.`));
        list.hidden = false;
        input.setAttribute('aria-expanded', 'true');
        active = -1;
      } catch (_) {
        close();
      }
    }
    input.addEventListener('input', () => {
      delete input.dataset.value;
      clearTimeout(timer);
      timer = setTimeout(search, 150);
    });
    input.addEventListener('focus', () => { if (!input.value) search(); });
    input.addEventListener('blur', () => setTimeout(close, 150));
    input.addEventListener('keydown', (ev) => {
      if (ev.key === 'ArrowDown') { ev.preventDefault(); if (list.hidden) search(); else mark(active + 1); }
      else if (ev.key === 'ArrowUp') { ev.preventDefault(); mark(active - 1); }
      else if (ev.key === 'Enter' && !list.hidden && active >= 0) { ev.preventDefault(); choose(options()[active]); }
      else if (ev.key === 'Escape' && !list.hidden) { ev.preventDefault(); ev.stopPropagation(); close(); }
    });
    const set = (v, shown) => {
      if (v === null || v === undefined || v === '') { input.value = ''; delete input.dataset.value; return; }
      input.dataset.value = String(v);
      input.value = shown || `#${v}`;
      if (!shown && label) {
        Tools.getJson(`/${encodeURIComponent(f.entity)}/${encodeURIComponent(v)}`)
          .then((o) => { if (input.dataset.value === String(v)) input.value = `${o[label]} (#${v})`; })
          .catch(() => {});
      }
    };
    return { node: el('div', { className: 'picker' }, input, list), input, set };
  }

  // ---- One field ------------------------------------------------------------------------

  /** The control of field `f`: { node, input, get(), set(v) }. */
  function control(f, id, defs) {
    const common = { id, dataset: { field: f.name }, 'aria-describedby': `${id}-hint ${id}-error` };
    let input;
    switch (f.type) {
      case 'text':
        input = el('textarea', { ...common, rows: 2 });
        break;
      case 'boolean':
        input = el('input', { ...common, type: 'checkbox' });
        return { node: input, input, get: () => input.checked, set: (v) => { input.checked = v === true || v === 1 || v === '1' || v === 'true'; } };
      case 'enum':
        input = el('select', common,
          el('option', { value: '' }, f.required ? 'Choose…' : '—'),
          (f.values || []).map((v) => el('option', { value: v }, v)));
        break;
      case 'date':
        input = el('input', { ...common, type: 'date' });
        break;
      case 'datetime':
        input = el('input', { ...common, type: 'datetime-local', step: 1 });
        return { node: input, input, get: () => fromLocal(input.value), set: (v) => { input.value = toLocal(v); } };
      case 'reference': {
        const p = picker(f, id, defs);
        p.input.setAttribute('aria-describedby', common['aria-describedby']);
        return {
          node: p.node, input: p.input, set: p.set,
          get: () => {
            if (p.input.dataset.value) return Number(p.input.dataset.value);
            const typed = p.input.value.trim();
            return /^\d+$/.test(typed) ? Number(typed) : typed;
          },
        };
      }
      default:
        input = el('input', {
          ...common,
          type: f.secret ? 'password' : 'text',
          inputMode: f.type === 'integer' ? 'numeric' : f.type === 'decimal' ? 'decimal' : undefined,
          maxLength: f.max_length || undefined,
          autocomplete: f.secret ? 'new-password' : 'off',
          spellcheck: f.type === 'string',
        });
    }
    const get = () => {
      const v = input.value;
      if (f.type === 'integer') {
        const t = v.trim();
        return /^-?\d+$/.test(t) && Number.isSafeInteger(Number(t)) ? Number(t) : t;
      }
      return f.type === 'decimal' ? v.trim() : v;
    };
    return { node: input, input, get, set: (v) => { input.value = v === null || v === undefined ? '' : String(v); } };
  }

  return { control, hint };
})();
