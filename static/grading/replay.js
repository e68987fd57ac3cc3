// The review page's replay of a hosted session (asciinema-player, vendored under static/vendor/).
// The recording comes from the server (grading:session-cast); the buttons under the player seek it to a
// marker's moment ("Jump to red" first). Loaded only on a review page that has a recording to play.
(function () {
  "use strict";

  function start() {
    var box = document.getElementById("replay-player");
    if (!box || box.takehomePlayer || !window.AsciinemaPlayer) return;
    var cols = parseInt(box.dataset.cols, 10), rows = parseInt(box.dataset.rows, 10);
    var opts = {
      preload: true, // why: a reviewer seeks before pressing play; the recording must be there already
      fit: "width",
      // why: no idle-time compression, so a marker's time in the file is its time in the player
      idleTimeLimit: 1e9,
      terminalFontSize: "small",
    };
    if (cols > 0) opts.cols = cols;
    if (rows > 0) opts.rows = rows;
    var player = window.AsciinemaPlayer.create(box.dataset.src, box, opts);
    box.takehomePlayer = player; // the page's tests read the player's time through it

    // The review page's keys (p, f, n) are not the player's: keys typed in the player stay in it.
    box.addEventListener("keydown", function (event) { event.stopPropagation(); });

    // The player's terminal takes the focus (its keys: space, arrows) but has no name: give it one
    // once the player has drawn it.
    var naming = new MutationObserver(function () {
      var term = box.querySelector("pre.ap-term-text");
      if (!term) return;
      term.setAttribute("role", "region");
      term.setAttribute("aria-label", "The recorded terminal");
      naming.disconnect();
    });
    naming.observe(box, { childList: true, subtree: true });

    // Seeking moves no focus: the focus stays on the marker, and the status line says where the player is.
    var at = document.getElementById("replay-at");
    document.querySelectorAll("#replay-markers button[data-seek]").forEach(function (button) {
      button.addEventListener("click", function () {
        var t = parseFloat(button.dataset.seek);
        if (!isFinite(t)) return;
        player.seek(t).then(function () {
          box.dataset.seekedTo = String(t);
          if (at) at.textContent = "Shown: " + button.dataset.moment + ".";
        });
      });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
