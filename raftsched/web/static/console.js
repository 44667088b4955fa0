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

  // A form of the live region that posts (an action, not a filter) holding what the user
  // entered: a refresh would throw it away, so the region waits until it is posted or the page
  // reloaded. A text input's value has no line breaks (the browser strips them); its default
  // may: compared without them.
  function edited() {
    var fields = live.querySelectorAll("form[method=post] input, form[method=post] textarea, form[method=post] select");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.tagName === "SELECT") {
        var first = 0;  // the option shown at load: the one marked selected, else the first
        for (var j = 0; j < f.options.length; j++) {
          if (f.options[j].defaultSelected) { first = j; }
        }
        if (f.options.length && f.selectedIndex !== first) { return true; }
      } else if (f.type === "checkbox" || f.type === "radio") {
        if (f.checked !== f.defaultChecked) { return true; }
      } else if (f.tagName === "TEXTAREA") {
        if (f.value !== f.defaultValue) { return true; }
      } else if (f.type !== "hidden" && f.value !== f.defaultValue.replace(/[\r\n]/g, "")) {
        return true;
      }
    }
    return false;
  }

  function refresh() {
    if (busy || document.hidden) { return; }
    var held = typing() ? "typing" : edited() ? "edited" : "";
    if (held) {
      live.setAttribute("data-held", held);  // why this tick did not refresh (tests read it)
      if (status) {
        status.textContent = held === "edited" ? "refresh paused: a form holds unsaved input" : "";
      }
      return;
    }
    live.removeAttribute("data-held");
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
