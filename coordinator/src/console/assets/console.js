// flink-autoscale console: progressive enhancement only. Every page works without this
// script; with it, the parts marked data-refresh="SECONDS" are fetched again and replaced in
// place (the pending list, the audit, the fleet), unless the person is typing in them.
"use strict";

(function () {
  function busy(element) {
    var active = document.activeElement;
    if (active && element.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) {
      return true;
    }
    var fields = element.querySelectorAll("textarea, input[type=text]");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== fields[i].defaultValue) return true;
    }
    return false;
  }

  function refresh(element, seconds) {
    setTimeout(function tick() {
      if (document.hidden || busy(element)) {
        setTimeout(tick, seconds * 1000);
        return;
      }
      fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (response) {
          if (response.redirected || !response.ok) throw new Error("HTTP " + response.status);
          return response.text();
        })
        .then(function (text) {
          var fresh = new DOMParser().parseFromString(text, "text/html").getElementById(element.id);
          if (fresh && !busy(element)) {
            element.replaceWith(fresh);
            element = fresh;
            var stamp = document.createElement("div");
            stamp.className = "refreshed";
            stamp.textContent = "updated " + new Date().toLocaleTimeString();
            element.appendChild(stamp);
          }
        })
        .catch(function () { /* keep the page as it is; try again later */ })
        .then(function () { setTimeout(tick, seconds * 1000); });
    }, seconds * 1000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var parts = document.querySelectorAll("[data-refresh][id]");
    for (var i = 0; i < parts.length; i++) {
      var seconds = parseInt(parts[i].getAttribute("data-refresh"), 10);
      if (seconds > 0) refresh(parts[i], seconds);
    }
  });
})();
