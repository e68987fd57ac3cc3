// The review page's keyboard: p = pass, f = fail, n = next section (after the last: the submit
// confirmation, then Tab to the button); Esc leaves a note (or any field) so the keys work again.
// The sections are read in a fixed order; the active one carries the class "active". It is the one
// on screen: scrolling makes the section at the reading line (a third down the window) the active
// one, a click makes the clicked one, n the next one. The keys can be turned off (WCAG 2.1.4:
// a person who speaks commands, or whose hand slips, must not mark a cell by one stray letter); the
// choice is kept in this browser.
(function () {
  "use strict";
  var active = 0;
  var ourScroll = false;  // a scroll n started: the section it brings in stays the active one
  var SHORTCUTS = "takehome:review-shortcuts";

  function sections() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-section]"));
  }

  function show() {
    sections().forEach(function (s, i) { s.classList.toggle("active", i === active); });
  }

  var keysOn = (function () {
    try { return localStorage.getItem(SHORTCUTS) !== "off"; } catch (e) { return true; }
  })();

  function activate(i) {
    var all = sections();
    if (!all.length) return;
    active = Math.max(0, Math.min(i, all.length - 1));
    show();
    ourScroll = true;
    all[active].scrollIntoView({ block: "nearest" });
    // why a frame later: scrollIntoView's scroll events arrive before the next frame (or none come
    // when it was in view already)
    requestAnimationFrame(function () { requestAnimationFrame(function () { ourScroll = false; }); });
  }

  // The section at the reading line; else the one with the most of itself in the window.
  function onScreen() {
    var all = sections(), line = window.innerHeight / 3, best = -1, most = 0;
    for (var i = 0; i < all.length; i++) {
      var box = all[i].getBoundingClientRect();
      if (box.top <= line && box.bottom > line) return i;
      var seen = Math.min(box.bottom, window.innerHeight) - Math.max(box.top, 0);
      if (seen > most) { most = seen; best = i; }
    }
    return best;
  }

  function follow() {
    if (ourScroll) return;
    var i = onScreen();
    if (i >= 0 && i !== active) { active = i; show(); }
  }

  var pendingFrame = false;
  window.addEventListener("scroll", function () {
    if (pendingFrame || ourScroll) return;
    pendingFrame = true;
    requestAnimationFrame(function () { pendingFrame = false; follow(); });
  }, { passive: true });

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

  function isField(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    // Esc in a note gives the keys back: the focus goes to the note's section (not the page's top).
    if (event.key === "Escape" && isField(target) && target.type !== "checkbox") {
      var section = target.closest("[data-section]");
      target.blur();
      if (section) {
        if (!section.hasAttribute("tabindex")) section.setAttribute("tabindex", "-1");
        section.focus({ preventScroll: true });
      }
      return;
    }
    // Typing a note (or in any field) is never a shortcut.
    if (isField(target) || !keysOn) return;
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

  // The switch for the keys, beside the line that names them.
  function wireSwitch() {
    var box = document.getElementById("review-shortcuts");
    if (!box || box.dataset.wired) return;
    box.dataset.wired = "1";
    box.checked = keysOn;
    box.addEventListener("change", function () {
      keysOn = box.checked;
      try { localStorage.setItem(SHORTCUTS, keysOn ? "on" : "off"); } catch (e) { /* kept for this page */ }
    });
  }

  // Notes. htmx saves a note at each pause in typing (the box's hx-trigger). Each save carries the time
  // its text was typed: the form's note_stamp, set at every keystroke, in milliseconds on the server's
  // clock as this page reckons it. The server keeps a note only over one typed before it, so saves that
  // arrive out of order (a slow one, the beacon, a resend) never put an older text back. What the server
  // has not answered yet is kept in this tab's sessionStorage as {text, stamp}. When the page goes away a
  // beacon sends it; when the page (or a cell htmx swapped in) shows a note typed before it, the save was
  // lost or came too late, so the typed note is put back and saved. A page showing a note typed after it
  // was changed elsewhere since: that one stands.
  const NOTE = "textarea[name=note][hx-post]";
  const keyOf = (box) => "takehome:note:" + box.getAttribute("hx-post");
  const same = (a, b) => a.trim() === b.trim();
  const stampOf = (box) => (box.form ? box.form.elements.namedItem("note_stamp") : null);
  // Set once the page starts to go (a reload, a link): see htmx:afterRequest. A page put back from the
  // browser's history cache is staying again.
  let leaving = false;

  function pending(box) {
    try { return JSON.parse(sessionStorage.getItem(keyOf(box))); } catch (e) { return null; }
  }

  function keep(box, entry) {
    try {
      if (entry) sessionStorage.setItem(keyOf(box), JSON.stringify(entry));
      else sessionStorage.removeItem(keyOf(box));
    } catch (e) { /* storage full or off: the saves as you type still run */ }
  }

  // The stamp of the text the box holds now: always after the box's last one (and so after the note the
  // page showed), and the later of this computer's clock and the server's as reckoned when the box came.
  // why the later: a computer whose clock runs slow must not have its notes taken for older than one
  // typed before them elsewhere; and a page reopened from the browser's cache reckons from an old server
  // time, which must not make its notes look older than they are either.
  function restamp(box) {
    const field = stampOf(box);
    if (!field) return 0;
    field.disabled = false;
    field.value = Math.max(Date.now() + Number(box.dataset.behind || 0), Number(field.value || 0) + 1);
    return Number(field.value);
  }

  function reconcile(box) {
    const field = stampOf(box);
    if (field) {
      field.disabled = false;
      box.dataset.savedStamp = field.value || "0";
      box.dataset.behind = String(Math.max(0, Number(field.dataset.clock) - Date.now()) || 0);
    }
    const entry = pending(box);
    if (!entry) return;
    // why base: an entry kept by a page from before the stamps has only the note its typing began from.
    const later = typeof entry.stamp === "number" ? entry.stamp > Number(box.dataset.savedStamp || 0)
      : same(box.value, entry.base || "");
    if (same(box.value, entry.text) || !later) { keep(box, null); return; }
    // why: the stamp the put-back note is saved with must come after the one it was typed with.
    if (field && typeof entry.stamp === "number") field.value = Math.max(Number(field.value || 0), entry.stamp);
    box.value = entry.text;
    const status = document.getElementById("cell-status-" + box.closest("[data-cell]").dataset.cell);
    if (status) status.textContent = "The note typed before the page was left is back; saving it.";
    box.dispatchEvent(new Event("input", { bubbles: true }));
  }

  function reconcileAll(root) {
    if (root && root.querySelectorAll) root.querySelectorAll(NOTE).forEach(reconcile);
  }

  document.addEventListener("input", (event) => {
    const box = event.target;
    if (!box.matches || !box.matches(NOTE)) return;
    keep(box, { text: box.value, stamp: restamp(box) });
  });

  document.addEventListener("htmx:beforeRequest", (event) => {
    const box = event.detail.elt;
    if (box.matches && box.matches(NOTE)) box.dataset.sendingStamp = stampOf(box) ? stampOf(box).value || "0" : "0";
  });

  document.addEventListener("htmx:afterRequest", (event) => {
    const box = event.detail.elt;
    if (!box.matches || !box.matches(NOTE) || !event.detail.successful || box.dataset.sendingStamp === undefined) return;
    // why by stamp, not by text: typed back to the text answered, the box still holds a later note than
    // a save of other text sent meanwhile, which may be on its way.
    box.dataset.savedStamp = box.dataset.sendingStamp;
    delete box.dataset.sendingStamp;
    const stamp = stampOf(box) ? Number(stampOf(box).value || 0) : 0;
    const unsaved = stamp > Number(box.dataset.savedStamp);
    // why kept while the page is being left: the next page may have read the note before this save was
    // stored (its request went out before this answer came); from the copy it puts the note back if so.
    keep(box, unsaved || (leaving && pending(box)) ? { text: box.value, stamp: stamp } : null);
    // why: a pause in typing while this save was on its way was dropped (the box sends one save at a
    // time), and htmx's "changed" would not send that text again: send what the box holds now, once
    // htmx has let go of this request (it still holds it while this event runs).
    if (unsaved) setTimeout(() => htmx.trigger(box, "takehome:resave"), 0);
  });

  // why a beacon: it is sent even as the page unloads; before the reload's request where the
  // browser fires beforeunload, else on pagehide, and when the tab is hidden (phones kill those).
  function sendUnsaved() {
    document.querySelectorAll(NOTE).forEach((box) => {
      const entry = pending(box);
      if (!entry || !same(box.value, entry.text) || box.dataset.beaconed === String(entry.stamp) ||
          !navigator.sendBeacon) return;
      // why the form: the beacon carries the note's stamp (note_stamp) with it, as the saves do.
      box.dataset.beaconed = String(entry.stamp);
      navigator.sendBeacon(box.getAttribute("hx-post"), new FormData(box.form));
    });
  }
  const leave = () => { leaving = true; sendUnsaved(); };
  window.addEventListener("beforeunload", leave);
  window.addEventListener("pagehide", leave);
  window.addEventListener("pageshow", () => { leaving = false; });
  document.addEventListener("visibilitychange", () => { if (document.visibilityState === "hidden") sendUnsaved(); });
  document.addEventListener("htmx:load", (event) => reconcileAll(event.target));

  // htmx swaps cells and the diff section in place: keep the highlight.
  document.addEventListener("htmx:afterSettle", show);
  document.addEventListener("DOMContentLoaded", function () { wireSwitch(); show(); });
  if (document.readyState !== "loading") { wireSwitch(); show(); }
})();
