// Sorting and filtering of the leaderboard tables (every table.board). Reads cell text through textContent only.
(function () {
  "use strict";
  var tables = document.querySelectorAll("table.board");
  if (!tables.length) return;

  function cellValue(row, index, kind) {
    var cell = row.cells[index];
    var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent;
    if (kind === "num") {
      var v = parseFloat(raw);
      return isNaN(v) ? null : v;
    }
    return raw.trim().toLowerCase();
  }

  Array.prototype.forEach.call(tables, function (table) {
    var tbody = table.tBodies[0];
    var headers = table.tHead.rows[0].cells;
    function sortBy(index) {
      var th = headers[index];
      var kind = th.getAttribute("data-sort");
      // Numbers start high-to-low (best first), text A-to-Z; a second click flips.
      var current = th.getAttribute("aria-sort");
      var dir = current ? (current === "ascending" ? "descending" : "ascending") : (kind === "num" ? "descending" : "ascending");
      for (var i = 0; i < headers.length; i++) headers[i].removeAttribute("aria-sort");
      th.setAttribute("aria-sort", dir);
      var sign = dir === "ascending" ? 1 : -1;
      var rows = Array.prototype.slice.call(tbody.rows);
      rows.sort(function (a, b) {
        var x = cellValue(a, index, kind), y = cellValue(b, index, kind);
        if (x === null && y === null) return 0;
        if (x === null || x === "") return 1;   // missing values always last
        if (y === null || y === "") return -1;
        return x < y ? -sign : x > y ? sign : 0;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
    }
    Array.prototype.forEach.call(headers, function (th, index) {
      if (th.hasAttribute("data-sort")) th.addEventListener("click", function () { sortBy(index); });
    });
  });

  var filters = { size: document.getElementById("filter-size"), type: document.getElementById("filter-type"),
                  source: document.getElementById("filter-source") };
  var shown = document.getElementById("shown");
  function applyFilters() {
    var n = 0, total = 0;
    Array.prototype.forEach.call(tables, function (table) {
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        total++;
        var ok = Object.keys(filters).every(function (k) {
          var want = filters[k] && filters[k].value;
          return !want || row.getAttribute("data-" + k) === want;
        });
        row.hidden = !ok;
        if (ok) n++;
      });
    });
    if (shown) shown.textContent = n + " of " + total + " rows";
  }
  Object.keys(filters).forEach(function (k) {
    if (filters[k]) filters[k].addEventListener("change", applyFilters);
  });
})();
