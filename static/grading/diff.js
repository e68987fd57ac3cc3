// The review page's diff: a click anywhere on a line opens its comment box (the line's "Comment" link, which
// the keyboard reaches with Tab); and the switch between the unified view and the side-by-side one, kept in
// this browser. Both views are in the page; the one not chosen is hidden.
(function () {
  "use strict";
  var VIEW = "takehome:diff-view";

  function chosen() {
    try { return localStorage.getItem(VIEW) === "split" ? "split" : "unified"; } catch (e) { return "unified"; }
  }

  function apply(view) {
    document.querySelectorAll("[data-diff-view]").forEach(function (el) {
      el.hidden = el.getAttribute("data-diff-view") !== view;
    });
    document.querySelectorAll("[data-diff-view-choice]").forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.getAttribute("data-diff-view-choice") === view));
    });
  }

  function wire() {
    var box = document.getElementById("diff-view-switch");
    if (box) box.hidden = false;
    apply(chosen());
  }

  document.addEventListener("click", function (event) {
    var choice = event.target.closest && event.target.closest("[data-diff-view-choice]");
    if (choice) {
      var view = choice.getAttribute("data-diff-view-choice");
      try { localStorage.setItem(VIEW, view); } catch (e) { /* kept for this page */ }
      apply(view);
      return;
    }
    // A click on a line (not on a link, a button or inside a comment): its comment link, on the side clicked.
    var target = event.target;
    if (!target.closest || target.closest("a, button, form, .line-comment")) return;
    var row = target.closest("table.diff-table tr.line");
    if (!row || (window.getSelection && String(window.getSelection()))) return;  // selecting text is no click
    var cell = target.closest("td");
    var link = (cell && cell.querySelector(".comment-link")) || row.querySelector(".comment-link");
    if (link) link.click();
  });

  // The diff section and its files are swapped in by htmx: show the chosen view in what came in.
  document.addEventListener("htmx:afterSettle", function (event) {
    wire();
    // why here: the box (or, once saved, the line's link) is marked autofocus, but it may sit in the view that
    // was hidden until wire() ran, and a hidden element takes no focus.
    var id = event.detail && event.detail.target && event.detail.target.id;
    var file = id && id.indexOf("diff-file-") === 0 && document.getElementById(id);
    var wanted = file && Array.prototype.find.call(file.querySelectorAll("[autofocus]"), function (el) {
      return !el.closest("[hidden]");
    });
    if (wanted && document.activeElement !== wanted) wanted.focus();
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
