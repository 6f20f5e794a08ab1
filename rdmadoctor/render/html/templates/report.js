(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.remove("no-js");

  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "copy-buffer";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    return ok;
  }

  function done(button, ok) {
    button.textContent = ok ? "Copied" : "Select and copy";
    button.setAttribute("data-copied", ok ? "yes" : "no");
    window.setTimeout(function () {
      button.textContent = "Copy";
      button.removeAttribute("data-copied");
    }, 2000);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button.copy") : null;
    if (!button) { return; }
    var text = button.getAttribute("data-copy") || "";
    window.__rdmadoctorLastCopy = text;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(button, true); },
        function () { done(button, fallbackCopy(text)); });
    } else {
      done(button, fallbackCopy(text));
    }
  });

  var expand = document.getElementById("expand-all");
  if (expand) {
    expand.addEventListener("click", function () {
      var all = document.querySelectorAll("details");
      var open = expand.getAttribute("data-open") !== "yes";
      for (var i = 0; i < all.length; i++) { all[i].open = open; }
      expand.setAttribute("data-open", open ? "yes" : "no");
      expand.textContent = open ? "Collapse all" : "Expand all";
    });
  }

  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    for (var node = el; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") { node.open = true; }
    }
    if (el) { el.scrollIntoView({block: "center"}); }
  }
  window.addEventListener("hashchange", openTarget);

  var closed = [];
  window.addEventListener("beforeprint", function () {
    var all = document.querySelectorAll("details:not([open])");
    closed = [];
    for (var i = 0; i < all.length; i++) { all[i].open = true; closed.push(all[i]); }
  });
  window.addEventListener("afterprint", function () {
    for (var i = 0; i < closed.length; i++) { closed[i].open = false; }
    closed = [];
  });
})();
