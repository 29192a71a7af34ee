// prbj view: keyboard steps (j next, k previous; on the table j/k move the highlight and Enter opens the row)
// and the "scoring standard" toggle kept in the URL. Everything else works without script.
(function () {
  "use strict";
  function typing(event) {
    var t = event.target;
    return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
  }
  var rows = Array.prototype.slice.call(document.querySelectorAll("table.judgments tbody tr"));
  var current = -1;
  function highlight(index) {
    if (!rows.length) { return; }
    current = Math.max(0, Math.min(rows.length - 1, index));
    rows.forEach(function (row, i) { row.classList.toggle("current", i === current); });
    rows[current].scrollIntoView({ block: "nearest" });
  }
  function follow(id) {
    var link = document.getElementById(id);
    if (link && link.href) { window.location.href = link.href; }
  }
  document.addEventListener("keydown", function (event) {
    if (typing(event) || event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (rows.length) {
      if (event.key === "j") { highlight(current + 1); event.preventDefault(); }
      else if (event.key === "k") { highlight(current - 1); event.preventDefault(); }
      else if (event.key === "Enter" && current >= 0) {
        var open = rows[current].querySelector("a.open");
        if (open) { window.location.href = open.href; }
      }
      return;
    }
    if (event.key === "j") { follow("next-pair"); }
    else if (event.key === "k") { follow("prev-pair"); }
  });
  var standard = document.getElementById("standard");
  if (standard && window.history && window.URLSearchParams && window.location.protocol !== "file:") {
    var params = new URLSearchParams(window.location.search);
    if (params.get("standard") === "1") { standard.open = true; }
    standard.addEventListener("toggle", function () {
      var now = new URLSearchParams(window.location.search);
      if (standard.open) { now.set("standard", "1"); } else { now.delete("standard"); }
      var query = now.toString();
      window.history.replaceState(null, "", window.location.pathname + (query ? "?" + query : ""));
    });
  }
})();
