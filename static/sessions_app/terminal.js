// The hosted terminal: xterm.js over the WebSocket /t/<token>/terminal (sessions_app/hosted/consumers.py).
// Frames: text is raw input and output; a JSON object text frame is a control message:
// {"resize": [cols, rows]} from here, {"close": {"code", "reason"}} from the server before it closes,
// {"stuck": reason or null} from the server while the shell's processes are pinned at the workspace's
// cap (a fork bomb) or no longer. The socket reconnects after a drop, unless the server closed it
// for good (codes 4401, 4403, 4410), and the status line says which; on 4503 (the shell runs but
// cannot be attached to) it offers to restart the shell instead, and on "stuck" it offers the same
// over the terminal, which stays attached.
(function () {
  const box = document.getElementById("terminal");
  if (!box || !window.Terminal) return;
  const status = document.getElementById("terminal-status");

  // xterm.js sizes and colours itself with <style> elements it creates; the page's
  // Content-Security-Policy admits them only with this page's nonce.
  const nonceMeta = document.querySelector('meta[name="takehome-style-nonce"]');
  if (nonceMeta) {
    const create = document.createElement.bind(document);
    document.createElement = function (tag, options) {
      const element = create(tag, options);
      if (String(tag).toLowerCase() === "style") element.nonce = nonceMeta.content;
      return element;
    };
  }

  const term = new window.Terminal({ cursorBlink: true, scrollback: 5000, convertEol: false,
                                     fontFamily: "ui-monospace, SFMono-Regular, Menlo, monospace" });
  const fit = new window.FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  box.xterm = term;  // for the page's tests, which read what the terminal holds
  // The window's width the terminal last fitted itself to: the page's tests wait for it after a resize.
  const fitToWindow = () => {
    fit.fit();
    box.dataset.fittedWidth = String(window.innerWidth);
  };
  fitToWindow();

  const FINAL = new Set([4401, 4403, 4410]);
  const STUCK = 4503;
  const restart = document.getElementById("restart-shell");
  const restartButton = document.getElementById("restart-shell-button");
  const restartKeys = document.getElementById("restart-shell-keys");
  let socket = null;
  let retries = 0;
  let closedForGood = false;
  let everConnected = false;

  const say = (words, state) => {
    status.textContent = words;
    status.dataset.state = state;
  };

  // The offer to restart the shell, over the top of the window: "stuck" when no terminal could attach,
  // "pinned" when the attached one's shell holds every process it may have.
  function offerRestart(kind) {
    if (!restart) return;
    restart.querySelectorAll("[data-when]").forEach((words) => { words.hidden = words.dataset.when !== kind; });
    if (restartKeys) restartKeys.hidden = kind !== "pinned";
    restart.hidden = false;
    // why the focus only when no terminal is attached: with one, the candidate may be stopping the
    // program themselves (Ctrl+C), and Tab from the terminal reaches the button
    if (kind === "stuck" && restartButton) restartButton.focus();
  }

  function withdrawOffer() {
    if (!restart || restart.hidden) return;
    const focused = restart.contains(document.activeElement);
    restart.hidden = true;
    if (focused) term.focus();
  }

  function sendSize() {
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({ resize: [term.cols, term.rows] }));
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const url = scheme + "//" + location.host + box.dataset.url + "?cols=" + term.cols + "&rows=" + term.rows;
    socket = new WebSocket(url);
    // The server accepts at once, then opens the shell (which may take seconds on a busy server) and
    // says {"ready": true} before it sends the shell's history.
    socket.onopen = () => {
      say("starting the shell…", "starting");
    };
    function ready() {
      // why reset: the server sends the shell's history first, then tmux draws the screen;
      // after a drop, what this page held would otherwise show twice
      if (everConnected) term.reset();
      everConnected = true;
      retries = 0;
      withdrawOffer();  // the server said at the connect whether the shell is stuck, and says again
      say("connected", "connected");
      sendSize();
      // why not always: a shell that comes up (or back, after a drop) while the candidate types in the
      // editor or the chat must not take their keys; it takes the keyboard only when nothing else has it
      const active = document.activeElement;
      if (!active || active === document.body || box.contains(active)) term.focus();
    }
    let said = "";  // the reason of the server's {"close": ...} control frame
    socket.onmessage = (event) => {
      if (typeof event.data !== "string") return;
      if (event.data.startsWith("{")) {
        try {
          const control = JSON.parse(event.data);
          if (control && typeof control === "object" && !Array.isArray(control)) {
            if (control.close) said = String(control.close.reason || "");
            if (control.ready === true) ready();
            if ("stuck" in control && !closedForGood) {
              if (control.stuck) offerRestart("pinned");
              else withdrawOffer();
            }
            return;
          }
        } catch (e) {
          // not JSON: output that starts with {
        }
      }
      term.write(event.data);
    };
    socket.onclose = (event) => {
      const reason = event.reason || said;
      if (event.code === STUCK) {
        // the shell runs but cannot be reached (a fork bomb): reconnecting would fail the same way,
        // so the page offers the restart instead (a plain form post, back to this page)
        closedForGood = true;
        say("stuck: " + (reason || "the terminal cannot attach to the shell"), "stuck");
        offerRestart("stuck");
        return;
      }
      if (FINAL.has(event.code)) {
        closedForGood = true;
        say("closed: " + (reason || "the server closed the terminal"), "closed");
        return;
      }
      retries += 1;
      const wait = Math.min(10, retries) * 1000;
      say("reconnecting…" + (reason ? " (" + reason + ")" : ""), "reconnecting");
      setTimeout(connect, wait);
    };
  }

  // Copy as other terminals do: Ctrl+Shift+C copies the selection (Ctrl+C stays the interrupt).
  // Paste: Ctrl+Shift+V or the browser's paste, which xterm.js takes by itself.
  term.attachCustomKeyEventHandler((event) => {
    // why: the terminal takes Tab for itself; while the offer shows, Tab leaves the terminal for it
    if (event.type === "keydown" && event.key === "Tab" && !event.shiftKey && !event.ctrlKey && !event.altKey
        && restart && !restart.hidden && restartButton) {
      event.preventDefault();
      restartButton.focus();
      return false;
    }
    if (event.type === "keydown" && event.ctrlKey && event.shiftKey && event.code === "KeyC") {
      if (term.hasSelection() && navigator.clipboard) navigator.clipboard.writeText(term.getSelection());
      event.preventDefault();
      return false;
    }
    return true;
  });

  term.onData((data) => {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(data);
  });

  let pending = null;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(() => {
      fitToWindow();
      if (!closedForGood) sendSize();
    }, 100);
  });

  // Editor keys such as Ctrl+W close the tab in a real browser: while the terminal is connected,
  // leaving the page asks first (the shell goes on running on the server either way).
  // The restart leaves the page on purpose (its form posts, and the page comes back), so it does not ask.
  let restarting = false;
  if (restart) restart.addEventListener("submit", () => { restarting = true; });
  window.addEventListener("beforeunload", (event) => {
    if (socket && socket.readyState === WebSocket.OPEN && !restarting) {
      event.preventDefault();
      event.returnValue = "";
    }
  });

  connect();
})();
