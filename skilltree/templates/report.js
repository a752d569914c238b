(function () {
  "use strict";
  var tip = document.getElementById("tip");
  document.addEventListener("mousemove", function (event) {
    var target = event.target.closest ? event.target.closest("[data-tip]") : null;
    if (!target) { tip.hidden = true; return; }
    tip.textContent = target.getAttribute("data-tip");
    tip.hidden = false;
    tip.style.left = Math.min(event.clientX + 12, window.innerWidth - tip.offsetWidth - 8) + "px";
    tip.style.top = (event.clientY + 14) + "px";
  });

  var focused = null;
  function focus(category) {
    focused = focused === category ? null : category;
    document.querySelectorAll("[data-category]").forEach(function (el) {
      if (el.classList.contains("chip")) {
        el.classList.toggle("on", el.getAttribute("data-category") === focused);
      } else {
        el.classList.toggle("dim", focused !== null && el.getAttribute("data-category") !== focused);
      }
    });
  }
  document.querySelectorAll(".chip, circle.category").forEach(function (el) {
    el.addEventListener("click", function () { focus(el.getAttribute("data-category")); });
  });

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
