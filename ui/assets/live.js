// Dyeline live updates. The server sends an SSE `change` event when the data behind the pages
// may have changed; this script then fetches the same URL and swaps the page's <main>. It
// skips (and retries later) while the user is typing in a form. Pages work without it.
// The "browser" time zone choice (<html data-tz="browser">): report the browser's zone in the
// dyeline_browser_tz cookie and reload once, so the server renders times in it. Without
// JavaScript the page shows the configured zone and says so.
(function () {
  "use strict";
  if (document.documentElement.getAttribute("data-tz") !== "browser" || !window.Intl) return;
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (!zone) return;
  var have = (document.cookie.match(/(?:^|; )dyeline_browser_tz=([^;]*)/) || [])[1];
  if (have && decodeURIComponent(have) === zone) return;
  document.cookie = "dyeline_browser_tz=" + encodeURIComponent(zone) +
    "; Path=/; SameSite=Lax; Max-Age=31536000";
  // Reload only when the cookie took (never a loop with cookies off).
  var now = (document.cookie.match(/(?:^|; )dyeline_browser_tz=([^;]*)/) || [])[1];
  if (now && decodeURIComponent(now) === zone) location.reload();
})();
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || main.dataset.live !== "1" || !window.EventSource || !window.fetch) return;
  var busy = false, again = false;
  function typing() {
    var a = document.activeElement;
    return a && a.form && a !== document.body && (a.tagName === "INPUT" || a.tagName === "SELECT");
  }
  function refresh() {
    if (busy || typing()) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var next = new DOMParser().parseFromString(html, "text/html").getElementById("main");
        var cur = document.getElementById("main");
        if (next && cur) {
          cur.replaceWith(next);
          document.body.setAttribute("data-refreshed", String(Date.now()));
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; setTimeout(refresh, 500); }
      });
  }
  var source = new EventSource("/live");
  source.addEventListener("change", refresh);
  document.body.setAttribute("data-live", "connected");
})();
