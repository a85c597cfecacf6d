// The uploader page: choose an entity and a file, preview the CSV, start a background upload,
// follow it over Server-Sent Events, then count the result file and offer it for download.
'use strict';

(() => {
  const { $, el, api, getJson, describe, PREFIX } = Tools;
  const PREVIEW_BYTES = 64 * 1024;
  const PREVIEW_ROWS = 5;
  const DETAIL_LINES = 10;
  const DETAILS_PAGE = 1000; // most entries in one reply of /bgrs/<rid>/details
  const RUN_KEY = 'entiserve.upload';

  let campaignsLoaded = false;
  let inspectSeq = 0;
  let run = null; // the upload being followed

  // ---- Choosing -------------------------------------------------------------------------

  function isZipBytes(bytes) {
    return bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b &&
      (bytes[2] === 3 || bytes[2] === 5 || bytes[2] === 7) && (bytes[3] === 4 || bytes[3] === 6 || bytes[3] === 8);
  }

  function sizeText(n) {
    if (n < 1024) return `${n} bytes`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
    if (n < 1024 * 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MB`;
    return `${(n / 1024 / 1024 / 1024).toFixed(2)} GB`;
  }

  function updateStart() {
    $('start').disabled = !($('entity').value && $('file').files.length) || run !== null;
  }

  async function loadCampaigns() {
    if (campaignsLoaded) return;
    const select = $('campaign');
    try {
      const list = await getJson('/campaigns?limit=1000');
      for (const c of list) {
        select.append(el('option', { value: String(c.id) }, `${c.name} (#${c.id})`));
      }
      campaignsLoaded = true;
      $('campaign-hint').textContent = list.length
        ? 'Markers made from pages.pdf go into this campaign.'
        : 'You have no campaign yet: a new one is made, named after the file.';
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) {
        $('campaign-hint').textContent = `The campaigns could not be listed: ${e.message}`;
      }
    }
  }

  function renderPreview(meta, rows) {
    $('preview-meta').replaceChildren(...meta);
    const table = $('preview-table');
    table.replaceChildren();
    if (rows && rows.length) {
      const [head, ...body] = rows;
      table.append(el('thead', {}, el('tr', {}, head.map((h) => el('th', { title: h }, h)))));
      table.append(el('tbody', {}, body.map((r) =>
        el('tr', {}, head.map((_, i) => el('td', { title: r[i] ?? '' }, r[i] ?? ''))))));
    }
    table.parentElement.hidden = !(rows && rows.length);
    $('preview').hidden = false;
  }

  /** Looks at the chosen file: a ZIP shows the campaign choice, a CSV a preview. */
  async function inspect() {
    const seq = ++inspectSeq;
    hideError();
    updateStart();
    const file = $('file').files[0];
    if (!file) {
      $('preview').hidden = true;
      $('zip-options').hidden = true;
      return;
    }
    const buf = await file.slice(0, PREVIEW_BYTES).arrayBuffer();
    if (seq !== inspectSeq) return; // another file was chosen meanwhile
    const bytes = new Uint8Array(buf);
    const zip = isZipBytes(bytes) || /\.zip$/i.test(file.name);
    $('zip-options').hidden = !zip;
    if (zip) {
      renderPreview([`ZIP archive, ${sizeText(file.size)}. Its CSV is read and checked on the server.`]);
      loadCampaigns();
      return;
    }
    const encoding = $('encoding').value;
    let text, clean = true;
    try {
      text = new TextDecoder(encoding, { fatal: true }).decode(bytes, { stream: true });
    } catch (_) {
      clean = false;
      text = new TextDecoder(encoding).decode(bytes, { stream: true });
    }
    if (text.startsWith('\ufeff')) text = text.slice(1);
    const header = Tools.firstLine(text);
    const sep = Tools.detectSeparator(header);
    const rows = [];
    Tools.readCsv(text, sep, (r) => { rows.push(r); }, PREVIEW_ROWS + 1);
    const truncated = file.size > PREVIEW_BYTES;
    if (truncated && rows.length > 1 && rows.length < PREVIEW_ROWS + 1) rows.pop(); // cut short
    const sepName = sep === ';' ? 'semicolon' : 'comma';
    const meta = [
      'Separator ', el('code', { id: 'preview-sep' }, sep), ` (${sepName}) · `,
      el('span', { id: 'preview-columns' }, `${rows[0] ? rows[0].length : 0} columns`),
      ` · ${sizeText(file.size)}`,
      rows.length > 1 ? ` · the first ${rows.length - 1} rows` : ' · no data row in the preview',
    ];
    if (!clean) {
      meta.push(el('div', { className: 'alert info' },
        `Some bytes are not valid ${encoding}: is the file in another encoding?`));
    }
    if (rows[0] && !rows[0].includes('op')) {
      meta.push(el('div', { className: 'alert info' },
        'The header has no op column: every row needs one (c, u, d, s or empty).'));
    }
    renderPreview(meta, rows);
  }

  // ---- Errors ---------------------------------------------------------------------------

  function showError(text) {
    const box = $('error');
    box.textContent = text;
    box.hidden = false;
  }

  function hideError() {
    $('error').hidden = true;
    $('error').textContent = '';
  }

  function setFormEnabled(on) {
    for (const id of ['entity', 'file', 'encoding', 'campaign', 'dry-run', 'atomic']) $(id).disabled = !on;
    updateStart();
  }

  // ---- Starting -------------------------------------------------------------------------

  function send(form) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', PREFIX + '/tools/uploader.ex.php');
      xhr.setRequestHeader('Authorization', `Bearer ${Tools.token()}`);
      xhr.upload.addEventListener('progress', (e) => {
        if (e.lengthComputable) {
          $('sending').textContent = `Sending the file… ${Math.floor((e.loaded / e.total) * 100)} %`;
        }
      });
      xhr.addEventListener('load', () => resolve(xhr));
      xhr.addEventListener('error', () => reject(new Error('the server could not be reached')));
      xhr.addEventListener('abort', () => reject(new Error('the upload was interrupted')));
      xhr.send(form);
    });
  }

  function descriptionOf(xhr) {
    try {
      const b = JSON.parse(xhr.responseText);
      if (b && typeof b.description === 'string') return b.description;
    } catch (_) { /* not JSON */ }
    return `the server answered ${xhr.status} ${xhr.statusText || ''}`.trim();
  }

  async function startUpload(ev) {
    ev.preventDefault();
    hideError();
    const file = $('file').files[0];
    const entity = $('entity').value;
    if (!file || !entity) return;
    if (!Tools.token()) {
      showError('Your session has ended. Sign in again.');
      return;
    }
    const encoding = $('encoding').value;
    const form = new FormData();
    form.append('entity', entity);
    form.append('encoding', encoding);
    form.append('bgrs', '1');
    if (!$('zip-options').hidden && $('campaign').value) form.append('campaign_id', $('campaign').value);
    const dryRun = $('dry-run').checked;
    if (dryRun) form.append('dry_run', '1');
    if ($('atomic').checked) form.append('atomic', '1');
    form.append('csvfile', file, file.name);

    run = { rid: null };
    setFormEnabled(false);
    $('sending').textContent = 'Sending the file…';
    $('sending').hidden = false;
    let xhr;
    try {
      xhr = await send(form);
    } catch (e) {
      run = null;
      setFormEnabled(true);
      $('sending').hidden = true;
      showError(`The upload did not reach the server: ${e.message}.`);
      return;
    }
    $('sending').hidden = true;
    if (xhr.status === 202 || xhr.status === 200) {
      let rid = null;
      try { rid = JSON.parse(xhr.responseText).request; } catch (_) { /* below */ }
      if (rid) {
        const info = { rid, name: file.name, entity, encoding, dryRun };
        sessionStorage.setItem(RUN_KEY, JSON.stringify(info));
        follow(info);
        return;
      }
    }
    run = null;
    setFormEnabled(true);
    const why = descriptionOf(xhr);
    if (xhr.status === 401) {
      showError('Your session has ended. Sign in again, then start the upload again.');
    } else if (xhr.status >= 400 && xhr.status < 500) {
      showError(`The file was refused: ${why}`);
    } else {
      showError(`The upload failed: ${why}`);
    }
  }

  // ---- Following ------------------------------------------------------------------------

  function setProgress(p) {
    const v = Math.min(100, Math.max(run.progress, Number.parseFloat(p) || 0));
    run.progress = v;
    const bar = $('progress');
    bar.value = v;
    bar.dataset.value = v.toFixed(2);
    $('progress-text').textContent = `${v.toFixed(2)} %`;
  }

  function statusLine(rec) {
    const parts = [rec.status_name ? rec.status_name[0].toUpperCase() + rec.status_name.slice(1) : ''];
    if (rec.created_dt) parts.push(`started ${rec.created_dt} UTC`);
    if (rec.finished_dt) parts.push(`ended ${rec.finished_dt} UTC`);
    if (run.lines) parts.push(`${run.lines.toLocaleString('en')} log lines`);
    $('run-status').textContent = parts.filter(Boolean).join(' · ');
  }

  function addDetail(d) {
    const id = Number.parseInt(d.id, 10);
    if (id <= run.lastDetail) return; // a reconnect sends the log again
    run.lastDetail = id;
    run.lines += 1;
    run.recent.push(d);
    if (run.recent.length > DETAIL_LINES) run.recent.shift();
    if (!run.drawPending) {
      run.drawPending = true;
      setTimeout(drawDetails, 100);
    }
  }

  function drawDetails() {
    if (!run) return;
    run.drawPending = false;
    const list = $('details');
    list.replaceChildren(...run.recent.map((d) =>
      el('li', { dataset: { id: d.id } }, el('span', { className: 'dt' }, d.dt), ' ', d.details)));
    list.dataset.count = String(run.lines);
  }

  function follow(info) {
    run = {
      ...info, progress: 0, lastDetail: 0, lines: 0, recent: [], drawPending: false,
      finished: false, source: null, poll: null,
    };
    setFormEnabled(false);
    $('run').hidden = false;
    $('run-title').textContent = info.dryRun
      ? `Dry run of ${info.name} into ${info.entity}`
      : `Uploading ${info.name} into ${info.entity}`;
    $('rid').textContent = `request ${info.rid}`;
    $('progress').className = '';
    $('progress').value = 0;
    $('progress').dataset.value = '0.00';
    $('progress-text').textContent = '0.00 %';
    $('details').replaceChildren(el('li', { className: 'empty' }, 'Waiting for the first lines…'));
    $('details').dataset.count = '0';
    $('run-status').textContent = 'Queued';
    $('summary').hidden = true;
    $('download').hidden = true;
    $('cancel').hidden = false;
    $('cancel').disabled = false;
    $('cancel').textContent = 'Cancel';
    $('upload-form').hidden = true;

    const url = `${PREFIX}/bgrs/${encodeURIComponent(info.rid)}/events?_token=${encodeURIComponent(Tools.token())}`;
    const source = new EventSource(url);
    run.source = source;
    const mine = run;
    source.addEventListener('progress', (e) => {
      if (run !== mine) return;
      const rec = JSON.parse(e.data);
      setProgress(rec.progress);
      statusLine(rec);
    });
    source.addEventListener('detail', (e) => {
      if (run === mine) addDetail(JSON.parse(e.data));
    });
    source.addEventListener('finished', (e) => {
      source.close();
      if (run === mine) finish(JSON.parse(e.data));
    });
    source.addEventListener('error', () => {
      // A dropped connection reconnects by itself; a refused one (CLOSED) falls back to polling.
      if (source.readyState === EventSource.CLOSED && run === mine && !mine.finished) poll(mine);
    });
  }

  /** Follows the request with plain GETs, when the event stream is not available. */
  async function poll(mine) {
    if (mine.poll) return;
    mine.poll = true;
    while (run === mine && !mine.finished) {
      try {
        const resp = await api(`/bgrs/${encodeURIComponent(mine.rid)}`);
        if (resp.status === 404) {
          // Not ours (another user signed in) or gone: back to the form.
          if (run === mine) again();
          return;
        }
        if (!resp.ok) throw new Error(await describe(resp));
        const [rec] = await resp.json();
        if (!(await readDetails(mine))) return;
        setProgress(rec.progress);
        statusLine(rec);
        if (rec.status_id !== '2') {
          finish(rec);
          return;
        }
      } catch (e) {
        if (e instanceof Tools.SessionEnded) return;
        $('run-status').textContent = `Could not read the progress: ${e.message}. Retrying…`;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  async function cancel() {
    if (!run || !run.rid || run.finished) return;
    const btn = $('cancel');
    btn.disabled = true;
    btn.textContent = 'Cancelling…';
    try {
      const resp = await api(`/bgrs/${encodeURIComponent(run.rid)}`, { method: 'DELETE' });
      if (resp.status === 200 || resp.status === 202) {
        $('run-status').textContent = 'Cancel requested: rows already done stay done; the rest will not run.';
      } else if (resp.status === 409) {
        btn.textContent = 'Cancel';
        $('run-status').textContent = 'Too late to cancel: the request had already finished.';
      } else {
        btn.disabled = false;
        btn.textContent = 'Cancel';
        $('run-status').textContent = `Could not cancel: ${await describe(resp)}`;
      }
    } catch (e) {
      if (e instanceof Tools.SessionEnded) return;
      btn.disabled = false;
      btn.textContent = 'Cancel';
      $('run-status').textContent = `Could not cancel: ${e.message}`;
    }
  }

  // ---- Finishing ------------------------------------------------------------------------

  /** Counts the result CSV's rows: `OK`, failed, skipped (empty `op`), not run (cancelled). */
  function countResult(text) {
    if (text.startsWith('\ufeff')) text = text.slice(1);
    const sep = Tools.detectSeparator(Tools.firstLine(text));
    let header = null, resAt = 0, opAt = -1;
    const counts = { ok: 0, failed: 0, skipped: 0, notRun: 0 };
    Tools.readCsv(text, sep, (rec) => {
      if (!header) {
        header = rec;
        resAt = Math.max(0, rec.indexOf('res'));
        opAt = rec.indexOf('op');
        return;
      }
      if (rec.length === 1 && rec[0] === '') return; // a blank line
      if (opAt >= 0 && (rec[opAt] ?? '').trim() === '') counts.skipped++;
      else if (rec[resAt] === 'OK') counts.ok++;
      else if ((rec[resAt] ?? '').startsWith('not run')) counts.notRun++;
      else counts.failed++;
    });
    return counts;
  }

  /**
   * Reads the log entries after the last one shown, page by page (the server sends at most
   * DETAILS_PAGE per reply). False when another run took over meanwhile.
   */
  async function readDetails(mine) {
    for (;;) {
      const entries = await getJson(`/bgrs/${encodeURIComponent(mine.rid)}/details?since=${mine.lastDetail}`);
      if (run !== mine) return false;
      entries.forEach(addDetail);
      if (entries.length < DETAILS_PAGE) return true;
    }
  }

  /** Reads the log entries the stream did not deliver before it ended. */
  async function catchUpDetails() {
    const mine = run;
    try {
      await readDetails(mine);
    } catch (_) {
      // the lines shown so far stay
    }
  }

  async function finish(rec) {
    if (run.finished) return;
    run.finished = true;
    await catchUpDetails();
    drawDetails();
    setProgress(rec.progress);
    statusLine(rec);
    $('cancel').hidden = true;
    const cancelled = rec.status_id === '5';
    const status = Number.parseInt(rec.status, 10) || 200;
    const bar = $('progress');
    if (cancelled) {
      $('run-title').textContent = `Cancelled: ${run.name}`;
      bar.className = 'failed';
    } else if (status >= 400) {
      $('run-title').textContent = `Failed: ${run.name}`;
      bar.className = 'failed';
    } else {
      $('run-title').textContent = run.dryRun
        ? `Dry run finished: ${run.name} into ${run.entity} (nothing was kept)`
        : `Finished: ${run.name} into ${run.entity}`;
      bar.className = 'done';
    }
    $('summary').hidden = false;
    $('summary-ok').textContent = 'Reading the result…';
    $('summary-failed').textContent = '';
    $('summary-skipped').textContent = '';
    try {
      const resp = await api(`/bgrs/${encodeURIComponent(run.rid)}/result`);
      if (!resp.ok) throw new Error(await describe(resp));
      const ctype = resp.headers.get('content-type') || 'text/csv';
      const buf = await resp.arrayBuffer();
      if (!ctype.includes('csv')) {
        // A job that failed as a whole stores its error reply.
        let why = '';
        try { why = JSON.parse(new TextDecoder().decode(buf)).description || ''; } catch (_) { /* */ }
        $('summary-ok').textContent = '';
        $('summary-failed').textContent = why ? `The upload failed: ${why}` : `The upload failed (status ${status}).`;
        return;
      }
      const name = Tools.filenameOf(resp, `${run.name}res.csv`);
      const counts = countResult(new TextDecoder(run.encoding).decode(buf));
      const summary = $('summary');
      summary.dataset.ok = String(counts.ok);
      summary.dataset.failed = String(counts.failed);
      summary.dataset.skipped = String(counts.skipped);
      summary.dataset.notRun = String(counts.notRun);
      const rows = (n) => `${n.toLocaleString('en')} ${n === 1 ? 'row' : 'rows'}`;
      $('summary-ok').textContent = `${rows(counts.ok)} OK,`;
      $('summary-failed').textContent = `${rows(counts.failed)} failed`;
      const others = [];
      if (counts.skipped) others.push(`${rows(counts.skipped)} skipped`);
      if (counts.notRun) others.push(`${rows(counts.notRun)} not run`);
      $('summary-skipped').textContent = others.length ? `(${others.join(', ')})` : '';
      $('summary-failed').className = counts.failed ? 'count bad' : 'count muted';
      const link = $('download');
      if (link.href.startsWith('blob:')) URL.revokeObjectURL(link.href);
      link.href = URL.createObjectURL(new Blob([buf], { type: ctype }));
      link.download = name;
      link.textContent = `Download ${name}`;
      link.hidden = false;
      if (counts.failed) showFailedRows(run.rid);
    } catch (e) {
      if (e instanceof Tools.SessionEnded) return;
      $('summary-ok').textContent = '';
      $('summary-failed').textContent = `The result could not be read: ${e.message}`;
    }
  }

  /** The first failed rows (at most 100) with their `res`, under the summary. */
  async function showFailedRows(rid) {
    const box = $('failed-rows');
    try {
      const found = await Tools.failures(rid);
      if (!run || run.rid !== rid) return;
      const n = found.failed.toLocaleString('en');
      box.replaceChildren(Tools.failuresTable(found, `The ${n} failed row${found.failed === 1 ? '' : 's'}: fix them in the result file and upload it again`));
      box.hidden = false;
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) {
        box.replaceChildren(el('p', { className: 'muted' }, `The failed rows cannot be shown: ${e.message}`));
        box.hidden = false;
      }
    }
  }

  function again() {
    if (run && run.source) run.source.close();
    $('failed-rows').hidden = true;
    $('failed-rows').replaceChildren();
    run = null;
    sessionStorage.removeItem(RUN_KEY);
    $('run').hidden = true;
    $('upload-form').hidden = false;
    $('file').value = '';
    $('preview').hidden = true;
    $('zip-options').hidden = true;
    setFormEnabled(true);
    hideError();
  }

  // ---- Start ----------------------------------------------------------------------------

  function ready() {
    // An upload followed before a reload is followed again.
    const saved = sessionStorage.getItem(RUN_KEY);
    if (saved && !run) {
      try { follow(JSON.parse(saved)); } catch (_) { sessionStorage.removeItem(RUN_KEY); }
    }
    updateStart();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('entity').addEventListener('change', updateStart);
    $('file').addEventListener('change', inspect);
    $('encoding').addEventListener('change', inspect);
    $('upload-form').addEventListener('submit', startUpload);
    $('cancel').addEventListener('click', cancel);
    $('again').addEventListener('click', again);
    Tools.start(ready);
  });
})();
