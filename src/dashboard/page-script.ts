/**
 * The page's script, as text. It polls the JSON API and renders with `textContent` and
 * `createElement` only: no `innerHTML`, no markup built from data, no attribute a value could turn
 * into a URL or a handler. Changes are POSTed as JSON with the token the API hands out.
 */
export const PAGE_SCRIPT = String.raw`
(function () {
  'use strict';
  var meta = function (name) { return document.querySelector('meta[name="' + name + '"]').getAttribute('content'); };
  var base = meta('outboxer-base');
  var interval = Number(meta('outboxer-refresh'));
  var $ = function (id) { return document.getElementById(id); };
  var state = { token: null, mutations: false, outbox: null, overview: null, messages: [], next: null, selected: new Set(), detail: null, busy: false, search: null };

  function el(tag, props, children) {
    var e = document.createElement(tag);
    if (props) for (var k in props) {
      if (k === 'text') e.textContent = props[k];
      else if (k === 'className') e.className = props[k];
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), props[k]);
      else e.setAttribute(k, props[k]);
    }
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }
  function svg(tag, attrs, text) {
    var e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (var k in attrs) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function cell(text, className) { return el('td', { text: text === null || text === undefined ? '–' : String(text), className: className || '' }); }
  function fmt(n) { return Number(n).toLocaleString('en-US'); }
  function when(ms) { return ms === null || ms === undefined ? '–' : new Date(ms).toISOString().replace('T', ' ').slice(0, 19); }
  function age(ms) {
    if (ms === null || ms === undefined) return '–';
    var s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (s < 120) return s + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    if (s < 172800) return Math.round(s / 3600) + ' h';
    return Math.round(s / 86400) + ' d';
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function setStatus(text, error) { var s = $('status'); s.textContent = text; s.className = error ? 'error' : ''; }

  function api(path, body) {
    var init = body === undefined ? { credentials: 'same-origin' } : {
      method: 'POST', credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-outboxer-token': state.token || '' },
      body: JSON.stringify(body)
    };
    return fetch(base + '/api/' + path, init).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (data) {
        if (!r.ok) throw new Error(data.error || ('HTTP ' + r.status));
        return data;
      });
    });
  }
  function query(params) {
    return Object.keys(params).filter(function (k) { return params[k] !== '' && params[k] !== null && params[k] !== undefined; })
      .map(function (k) { return encodeURIComponent(k) + '=' + encodeURIComponent(params[k]); }).join('&');
  }
  function current() {
    return state.overview && state.overview.outboxes.find(function (o) { return o.name === state.outbox; });
  }

  function renderOutboxes(outboxes) {
    var select = $('outbox-select');
    if (select.options.length !== outboxes.length) {
      clear(select);
      outboxes.forEach(function (o) { select.appendChild(el('option', { value: o.name, text: o.name })); });
    }
    if (!state.outbox || !outboxes.some(function (o) { return o.name === state.outbox; })) state.outbox = outboxes[0] && outboxes[0].name;
    select.value = state.outbox;
  }

  function renderFigures(o) {
    var f = $('figures'); clear(f);
    // Counted up to a cap on Postgres and MySQL: a figure at the cap is a floor.
    var c = o.counts, atLeast = c.blockedExact ? '' : '≥ ';
    [['pending', 'Pending', fmt(c.pending), c.pending > 0 ? '' : ''],
     ['retrying', 'Retrying groups', atLeast + fmt(c.retryingGroups), c.retryingGroups > 0 ? 'warn' : ''],
     ['parked', 'Parked groups', atLeast + fmt(c.parkedGroups), c.parkedGroups > 0 ? 'bad' : ''],
     ['dead', 'Dead', fmt(c.dead), c.dead > 0 ? 'bad' : ''],
     ['delivered', o.keepsDelivered ? 'Delivered (kept)' : 'Delivered (not kept)', o.keepsDelivered ? fmt(c.delivered) : '–', ''],
     ['orphaned', 'Orphaned', fmt(c.orphaned), c.orphaned > 0 ? 'bad' : ''],
     ['oldest', 'Oldest pending', age(o.oldestPendingAt), ''],
     ['relay', 'Relay seen', o.relaySeenAt === null ? 'never' : age(o.relaySeenAt) + ' ago', '']
    ].forEach(function (x) {
      f.appendChild(el('div', { className: 'figure ' + x[3], 'data-figure': x[0] }, [
        el('div', { className: 'label', text: x[1] }), el('div', { className: 'value', text: x[2] })]));
    });
  }

  function renderChart(o) {
    var box = $('chart'); clear(box);
    var s = o.samples, W = Math.max(300, box.clientWidth || 600), H = 160, P = 40;
    var root = svg('svg', { viewBox: '0 0 ' + W + ' ' + (H + 20), role: 'img', 'aria-label': 'Backlog and throughput' });
    var rate = [];
    for (var i = 1; i < s.length; i++) {
      var dt = (s[i].at - s[i - 1].at) / 1000;
      var d = o.keepsDelivered ? s[i].delivered - s[i - 1].delivered : -(s[i].pending - s[i - 1].pending);
      rate.push({ at: s[i].at, v: dt > 0 ? Math.max(0, d / dt) : 0 });
    }
    var series = [
      { name: 'backlog (pending)', color: '#2f6fdb', points: s.map(function (x) { return { at: x.at, v: x.pending }; }) },
      { name: 'dead', color: '#c23b32', points: s.map(function (x) { return { at: x.at, v: x.dead }; }) },
      { name: o.keepsDelivered ? 'delivered / s' : 'drained / s (backlog fall)', color: '#2f855a', points: rate }
    ];
    var t0 = s.length ? s[0].at : 0, t1 = s.length ? s[s.length - 1].at : 1;
    root.appendChild(svg('line', { x1: P, y1: H, x2: W, y2: H, stroke: '#dde2e8' }));
    series.forEach(function (serie, k) {
      var max = Math.max(1, Math.max.apply(null, serie.points.map(function (p) { return p.v; }).concat([0])));
      var pts = serie.points.map(function (p) {
        var x = P + (t1 > t0 ? (p.at - t0) / (t1 - t0) : 1) * (W - P);
        return x.toFixed(1) + ',' + (H - (p.v / max) * (H - 10)).toFixed(1);
      }).join(' ');
      if (serie.points.length) root.appendChild(svg('polyline', { points: pts, fill: 'none', stroke: serie.color, 'stroke-width': 2, 'data-series': k }));
      root.appendChild(svg('text', { x: P + k * 220, y: H + 16, fill: serie.color, 'font-size': 11 }, serie.name + ' (max ' + fmt(Math.round(max * 10) / 10) + ')'));
    });
    var span = Math.round((t1 - t0) / 1000);
    root.appendChild(svg('text', { x: 0, y: 12, fill: '#5f6b7a', 'font-size': 11 }, s.length < 2 ? 'collecting…' : span + ' s'));
    box.appendChild(root);
  }

  function renderPartitions(o) {
    var body = $('partitions').tBodies[0]; clear(body);
    o.partitions.forEach(function (p) {
      body.appendChild(el('tr', { 'data-partition': p.partition }, [
        cell(p.partition + (p.orphaned ? ' (orphaned)' : '')),
        cell(p.leased ? p.owner : (p.owner ? p.owner + ' (expired)' : 'none'), p.leased ? 'state-live' : ''),
        cell(p.epoch, 'num'), cell(p.leased ? when(p.leaseUntil) : '–'), cell(fmt(p.backlog), 'num')]));
    });
    var nodes = $('nodes').tBodies[0]; clear(nodes);
    if (!o.nodes.length) nodes.appendChild(el('tr', {}, [el('td', { colspan: 4, className: 'note', text: 'No relaying node has sent a heartbeat recently.' })]));
    o.nodes.forEach(function (n) {
      nodes.appendChild(el('tr', {}, [cell(n.nodeId), cell(age(n.lastSeen) + ' ago'),
        cell(n.live ? 'live' : 'silent', n.live ? 'state-live' : 'state-dead'), cell(n.partitions.join(', ') || '–')]));
    });
  }

  // The search is a group-key prefix the database looks for among all blocked heads: its result
  // (state.search) replaces the overview's oldest heads while the box holds that term.
  function searchTerm() { return $('blocked-search').value.trim(); }
  function searchBlocked() {
    var term = searchTerm(), outbox = state.outbox;
    if (term === '') { state.search = null; return Promise.resolve(); }
    return api('blocked?' + query({ outbox: outbox, prefix: term })).then(function (data) {
      if (searchTerm() === term && state.outbox === outbox) state.search = { term: term, outbox: outbox, groups: data.groups, capped: data.capped };
    });
  }
  function renderBlocked(o) {
    var term = searchTerm();
    var body = $('blocked').tBodies[0]; clear(body);
    var found = state.search && state.search.term === term && state.search.outbox === o.name ? state.search : null;
    var groups = term === '' ? o.blocked : found ? found.groups : [];
    var total = o.counts.retryingGroups + o.counts.parkedGroups;
    $('blocked-note').textContent = term === ''
      ? (o.counts.blockedCapped ? 'the ' + o.blocked.length + ' oldest of ' + (o.counts.blockedExact ? '' : '≥ ') + fmt(total) + ' shown' : fmt(groups.length) + ' blocked')
      : !found ? 'searching…'
      : (found.capped ? 'the ' + groups.length + ' oldest' : groups.length) + ' with a key starting with “' + term + '”';
    groups.forEach(function (g) {
      var actions = el('td', {}, [
        el('button', { type: 'button', text: 'Messages', onclick: function () { showGroup(g.groupKey, g.parked ? 'dead' : 'pending'); } }),
        g.parked ? el('button', { type: 'button', className: 'change', text: 'Redrive', 'data-action': 'redrive', onclick: function () { redrive(g); } }) : null]);
      body.appendChild(el('tr', { 'data-group': g.groupKey }, [cell(g.groupKey), cell('#' + g.headId),
        cell(g.parked ? 'parked' : 'retrying', g.parked ? 'state-parked' : 'state-retrying'), cell(age(g.blockedSince) + ' ago'),
        cell(g.attempts, 'num'), cell(g.lastError, 'error'), actions]));
    });
  }

  function renderMessages() {
    var body = $('messages').tBodies[0]; clear(body);
    if (!state.messages.length) body.appendChild(el('tr', {}, [el('td', { colspan: 8, className: 'note', text: 'No message matches.' })]));
    state.messages.forEach(function (m) {
      var box = el('input', { type: 'checkbox', 'aria-label': 'Select message ' + m.id, onclick: function (e) {
        e.stopPropagation(); if (box.checked) state.selected.add(m.id); else state.selected.delete(m.id); } });
      box.checked = state.selected.has(m.id);
      var row = el('tr', { className: 'clickable', 'data-id': m.id, onclick: function () { openDetail(m); } }, [
        el('td', {}, [box]), cell(m.id, 'num'), cell(m.groupKey), cell(m.type), cell(m.state, 'state-' + m.state),
        cell(m.attempts, 'num'), cell(m.lastError, 'error'), cell(when(m.insertedAt))]);
      row.title = m.lastError || '';
      body.appendChild(row);
    });
    $('more').hidden = state.next === null;
    var group = $('filter-group').value.trim();
    $('retry-group').hidden = !(group !== '' && $('message-status').value === 'dead' && state.messages.length);
    $('retry-group').textContent = 'Retry all dead of group ' + group;
  }

  function filters(after) {
    return query({ outbox: state.outbox, status: $('message-status').value, group: $('filter-group').value.trim(),
      type: $('filter-type').value.trim(), error: $('filter-error').value.trim(), after: after, limit: 50 });
  }
  function loadMessages(more) {
    var upTo = state.messages.length;
    return api('messages?' + filters(more ? state.next : '')).then(function (page) {
      if (more) { state.messages = state.messages.concat(page.messages); state.next = page.next; }
      else {
        // A refresh keeps the pages already loaded: fetch as many again.
        state.messages = page.messages; state.next = page.next;
        if (upTo > page.messages.length && page.next !== null) return loadMessages(true);
      }
      var ids = new Set(state.messages.map(function (m) { return m.id; }));
      state.selected.forEach(function (id) { if (!ids.has(id)) state.selected.delete(id); });
      renderMessages();
    });
  }
  function showGroup(group, status) {
    $('filter-group').value = group; $('message-status').value = status;
    $('filter-type').value = ''; $('filter-error').value = '';
    state.selected.clear(); loadMessages(false).catch(fail);
  }

  function openDetail(m) {
    state.detail = m;
    $('detail').hidden = false;
    $('detail-title').textContent = 'Message #' + m.id;
    var dl = $('detail-fields'); clear(dl);
    [['Outbox', m.outbox], ['State', m.state], ['Group key', m.groupKey], ['Type', m.type], ['Partition', m.partition],
     ['Attempts', m.attempts], ['Published', when(m.insertedAt)], ['Failing since', when(m.failingSince)],
     ['Next attempt', when(m.nextAttemptAt)]].forEach(function (f) {
      dl.appendChild(el('dt', { text: f[0] })); dl.appendChild(el('dd', { text: f[1] === null || f[1] === undefined ? '–' : String(f[1]) }));
    });
    $('detail-payload').textContent = JSON.stringify(m.payload, null, 2);
    $('detail-headers').textContent = JSON.stringify(m.headers, null, 2);
    $('detail-error').textContent = m.lastError === null ? '–' : m.lastError;
    $('detail-retry').hidden = m.state !== 'dead';
  }

  function confirmChange(title, text, items, ok) {
    return new Promise(function (resolve) {
      $('confirm-title').textContent = title; $('confirm-text').textContent = text;
      var list = $('confirm-list'); clear(list);
      items.slice(0, 50).forEach(function (i) { list.appendChild(el('li', { text: i })); });
      if (items.length > 50) list.appendChild(el('li', { text: '… and ' + (items.length - 50) + ' more' }));
      $('confirm-ok').textContent = ok;
      $('confirm').hidden = false;
      var done = function (answer) { $('confirm').hidden = true; $('confirm-ok').onclick = null; $('confirm-cancel').onclick = null; resolve(answer); };
      $('confirm-ok').onclick = function () { done(true); };
      $('confirm-cancel').onclick = function () { done(false); };
    });
  }
  function describe(m) {
    return '#' + m.id + ' · ' + m.state + ' · group ' + (m.groupKey === null ? '(none)' : m.groupKey) + ' · type ' + (m.type === null ? '(none)' : m.type);
  }
  function change(path, body, message) {
    if (state.busy) return Promise.resolve();
    state.busy = true;
    return api(path, body).then(function (r) {
      setStatus(message.replace('{n}', r.affected));
      state.selected.clear();
      return refresh();
    }).catch(fail).then(function () { state.busy = false; });
  }
  function retry(ids) { return change('retry', { outbox: state.outbox, ids: ids }, 'Retried {n} dead message(s).'); }
  function discard(messages) {
    var groups = Array.from(new Set(messages.map(function (m) { return m.groupKey; }).filter(function (g) { return g !== null; })));
    return confirmChange('Discard ' + messages.length + ' message(s) for good?',
      'These messages are deleted and will never be delivered; their payloads are lost.' + (groups.length ? ' Later messages of group(s) ' + groups.join(', ') + ' move on without them.' : ''),
      messages.map(describe), 'Discard ' + messages.length).then(function (yes) {
      if (!yes) return;
      $('detail').hidden = true;
      return change('discard', { outbox: state.outbox, ids: messages.map(function (m) { return m.id; }) }, 'Discarded {n} message(s).');
    });
  }
  function redrive(g) {
    return confirmChange('Redrive group ' + g.groupKey + '?', 'Its dead messages become pending again, in their order, and are delivered before the messages waiting behind them.', [], 'Redrive').then(function (yes) {
      if (yes) return change('redrive', { outbox: state.outbox, group: g.groupKey }, 'Redrove {n} message(s).');
    });
  }
  function selected() { return state.messages.filter(function (m) { return state.selected.has(m.id); }); }

  function fail(error) { setStatus(String(error && error.message || error), true); }

  function refresh() {
    return api('overview').then(function (data) {
      state.overview = data; state.token = data.token; state.mutations = data.mutations;
      document.body.classList.toggle('readonly', !data.mutations);
      $('mode').textContent = data.mutations ? 'changes allowed' : 'read-only';
      $('mode').className = 'badge' + (data.mutations ? ' on' : '');
      renderOutboxes(data.outboxes);
      var o = current();
      if (o) { renderFigures(o); renderChart(o); renderPartitions(o); }
      return searchBlocked().then(function () { var now = current(); if (now) renderBlocked(now); });
    }).then(function () {
      return loadMessages(false);
    }).then(function () { if (!state.busy) setStatus('Updated ' + new Date().toLocaleTimeString()); });
  }

  $('outbox-select').addEventListener('change', function (e) { state.outbox = e.target.value; state.messages = []; state.selected.clear(); refresh().catch(fail); });
  var searching = null;
  $('blocked-search').addEventListener('input', function () {
    var o = current(); if (o) renderBlocked(o);
    clearTimeout(searching);
    searching = setTimeout(function () { searchBlocked().then(function () { var now = current(); if (now) renderBlocked(now); }).catch(fail); }, 250);
  });
  $('apply-filters').addEventListener('click', function () { state.selected.clear(); loadMessages(false).catch(fail); });
  $('message-status').addEventListener('change', function () { state.selected.clear(); loadMessages(false).catch(fail); });
  $('more').addEventListener('click', function () { loadMessages(true).catch(fail); });
  $('select-all').addEventListener('click', function (e) {
    state.messages.forEach(function (m) { if (e.target.checked) state.selected.add(m.id); else state.selected.delete(m.id); });
    renderMessages();
  });
  $('retry-selected').addEventListener('click', function () {
    var dead = selected().filter(function (m) { return m.state === 'dead'; });
    if (dead.length) retry(dead.map(function (m) { return m.id; }));
  });
  $('retry-group').addEventListener('click', function () {
    var group = $('filter-group').value.trim();
    if (group !== '') change('retry', { outbox: state.outbox, group: group }, 'Retried {n} dead message(s) of group ' + group + ', in order.');
  });
  $('discard-selected').addEventListener('click', function () { var s = selected(); if (s.length) discard(s); });
  // A message found by its id, pending or dead, whatever the filters: what an operator has from a log line.
  function openById() {
    var id = $('find-id').value.trim();
    if (!/^[0-9]+$/.test(id)) return fail('A message id is a whole number.');
    api('message?' + query({ outbox: state.outbox, id: id })).then(openDetail).catch(fail);
  }
  $('open-id').addEventListener('click', openById);
  $('find-id').addEventListener('keydown', function (e) { if (e.key === 'Enter') openById(); });
  $('detail-close').addEventListener('click', function () { $('detail').hidden = true; });
  $('detail-retry').addEventListener('click', function () { $('detail').hidden = true; retry([state.detail.id]); });
  $('detail-discard').addEventListener('click', function () { discard([state.detail]); });

  var timer = null, looping = false;
  // A slow refresh (a database under load) waits longer before the next.
  // A page nobody looks at (a background tab left open all night) asks nothing: it refreshes again
  // the moment it is shown.
  function loop() {
    timer = null;
    looping = document.visibilityState !== 'hidden';
    if (!looping) return;
    var started = Date.now();
    refresh().catch(fail).then(function () { timer = setTimeout(loop, Math.max(interval, 4 * (Date.now() - started))); });
  }
  loop();
  document.addEventListener('visibilitychange', function () {
    if (document.visibilityState === 'visible' && !looping) loop();
  });
  window.addEventListener('pagehide', function () { clearTimeout(timer); });
})();
`;
