// cordis web: disclosures, local times and live updates. No build step, no
// dependency; the pages work without it, only less.
(function () {
  'use strict';

  // Disclosures: a button with aria-expanded shows and hides the element
  // its aria-controls names (the plan strip, a tool row, reasoning).
  document.addEventListener('click', function (e) {
    var button = e.target.closest && e.target.closest('button[aria-controls]');
    if (!button) return;
    var panel = document.getElementById(button.getAttribute('aria-controls'));
    if (!panel) return;
    var open = button.getAttribute('aria-expanded') !== 'true';
    button.setAttribute('aria-expanded', open ? 'true' : 'false');
    panel.hidden = !open;
  });

  var lang = document.documentElement.lang || 'en';
  function localTimes(root) {
    var times = root.querySelectorAll('time[datetime]');
    for (var i = 0; i < times.length; i++) {
      var d = new Date(times[i].getAttribute('datetime'));
      if (!isNaN(d.getTime())) {
        times[i].title = times[i].textContent;
        times[i].textContent = d.toLocaleString(lang);
      }
    }
  }
  localTimes(document);

  function parse(html) {
    var t = document.createElement('template');
    t.innerHTML = html;
    return t.content.firstElementChild;
  }

  // Replaces `old` by `next`, keeping open what the reader opened.
  function replace(old, next) {
    var opened = old.querySelectorAll('button[aria-expanded="true"]');
    for (var i = 0; i < opened.length; i++) {
      var b = next.querySelector('button[aria-controls="' + opened[i].getAttribute('aria-controls') + '"]');
      var p = b && next.querySelector('#' + CSS.escape(b.getAttribute('aria-controls')));
      if (b && p) { b.setAttribute('aria-expanded', 'true'); p.hidden = false; }
    }
    var focused = old.contains(document.activeElement) && document.activeElement.getAttribute('aria-controls');
    old.replaceWith(next);
    if (focused) {
      var again = next.querySelector('button[aria-controls="' + focused + '"]');
      if (again) again.focus();
    }
    localTimes(next);
  }

  function upsert(container, id, html) {
    var next = parse(html);
    if (!next) return;
    var old = document.getElementById(id);
    if (old) { replace(old, next); return; }
    container.appendChild(next);
    localTimes(next);
  }

  var main = document.getElementById('main');
  var url = main && main.getAttribute('data-live');
  if (!url || !window.EventSource) return;
  var status = document.getElementById('live-status');
  // The stream's state: 'on' (heartbeats arrive), 'stale' (none for two
  // intervals: the stream is reopened), 'off' (the browser reconnects).
  // The status line is written only when the state changes, so a screen
  // reader hears each change once.
  var state = null;
  function show(next) {
    if (next === state) return;
    state = next;
    main.setAttribute('data-live-state', next);
    if (!status) return;
    status.textContent = main.getAttribute('data-live-' + next);
    status.className = next === 'on' ? 'live-status' : 'live-status off';
  }
  var beat = Number(main.getAttribute('data-beat')) || 15000;
  var heard = 0, opened = 0, source = null;
  // The stream's address, resuming after what the page shows.
  function address() {
    var last = main.getAttribute('data-last');
    if (last === null || last === '' || last === 'null') return url;
    return url.replace(/([?&])after=[^&]*&?/, '$1').replace(/[?&]$/, '') + (url.indexOf('?') < 0 ? '?' : '&') + 'after=' + encodeURIComponent(last);
  }
  function heardNow() { heard = Date.now(); show('on'); }
  var handlers = {update: onUpdate, rows: onRows, snapshot: onSnapshot};
  // An event of the page's stream; its id is remembered, so that the
  // stream resumes after it.
  function deliver(name, data, id) {
    heardNow();
    if (handlers[name]) handlers[name](data);
    if (id) main.setAttribute('data-last', id);
  }

  // One connection per browser: pages share the stream of a shared worker
  // (assets/worker.js) that multiplexes every page's stream on one
  // connection. Browsers without shared workers get a stream per page.
  var worker = null;
  if (window.SharedWorker) {
    try { worker = new SharedWorker('/assets/worker.js', {name: 'cordis-web'}); } catch (e) { worker = null; }
  }
  function connect() {
    opened = Date.now();
    if (worker) {
      worker.port.postMessage({type: 'watch', url: url, last: main.getAttribute('data-last')});
      return;
    }
    if (source) source.close();
    source = new EventSource(address());
    source.onopen = heardNow;
    source.onerror = function () { if (source.readyState !== EventSource.OPEN) show('off'); };
    source.addEventListener('beat', heardNow);
    Object.keys(handlers).forEach(function (name) {
      source.addEventListener(name, function (e) { deliver(name, JSON.parse(e.data), e.lastEventId); });
    });
  }
  if (worker) {
    worker.port.onmessage = function (m) {
      var d = m.data || {};
      if (d.type === 'open' || d.type === 'beat') heardNow();
      else if (d.type === 'error') show('off');
      else if (d.type === 'event') deliver(d.event, d.data, d.id);
    };
    worker.port.start();
    // Leaving (or entering the back-forward cache) gives the page's place
    // on the shared stream up; coming back takes it again.
    window.addEventListener('pagehide', function () { worker.port.postMessage({type: 'bye'}); });
    window.addEventListener('pageshow', function (e) { if (e.persisted) connect(); });
    setInterval(function () { worker.port.postMessage({type: 'alive'}); }, 10000);
  }
  setInterval(function () {
    var now = Date.now();
    if (now - heard > 2 * beat && now - opened > 2 * beat) {
      if (state === 'on') show('stale');
      if (worker) {
        opened = now;
        worker.port.postMessage({type: 'reconnect'});
      } else {
        connect();
      }
    }
  }, 1000);

  // A session page: items that changed, then the header, plans and pager.
  // A changed plan is announced (the strip is replaced, and a replaced
  // element is not read out); items before the window's start are dropped,
  // so a page open for long keeps a bounded number.
  function planText() {
    var strips = document.querySelectorAll('#plans .plan-head');
    return Array.prototype.map.call(strips, function (s) { return s.textContent; }).join('; ');
  }
  function onUpdate(d) {
    var items = document.getElementById('items');
    for (var i = 0; i < d.items.length; i++) upsert(items, d.items[i].id, d.items[i].html);
    var before = planText();
    ['head', 'plans', 'pager'].forEach(function (k) {
      var old = document.getElementById(k);
      var next = d[k] && parse(d[k]);
      if (old && next) replace(old, next);
    });
    var after = planText();
    var said = document.getElementById('plan-said');
    if (said && after && after !== before) said.textContent = after;
    if (typeof d.from === 'number' && items) {
      while (items.firstElementChild) {
        var m = /^i(\d+)/.exec(items.firstElementChild.id);
        if (!m || Number(m[1]) >= d.from) break;
        items.firstElementChild.remove();
      }
    }
  }

  // The list: changed rows move to the top (the most recently updated).
  // The list, whole: the page's state could not be brought up to date row
  // by row (the server restarted, or the stream fell behind).
  function onSnapshot(d) {
    var rows = document.getElementById('rows');
    if (!rows) return;
    var t = document.createElement('template');
    t.innerHTML = d.html;
    rows.replaceChildren(t.content);
    localTimes(rows);
    var empty = document.getElementById('empty');
    if (empty && d.count) empty.remove();
  }

  function onRows(d) {
    var rows = document.getElementById('rows');
    if (!rows) return;
    for (var i = 0; i < d.rows.length; i++) {
      var r = d.rows[i];
      var old = document.getElementById(r.id);
      if (r.removed) { if (old) old.remove(); continue; }
      if (old) old.remove();
      var next = parse(r.html);
      if (!next) continue;
      var at = null;
      for (var c = rows.firstElementChild; c; c = c.nextElementSibling) {
        if (Number(c.getAttribute('data-updated')) <= r.updated) { at = c; break; }
      }
      rows.insertBefore(next, at);
      localTimes(next);
    }
    var empty = document.getElementById('empty');
    if (empty && rows.children.length) empty.remove();
  }

  connect();
})();
