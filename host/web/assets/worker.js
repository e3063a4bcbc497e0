// cordis web: one live connection for every page of the server open in
// this browser. Each page (a tab) sends its live address; the worker holds
// one EventSource on /mux carrying every page's stream, and hands each
// event to its page. It opens the stream again when a page comes or goes,
// each page resuming after the last event it had.
'use strict';

var pages = [];      // {port, url, last, seen}
var current = [];    // the pages, in the order of the open stream's subs
var source = null;
var timer = null;

function post(page, message) {
  try { page.port.postMessage(message); } catch (e) { /* the page is gone */ }
}

function everyone(message) {
  for (var i = 0; i < pages.length; i++) post(pages[i], message);
}

// A page's live address, resuming after its last event.
function resume(page) {
  if (!page.last) return page.url;
  var url = page.url.replace(/([?&])after=[^&]*&?/, '$1').replace(/[?&]$/, '');
  return url + (url.indexOf('?') < 0 ? '?' : '&') + 'after=' + encodeURIComponent(page.last);
}

function open() {
  timer = null;
  if (source) { source.close(); source = null; }
  current = pages.filter(function (p) { return p.url; });
  if (!current.length) return;
  var url = '/mux?' + current.map(function (p) { return 'sub=' + encodeURIComponent(resume(p)); }).join('&');
  var mine = source = new EventSource(url);
  var subs = current;
  mine.onopen = function () { if (source === mine) everyone({type: 'open'}); };
  // A broken stream is opened again by the worker, not by the browser's
  // own retry, so that each page resumes after its last event.
  mine.onerror = function () {
    if (source !== mine || mine.readyState === EventSource.OPEN) return;
    everyone({type: 'error'});
    mine.close();
    setTimeout(function () { if (source === mine) open(); }, 1000);
  };
  mine.addEventListener('beat', function () { if (source === mine) everyone({type: 'beat'}); });
  mine.addEventListener('mux', function (e) {
    if (source !== mine) return;
    var d = JSON.parse(e.data);
    var page = subs[d.sub];
    if (!page || pages.indexOf(page) < 0) return;
    if (d.id) page.last = d.id;
    post(page, {type: 'event', event: d.event, id: d.id || '', data: d.data});
  });
}

// Pages come and go in bursts (a window of tabs restored): open once.
function soon() {
  if (timer === null) timer = setTimeout(open, 50);
}

function leave(page) {
  var at = pages.indexOf(page);
  if (at >= 0) { pages.splice(at, 1); soon(); }
}

self.onconnect = function (e) {
  var page = {port: e.ports[0], url: null, last: null, seen: Date.now()};
  pages.push(page);
  page.port.onmessage = function (m) {
    var d = m.data || {};
    page.seen = Date.now();
    if (d.type === 'watch') {
      page.url = d.url;
      page.last = d.last || null;
      soon();
    } else if (d.type === 'bye') {
      leave(page);
    } else if (d.type === 'reconnect') {
      soon();
    }
  };
  page.port.start();
};

// A page that closed without saying so (a crash, a killed tab) stops
// sending `alive`: it is dropped after a minute.
setInterval(function () {
  var now = Date.now();
  pages.slice().forEach(function (p) { if (now - p.seen > 60000) leave(p); });
}, 10000);
