// The review page's keyboard: p = pass, f = fail, n = next section (after the last: the submit
// confirmation, then Tab to the button).
// The sections are read in a fixed order; the active one carries the class "active".
(function () {
  "use strict";
  var active = 0;

  function sections() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-section]"));
  }

  function show() {
    sections().forEach(function (s, i) { s.classList.toggle("active", i === active); });
  }

  function activate(i) {
    var all = sections();
    if (!all.length) return;
    active = Math.max(0, Math.min(i, all.length - 1));
    show();
    all[active].scrollIntoView({ block: "nearest" });
  }

  function press(value) {
    var section = sections()[active];
    if (!section) return;
    var button = section.querySelector(".cell button[name=passed][value=" + value + "]");
    if (button && !button.disabled) button.click();
  }

  function next() {
    var all = sections();
    if (active < all.length - 1) {
      activate(active + 1);
      return;
    }
    var confirm = document.getElementById("confirm-submit");
    var submit = (confirm && !confirm.disabled && confirm) || document.getElementById("submit-review") ||
      document.getElementById("next-in-queue");
    if (submit) submit.focus();
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    // Typing a note (or in any field) is never a shortcut.
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
    if (event.key === "p") { press("true"); event.preventDefault(); }
    else if (event.key === "f") { press("false"); event.preventDefault(); }
    else if (event.key === "n") { next(); event.preventDefault(); }
  });

  // Clicking into a section makes it the active one.
  document.addEventListener("click", function (event) {
    var section = event.target.closest && event.target.closest("[data-section]");
    if (section) {
      var i = sections().indexOf(section);
      if (i >= 0 && i !== active) { active = i; show(); }
    }
  });

  // htmx swaps cells and the diff section in place: keep the highlight.
  document.addEventListener("htmx:afterSettle", show);
  document.addEventListener("DOMContentLoaded", show);
  if (document.readyState !== "loading") show();
})();
