// The session's countdown, on the candidate's page and in the hosted workspace (#clock, #countdown).
// Counted to the server's deadline, by the server's clock: the page carries the deadline and the server's
// now (data-deadline-ms, data-server-now-ms), and the difference between that now and this machine's
// clock at load is added to every reading, so a candidate's clock set wrong moves nothing.
//
// Warnings (the workspace): each <template data-warn-at="seconds"> inside #clock-warnings is shown in the
// banner #clock-banner once that much time or less is left, and said once in the polite live region
// #clock-warning. "Said" is kept for the tab (sessionStorage, by deadline): a reload after a warning shows
// the banner again but does not say it again; a warning not yet said (the page opened after its mark) is
// said at load. When the deadline passes with the page open, #deadline-passed replaces the clock's words
// and is said too.
(function () {
  const box = document.getElementById("clock");
  const clock = document.getElementById("countdown");
  if (!box || !clock) return;
  const deadline = Number(box.dataset.deadlineMs);
  const offset = Number(box.dataset.serverNowMs) - Date.now();  // the server's clock minus this machine's
  const serverNow = () => Date.now() + offset;

  const banner = document.getElementById("clock-banner");
  const live = document.getElementById("clock-warning");
  const warnings = Array.from(document.querySelectorAll("#clock-warnings template[data-warn-at]"))
    .map((template) => ({ at: Number(template.dataset.warnAt), template }))
    .sort((a, b) => a.at - b.at);  // the nearest first
  const key = "takehome-clock-said:" + deadline;
  const said = new Set();
  try {
    JSON.parse(sessionStorage.getItem(key) || "[]").forEach((at) => said.add(at));
  } catch (e) {
    // no storage (a private window's rules): each load says what applies once
  }
  const remember = () => {
    try { sessionStorage.setItem(key, JSON.stringify(Array.from(said))); } catch (e) { /* as above */ }
  };
  let shown = null;

  const say = (content) => {
    if (!live) return;
    live.replaceChildren(content.cloneNode(true));
    live.dispatchEvent(new Event("takehome:times", { bubbles: true }));
  };

  function warn(left) {
    const due = warnings.find((w) => left <= w.at);
    if (!due || due === shown || !banner) return;
    shown = due;
    const words = due.template.content;
    banner.replaceChildren(words.cloneNode(true));
    banner.dataset.warnAt = String(due.at);
    banner.hidden = false;
    banner.dispatchEvent(new Event("takehome:times", { bubbles: true }));
    if (!said.has(due.at)) say(words);
    // why every mark at or above this one: a page opened at one minute left says only the nearest
    warnings.forEach((w) => { if (w.at >= due.at) said.add(w.at); });
    remember();
  }

  const tick = () => {
    const left = Math.max(0, Math.round((deadline - serverNow()) / 1000));
    const h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
    clock.textContent = (h ? h + " h " : "") + m + " min " + String(s).padStart(2, "0") + " s";
    if (left > 0) {
      warn(left);
      setTimeout(tick, 1000);
      return;
    }
    // The deadline passed while the page was open: the grace period's words, from the page.
    box.classList.remove("clock-running");
    box.classList.add("clock-grace");
    const passed = document.getElementById("deadline-passed").content;
    // The words are the page's (with the closing time as a <time>): localtime.js adds the local time.
    box.replaceChildren(passed.cloneNode(true));
    box.dispatchEvent(new Event("takehome:times", { bubbles: true }));
    if (banner) banner.hidden = true;
    if (live) say(passed);
  };
  tick();
})();
