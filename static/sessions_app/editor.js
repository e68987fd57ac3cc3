// The workspace's editor: a list of the workspace's files, CodeMirror 6 (static/vendor/codemirror, the global
// TakehomeEditor), Save (and Ctrl+S), New file and Rename, all through the JSON endpoints of
// sessions_app/hosted/editor.py. A save names the sha256 of the text it was read with; when the terminal
// changed the file since, the server answers 409 and the editor offers to reload or overwrite, never
// overwriting by itself. The status line (aria-live) says every outcome.
(function () {
  const root = document.getElementById("editor");
  const CM = window.TakehomeEditor;
  if (!root || !CM) return;
  const status = document.getElementById("editor-status");
  const list = document.getElementById("editor-file-list");
  const openLine = document.getElementById("editor-open");
  const saveButton = document.getElementById("editor-save");
  const conflict = document.getElementById("editor-conflict");
  const renameForm = document.getElementById("editor-rename-form");
  const renameInput = document.getElementById("editor-rename-path");
  const newForm = document.getElementById("editor-new-form");
  const newInput = document.getElementById("editor-new-path");
  const csrf = (document.querySelector("input[name=csrfmiddlewaretoken]") || {}).value
    || (JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"]);
  const nonceMeta = document.querySelector('meta[name="takehome-style-nonce"]');
  const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

  let view = null;
  let current = null; // {path, sha256, saved: the text last read or saved, disk: the sha256 a 409 reported}

  function say(words, state) {
    status.textContent = words;
    status.dataset.state = state || "ok";
  }

  async function call(url, body) {
    const options = body === undefined ? { headers: { Accept: "application/json" } } : {
      method: "POST", body: JSON.stringify(body),
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf },
    };
    let response;
    try {
      response = await fetch(url, { credentials: "same-origin", ...options });
    } catch (error) {
      return { ok: false, status: 0, data: { message: "The server did not answer: check your connection and try again." } };
    }
    let data = {};
    try { data = await response.json(); } catch (error) { data = { message: `The server answered ${response.status}.` }; }
    return { ok: response.ok, status: response.status, data };
  }

  function dirty() {
    return view && current && view.state.doc.toString() !== current.saved;
  }

  function showOpen() {
    if (!current) return;
    openLine.textContent = `${current.path}${dirty() ? " (not saved)" : ""}`;
    for (const button of list.querySelectorAll("button[data-path]")) {
      if (button.dataset.path === current.path) button.setAttribute("aria-current", "true");
      else button.removeAttribute("aria-current");
    }
  }

  // -- the list ----------------------------------------------------------------------

  async function refresh() {
    const answer = await call(root.dataset.files);
    if (!answer.ok) { say(answer.data.message, "refused"); return false; }
    // why: a save lists the files again; a candidate moving through the list meanwhile keeps their place
    const focused = list.contains(document.activeElement) ? document.activeElement.dataset.path : undefined;
    list.replaceChildren();
    for (const entry of answer.data.entries) {
      const depth = entry.path.split("/").length - 1;
      const name = entry.path.split("/").pop();
      const item = document.createElement("li");
      item.className = `depth-${Math.min(depth, 6)}`;
      if (entry.kind === "file") {
        const button = document.createElement("button");
        button.type = "button";
        button.className = "editor-file";
        button.dataset.path = entry.path;
        button.textContent = name;
        button.title = entry.path;
        item.append(button);
      } else {
        const label = document.createElement("span");
        label.className = `editor-${entry.kind}`;
        label.textContent = entry.kind === "folder" ? `${name}/` : `${name} (a link)`;
        item.append(label);
      }
      list.append(item);
    }
    if (answer.data.truncated) {
      const item = document.createElement("li");
      item.className = "muted small";
      item.textContent = "More files than the list shows: open the others from the terminal.";
      list.append(item);
    }
    showOpen();
    const again = [...list.querySelectorAll("button[data-path]")].find((button) => button.dataset.path === focused);
    if (again) again.focus();
    return true;
  }

  list.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-path]");
    if (button) open(button.dataset.path);
  });
  // Up and Down move between the files of the list (Tab works too).
  list.addEventListener("keydown", (event) => {
    if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
    const buttons = [...list.querySelectorAll("button[data-path]")];
    const at = buttons.indexOf(document.activeElement);
    if (at < 0) return;
    event.preventDefault();
    const next = buttons[Math.max(0, Math.min(buttons.length - 1, at + (event.key === "ArrowDown" ? 1 : -1)))];
    next.focus();
  });
  document.getElementById("editor-refresh").addEventListener("click", async () => {
    if (await refresh()) say("The list shows the workspace's files as they are now.");
  });

  // -- the editor ----------------------------------------------------------------------

  function editorState(path, text) {
    const extensions = [
      CM.basicSetup,
      CM.keymap.of([CM.indentWithTab]),  // Ctrl+S: the column's own listener below
      // why tabindex: axe counts a scroll box reachable by the keyboard only through a tabindex, and a
      // contenteditable is one to the browser already
      CM.EditorView.contentAttributes.of({ "aria-label": `Contents of ${path}`, tabindex: "0" }),
      CM.EditorView.updateListener.of((update) => { if (update.docChanged) showOpen(); }),
    ];
    if (path.endsWith(".py") || path.endsWith(".pyi")) extensions.push(CM.python());
    // why: CodeMirror styles itself with <style> elements; the page's CSP admits them with its nonce only
    if (nonceMeta) extensions.push(CM.EditorView.cspNonce.of(nonceMeta.content));
    return CM.EditorState.create({ doc: text, extensions });
  }

  async function open(path, { keepStatus = false } = {}) {
    if (dirty() && current.path !== path
        && !window.confirm(`${current.path} has changes that are not saved. Open ${path} and lose them?`)) return;
    const answer = await call(`${root.dataset.read}?path=${encodeURIComponent(path)}`);
    if (!answer.ok) { say(answer.data.message, "refused"); return; }
    if (answer.data.binary) { say(answer.data.message, "refused"); return; }
    current = { path: answer.data.path, sha256: answer.data.sha256, saved: answer.data.text, disk: null };
    const state = editorState(current.path, answer.data.text);
    if (view) view.setState(state);
    else view = new CM.EditorView({ state, parent: document.getElementById("editor-view") });
    conflict.hidden = true;
    saveButton.disabled = false;
    renameForm.hidden = false;
    renameInput.value = current.path;
    showOpen();
    if (!keepStatus) say(`Opened ${current.path}.`);
  }

  let saving = false;
  async function save(overwrite) {
    if (!current || !view || saving) return;
    saving = true;
    try {
      await send(overwrite);
    } finally {
      saving = false;
    }
  }

  async function send(overwrite) {
    const text = view.state.doc.toString();
    let base = current.sha256;
    if (overwrite) {
      if (current.disk === null) { // deleted on disk: make it again, then save over the empty file
        const made = await call(root.dataset.create, { path: current.path });
        if (!made.ok && made.data.code !== "exists") { say(made.data.message, "refused"); return; }
        base = made.ok ? EMPTY_SHA256 : current.sha256;
      } else {
        base = current.disk;
      }
    }
    const answer = await call(root.dataset.save, { path: current.path, text, base });
    if (answer.status === 409) {
      current.disk = answer.data.sha256 === undefined ? null : answer.data.sha256;
      conflict.hidden = false;
      say(`Not saved: ${answer.data.message}`, "conflict");
      return;
    }
    if (!answer.ok) { say(`Not saved: ${answer.data.message}`, "refused"); return; }
    current.sha256 = answer.data.sha256;
    current.saved = text;
    current.disk = null;
    conflict.hidden = true;
    showOpen();
    say(`${answer.data.message} (${new Date().toLocaleTimeString()})`, "saved");
    refresh();
  }

  saveButton.addEventListener("click", () => save(false));
  document.getElementById("editor-overwrite").addEventListener("click", () => save(true));
  document.getElementById("editor-reload").addEventListener("click", async () => {
    current.saved = view.state.doc.toString(); // why: reloading is the candidate's choice, no second question
    await open(current.path, { keepStatus: true });
    say(`Reloaded ${current.path} from disk.`);
  });
  // Ctrl+S anywhere in the editor's column (the text, the list, the buttons): never the browser's own save.
  root.addEventListener("keydown", (event) => {
    if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "s") {
      event.preventDefault();
      save(false);
    }
  });

  newForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const answer = await call(root.dataset.create, { path: newInput.value });
    if (!answer.ok) { say(answer.data.message, "refused"); return; }
    newInput.value = "";
    await refresh();
    await open(answer.data.path, { keepStatus: true });
    say(answer.data.message);
    view.focus();
  });

  renameForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!current) return;
    const answer = await call(root.dataset.rename, { path: current.path, to: renameInput.value });
    if (!answer.ok) { say(answer.data.message, "refused"); return; }
    current.path = answer.data.path;
    renameInput.value = current.path;
    view.setState(editorState(current.path, view.state.doc.toString()));
    await refresh();
    say(answer.data.message);
  });

  window.addEventListener("beforeunload", (event) => {
    if (dirty()) event.preventDefault();
  });

  refresh().then((ok) => { if (ok) say("Choose a file in the list to open it."); });
})();
