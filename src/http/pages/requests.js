// The background requests page: the signed-in user's requests (an admin's: everyone's), newest
// first, each named by what it did, with its log, its failed rows and its result file.
'use strict';

(() => {
  const { $, el, api, getJson, describe } = Tools;
  const PAGE = 100;
  const LOG_LINES = 500;
  const DETAILS_PAGE = 1000; // most entries in one reply of /bgrs/<rid>/details
  const REFRESH_MS = 3000;

  let offset = 0;
  let admin = false;
  let users = new Map(); // id -> login, for admins
  let records = [];
  const open = new Set(); // rids whose log is shown
  const openFailed = new Set(); // rids whose failed rows are shown
  const failed = new Map(); // rid -> promise of what failed (finished requests do not change)
  let timer = null;
  let loading = false;

  function showError(text) {
    $('error').textContent = text;
    $('error').hidden = !text;
  }

  function query() {
    const p = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
    if ($('filter-status').value) p.set('status_id', $('filter-status').value);
    if ($('filter-name').value) p.set('name', $('filter-name').value);
    return `/bgrs?${p}`;
  }

  // A dry run and an all-or-nothing request say so beside their name.
  function modeTags(r) {
    const tags = [];
    if (r.dry_run === '1') tags.push(el('span', { className: 'badge mode', title: 'ran, then rolled back: nothing applied' }, 'dry run'));
    if (r.atomic === '1') tags.push(el('span', { className: 'badge mode', title: 'applied whole or not at all' }, 'all or nothing'));
    return el('span', {}, ...tags.flatMap((t) => [' ', t]));
  }

  function badge(r) {
    const status = Number.parseInt(r.status, 10);
    if (r.status_id === '4' && status >= 400) {
      return el('span', { className: 'badge failed', title: `HTTP ${status}` }, 'failed');
    }
    return el('span', { className: `badge s${r.status_id}` }, r.status_name || `status ${r.status_id}`);
  }

  function progressCell(r) {
    const v = Number.parseFloat(r.progress) || 0;
    const bar = el('progress', { max: 100, value: v });
    if (r.status_id === '4') bar.className = Number.parseInt(r.status, 10) >= 400 ? 'failed' : 'done';
    if (r.status_id === '5') bar.className = 'failed';
    return el('span', { className: 'mini' }, bar, el('span', { className: 'mono' }, `${v.toFixed(2)} %`));
  }

  async function download(r, btn) {
    btn.disabled = true;
    const label = btn.textContent;
    btn.textContent = 'Downloading…';
    try {
      const resp = await api(`/bgrs/${encodeURIComponent(r.rid)}/result`);
      if (!resp.ok) throw new Error(await describe(resp));
      const fallback = (r.result || '').split('/').pop() || `bgrs.${r.rid}.result`;
      const name = Tools.filenameOf(resp, fallback);
      Tools.saveBlob(await resp.blob(), name);
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) showError(`The result of ${r.rid} could not be downloaded: ${e.message}`);
    } finally {
      btn.disabled = false;
      btn.textContent = label;
    }
  }

  async function fillLog(r, cell) {
    try {
      // The log comes a page at a time (at most DETAILS_PAGE entries): keep the last lines.
      let shown = [];
      let total = 0;
      for (let since = 0; ;) {
        const page = await getJson(`/bgrs/${encodeURIComponent(r.rid)}/details?since=${since}`);
        total += page.length;
        shown = shown.concat(page).slice(-LOG_LINES);
        if (page.length < DETAILS_PAGE) break;
        since = page[page.length - 1].id;
      }
      const text = shown.map((d) => `${d.dt}  ${d.details}`).join('\n');
      cell.replaceChildren(
        total > LOG_LINES
          ? el('div', { className: 'muted' }, `The last ${LOG_LINES} of ${total.toLocaleString('en')} log lines:`)
          : '',
        el('pre', {}, text || 'No log lines yet.'),
      );
      const pre = cell.querySelector('pre');
      pre.scrollTop = pre.scrollHeight; // the latest lines
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) cell.replaceChildren(el('span', { className: 'muted' }, `The log could not be read: ${e.message}`));
    }
  }

  // Undo: the confirmation says how many objects the undo would change, per entity.
  let undoing = null; // the record the open confirmation is for

  function entitiesText(preview) {
    return Object.entries(preview.entities)
      .map(([name, n]) => `${name}: ${n.toLocaleString('en')}`)
      .join(', ');
  }

  async function askUndo(r, btn) {
    btn.disabled = true;
    try {
      const preview = await getJson(`/bgrs/${encodeURIComponent(r.rid)}/undo`);
      undoing = r;
      const what = `“${r.title || r.name}” (request ${r.rid.slice(0, 8)}…, ${r.created_dt} UTC)`;
      $('undo-what').textContent = preview.objects === 0
        ? `${what} changed nothing that an undo could revert.`
        : `Undo ${what}? ${preview.objects.toLocaleString('en')} object${preview.objects === 1 ? '' : 's'} will change (${entitiesText(preview)}):`;
      $('undo-entities').replaceChildren(...Object.entries(preview.entities).map(([name, n]) =>
        el('li', {}, el('a', { href: `data?entity=${encodeURIComponent(name)}&changed_by=${encodeURIComponent(r.rid)}` }, name),
          `: ${n.toLocaleString('en')} object${n === 1 ? '' : 's'} it created, changed or deleted`)));
      $('undo-how').hidden = preview.objects === 0;
      $('undo-confirm').disabled = preview.objects === 0;
      $('undo-dialog').showModal();
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) showError(`The undo of ${r.rid} cannot be prepared: ${e.message}`);
    } finally {
      btn.disabled = false;
    }
  }

  async function confirmUndo() {
    const r = undoing;
    $('undo-dialog').close();
    if (!r) return;
    try {
      const resp = await api(`/bgrs/${encodeURIComponent(r.rid)}/undo`, { method: 'POST' });
      if (!resp.ok) throw new Error(await describe(resp));
      const body = await resp.json();
      $('notice').textContent = `The undo of “${r.title || r.name}” runs as request ${body.request}.`;
      $('notice').hidden = false;
      offset = 0;
      load();
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) showError(`The undo of ${r.rid} could not start: ${e.message}`);
    }
  }

  function columns() {
    return admin ? 6 : 5;
  }

  /** A title with its `quoted` parts as code: "upload of `a.csv` into campaigns". */
  function titled(text) {
    return String(text).split('`').map((part, i) => (i % 2 ? el('code', {}, part) : part));
  }

  const isUpload = (r) => r.kind === 'upload' || r.kind === 'upload_sync';

  /** What failed in `r`, once it is over and its result kept; null otherwise. */
  function failures(r) {
    if (r.status_id === '2' || !r.result) return null;
    if (!failed.has(r.rid)) failed.set(r.rid, Tools.failures(r.rid).catch(() => null));
    return failed.get(r.rid);
  }

  function failedButton(r, tr) {
    const btn = el('button', { type: 'button', className: 'secondary small', dataset: { action: 'failed' } },
      openFailed.has(r.rid) ? 'Hide failed rows' : 'Failed rows');
    btn.addEventListener('click', () => toggleFailed(r, tr, btn));
    return btn;
  }

  /** Adds ", 3 rows failed" to the title and a Failed rows button, once known. */
  async function showFailures(r, tr) {
    const p = failures(r);
    const f = p && await p;
    if (!f || !tr.isConnected) return;
    const unit = isUpload(r) ? 'row' : 'item';
    const note = tr.querySelector('.title .outcome');
    note.textContent = f.failed
      ? `, ${f.failed.toLocaleString('en')} ${unit}${f.failed === 1 ? '' : 's'} failed`
      : f.ran ? `, all ${f.ran.toLocaleString('en')} ${unit}${f.ran === 1 ? '' : 's'} OK` : '';
    note.classList.toggle('bad', f.failed > 0);
    if (f.failed) tr.querySelector('.actions').prepend(failedButton(r, tr));
  }

  function row(r) {
    const logBtn = el('button', {
      type: 'button', className: 'secondary small', dataset: { action: 'details' },
    }, open.has(r.rid) ? 'Hide log' : 'Log');
    const resultBtn = r.result
      ? el('button', { type: 'button', className: 'small', dataset: { action: 'result' } }, 'Result')
      : null;
    // What a finished request (not a dry run) applied can be listed and undone.
    const applied = r.status_id !== '2' && r.dry_run !== '1' && r.result;
    const changedLink = applied
      ? el('a', { className: 'small', href: `data?changed_by=${encodeURIComponent(r.rid)}`, dataset: { action: 'changed' } }, 'What changed')
      : null;
    const undoBtn = applied
      ? el('button', { type: 'button', className: 'secondary small', dataset: { action: 'undo' } }, 'Undo')
      : null;
    const tr = el('tr', { dataset: { rid: r.rid, status: r.status_id, kind: r.kind || '' } },
      el('td', { className: 'what' },
        el('div', { className: 'title' }, titled(r.title || r.name), el('span', { className: 'outcome' })),
        el('div', { className: 'sub' }, el('span', { className: 'rid', title: r.rid }, `${r.rid.slice(0, 8)}…`), modeTags(r))),
      el('td', {}, badge(r), el('div', {}, progressCell(r))),
      el('td', { className: 'when' }, r.created_dt, el('div', { className: 'muted' }, r.finished_dt || '—')),
      el('td', { className: 'mono' }, r.status || '—'),
      admin ? el('td', {}, users.get(r.user_id) || `#${r.user_id}`) : null,
      el('td', {}, el('span', { className: 'actions' }, logBtn, resultBtn, changedLink, undoBtn)),
    );
    if (undoBtn) undoBtn.addEventListener('click', () => askUndo(r, undoBtn));
    logBtn.addEventListener('click', () => toggle(r, tr, logBtn));
    if (resultBtn) resultBtn.addEventListener('click', () => download(r, resultBtn));
    showFailures(r, tr);
    return tr;
  }

  function failedRow(r) {
    const cell = el('td', { colSpan: columns() }, el('span', { className: 'muted' }, 'Reading the failed rows…'));
    (failures(r) || Promise.resolve(null)).then((f) => {
      cell.replaceChildren(f
        ? Tools.failuresTable(f, ['What failed in ', ...titled(r.title || r.name)])
        : el('span', { className: 'muted' }, 'The failed rows cannot be read.'));
    });
    return el('tr', { className: 'details-row', dataset: { failedOf: r.rid } }, cell);
  }

  function toggleFailed(r, tr, btn) {
    const shown = tr.parentNode.querySelector(`tr[data-failed-of="${CSS.escape(r.rid)}"]`);
    if (openFailed.has(r.rid)) {
      openFailed.delete(r.rid);
      if (shown) shown.remove();
      btn.textContent = 'Failed rows';
    } else {
      openFailed.add(r.rid);
      tr.after(failedRow(r));
      btn.textContent = 'Hide failed rows';
    }
  }

  function detailsRow(r) {
    const cell = el('td', { colSpan: columns() }, el('span', { className: 'muted' }, 'Loading the log…'));
    fillLog(r, cell);
    return el('tr', { className: 'details-row', dataset: { detailsOf: r.rid } }, cell);
  }

  function toggle(r, tr, btn) {
    const shown = tr.parentNode.querySelector(`tr[data-details-of="${CSS.escape(r.rid)}"]`);
    if (open.has(r.rid)) {
      open.delete(r.rid);
      if (shown) shown.remove();
      btn.textContent = 'Log';
    } else {
      open.add(r.rid);
      tr.after(detailsRow(r));
      btn.textContent = 'Hide log';
    }
  }

  function render() {
    const body = $('rows');
    const rows = [];
    for (const r of records) {
      rows.push(row(r));
      if (openFailed.has(r.rid)) rows.push(failedRow(r));
      if (open.has(r.rid)) rows.push(detailsRow(r));
    }
    body.replaceChildren(...rows);
    $('requests').hidden = records.length === 0;
    $('empty').hidden = records.length !== 0;
    $('range').textContent = records.length
      ? `${offset + 1}–${offset + records.length}`
      : '';
    $('newer').disabled = offset === 0;
    $('older').disabled = records.length < PAGE;
  }

  async function load() {
    if (loading) return;
    loading = true;
    clearTimeout(timer);
    try {
      records = await getJson(query());
      showError('');
      render();
    } catch (e) {
      if (e instanceof Tools.SessionEnded) return;
      showError(`The requests could not be listed: ${e.message}`);
    } finally {
      loading = false;
    }
    if ($('auto').checked && records.some((r) => r.status_id === '2')) {
      timer = setTimeout(load, REFRESH_MS);
    }
  }

  async function ready(me) {
    admin = me.role === 'admin';
    for (const th of document.querySelectorAll('.admin-only')) th.hidden = !admin;
    if (admin) {
      $('scope').textContent = 'Everyone\u2019s uploads, batches and backgrounded calls (you are an admin), newest first. Results are kept one month.';
      try {
        const list = await getJson('/users?limit=10000');
        users = new Map(list.map((u) => [String(u.id), u.login]));
      } catch (_) {
        // ids are shown instead
      }
    }
    load();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('refresh').addEventListener('click', load);
    $('undo-confirm').addEventListener('click', confirmUndo);
    $('undo-cancel').addEventListener('click', () => { undoing = null; $('undo-dialog').close(); });
    $('filter-status').addEventListener('change', () => { offset = 0; load(); });
    $('filter-name').addEventListener('change', () => { offset = 0; load(); });
    $('auto').addEventListener('change', load);
    $('newer').addEventListener('click', () => { offset = Math.max(0, offset - PAGE); load(); });
    $('older').addEventListener('click', () => { offset += PAGE; load(); });
    Tools.start(ready);
  });
})();
