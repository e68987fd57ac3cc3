// Beside every <time datetime="..." data-format="..."> the server wrote in UTC, the same moment
// in the viewer's own time zone. The UTC text stays as it is: it is what a page without
// JavaScript shows, and what everyone agrees on. Runs on load, on every htmx swap, and on a
// "takehome:times" event a script sends from the element where it wrote times of its own.
(function () {
  "use strict";
  const pad = (n) => String(n).padStart(2, "0");
  const parts = {
    Y: (d) => String(d.getFullYear()),
    m: (d) => pad(d.getMonth() + 1),
    d: (d) => pad(d.getDate()),
    H: (d) => pad(d.getHours()),
    i: (d) => pad(d.getMinutes()),
    s: (d) => pad(d.getSeconds()),
  };

  // "Y-m-d H:i T" -> "2024-05-01 16:03": Django's letters this project uses, in local time.
  function render(moment, format) {
    let text = "";
    for (const letter of format) {
      if (letter === "T") continue;
      text += parts[letter] ? parts[letter](moment) : letter;
    }
    return text.trim();
  }

  function fill(root) {
    if (!root || !root.querySelectorAll) return;
    const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "your time zone";
    root.querySelectorAll("time[datetime][data-format]:not([data-local-done])").forEach((el) => {
      el.dataset.localDone = "1";
      const moment = new Date(el.getAttribute("datetime"));
      // Nothing to add where local time is UTC, or the time cannot be read.
      if (isNaN(moment.getTime()) || moment.getTimezoneOffset() === 0) return;
      const local = document.createElement("span");
      local.className = "local-time";
      local.title = "Your time (" + zone + ")";
      local.textContent = " (" + render(moment, el.dataset.format) + " your time)";
      el.after(local);
    });
  }

  document.addEventListener("DOMContentLoaded", () => fill(document));
  document.addEventListener("htmx:load", (e) => fill(e.target));
  document.addEventListener("takehome:times", (e) => fill(e.target));
})();
