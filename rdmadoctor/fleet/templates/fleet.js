(function () {
  "use strict";
  var table = document.getElementById("nodes-table");
  var search = document.getElementById("node-search");
  var status = document.getElementById("status-filter");
  var shown = document.getElementById("shown-count");
  var heat = document.querySelector(".heat");
  var keyChip = document.getElementById("key-filter");
  var keyLabel = document.getElementById("key-filter-label");
  var keyFilter = "";
  if (!table) { return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);
  var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
  var RANK = {failure: 0, unknown: 1, warning: 2, ok: 3};

  function apply() {
    var words = (search.value || "").toLowerCase().split(/\s+/).filter(Boolean);
    var want = status.value;
    var n = 0;
    var matched = {};
    rows.forEach(function (row, i) {
      var ok = (!want || row.getAttribute("data-status") === want) &&
        (!keyFilter || row.getAttribute("data-key") === keyFilter) &&
        words.every(function (w) { return texts[i].indexOf(w) >= 0; });
      row.classList.toggle("hidden", !ok);
      if (ok) { n++; matched[row.id] = true; }
    });
    shown.textContent = n + " of " + rows.length + " shown";
    if (heat) {
      var filtering = words.length > 0 || !!want || !!keyFilter;
      heat.classList.toggle("filtered", filtering);
      var cells = heat.children;
      for (var i = 0; i < cells.length; i++) {
        var id = (cells[i].getAttribute("href") || "").slice(1);
        cells[i].classList.toggle("match", filtering && !!matched[id]);
      }
    }
  }
  search.addEventListener("input", apply);
  keyChip.addEventListener("click", function () { keyFilter = ""; keyChip.hidden = true; apply(); });
  status.addEventListener("change", apply);

  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest(".js-filter") : null;
    if (!button) { return; }
    keyFilter = button.getAttribute("data-key") || "";
    keyLabel.textContent = button.getAttribute("data-label") || keyFilter;
    keyChip.hidden = !keyFilter;
    search.value = "";
    status.value = "";
    apply();
    document.getElementById("nodes").scrollIntoView({block: "start"});
  });

  function cellValue(row, index, kind) {
    var cell = row.cells[index];
    var text = cell ? cell.textContent.trim() : "";
    if (kind === "number") { var v = parseFloat(text); return isNaN(v) ? Infinity : v; }
    if (kind === "status") { return RANK[row.getAttribute("data-status")]; }
    return text.toLowerCase();
  }
  var collator = new Intl.Collator(undefined, {numeric: true, sensitivity: "base"});
  Array.prototype.forEach.call(document.querySelectorAll("table.js-sort"), function (t) {
    var heads = t.tHead ? t.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, index) {
      var button = th.querySelector("button.sort");
      if (!button) { return; }
      button.addEventListener("click", function () {
        var kind = th.getAttribute("data-sort") || "text";
        var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir);
        var tb = t.tBodies[0];
        var list = Array.prototype.slice.call(tb.rows);
        var keyed = list.map(function (r, i) { return {row: r, key: cellValue(r, index, kind), i: i}; });
        keyed.sort(function (x, y) {
          var c = (typeof x.key === "string") ? collator.compare(x.key, y.key) : (x.key - y.key);
          if (c === 0) { c = x.i - y.i; }
          return dir === "ascending" ? c : -c;
        });
        var frag = document.createDocumentFragment();
        keyed.forEach(function (k) { frag.appendChild(k.row); });
        tb.appendChild(frag);
      });
    });
  });
})();
