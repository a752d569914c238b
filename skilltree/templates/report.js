(function () {
  "use strict";
  var tip = document.getElementById("tip");
  document.addEventListener("mousemove", function (event) {
    var target = event.target.closest ? event.target.closest("[data-tip]") : null;
    if (!target) { tip.hidden = true; return; }
    tip.textContent = target.getAttribute("data-tip");
    tip.hidden = false;
    tip.style.left = Math.max(4, Math.min(event.clientX + 12, window.innerWidth - tip.offsetWidth - 8)) + "px";
    tip.style.top = (event.clientY + 14) + "px";
  });

  var files = JSON.parse(document.getElementById("files").textContent || "{}");
  var viewer = document.getElementById("viewer");
  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a.file") : null;
    if (!link) { return; }
    event.preventDefault();
    var path = link.getAttribute("data-path");
    document.getElementById("viewer-path").textContent = path;
    document.getElementById("viewer-text").textContent = files[path] || "";
    viewer.showModal();
  });
  document.getElementById("viewer-close").addEventListener("click", function () { viewer.close(); });

  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, column) {
      th.addEventListener("click", function () {
        var descending = !th.classList.contains("desc");
        table.querySelectorAll("th").forEach(function (other) { other.classList.remove("asc", "desc"); });
        th.classList.add(descending ? "desc" : "asc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[column], y = b.cells[column];
          var vx = x.hasAttribute("data-value") ? parseFloat(x.getAttribute("data-value")) : x.textContent.toLowerCase();
          var vy = y.hasAttribute("data-value") ? parseFloat(y.getAttribute("data-value")) : y.textContent.toLowerCase();
          var order = vx < vy ? -1 : vx > vy ? 1 : 0;
          return descending ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
  document.documentElement.setAttribute("data-ready", "1");
})();
