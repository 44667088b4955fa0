// raftsched console: refresh the page's live region without a reload, and confirm dangerous
// actions. Hand-written and dependency-free (see docs/guide/console.md).
(function () {
  "use strict";
  var live = document.getElementById("live");
  var status = document.getElementById("live-status");

  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var question = button && button.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

  if (!live) { return; }
  var every = Number(live.getAttribute("data-refresh") || "0") * 1000;
  if (!every) { return; }
  var busy = false;

  function typing() {
    var a = document.activeElement;
    return a && live.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName);
  }

  function refresh() {
    if (busy || document.hidden || typing()) { return; }
    busy = true;
    var focusedId = document.activeElement && document.activeElement.id;
    fetch(window.location.href, {
      headers: { "X-Console-Live": "1" },
      credentials: "same-origin",
      cache: "no-store",
      redirect: "manual"
    }).then(function (response) {
      if (response.status === 200) {
        return response.text().then(function (html) {
          live.innerHTML = html;
          live.setAttribute("data-updated", String(Date.now()));
          if (focusedId) {
            var again = document.getElementById(focusedId);
            if (again) { again.focus(); }
          }
          if (status) { status.textContent = "updated " + new Date().toLocaleTimeString(); }
        });
      }
      if (response.status === 401 || response.type === "opaqueredirect") {
        window.location.reload();  // signed out: the full page goes to the sign-in form
        return;
      }
      if (status) { status.textContent = "refresh failed (" + response.status + "); retrying"; }
    }).catch(function () {
      if (status) { status.textContent = "node unreachable; retrying"; }
    }).then(function () { busy = false; });
  }

  window.setInterval(refresh, every);
})();
