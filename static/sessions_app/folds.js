// Panes that fold (a <details data-fold-key="name">, e.g. the workspace's task pane) stay as the person left
// them after a reload. The browser keeps one flag per pane in localStorage, "takehome-folded:<name>", set while
// the pane is folded and removed once it is open again; nothing of the candidate's or of the session goes in it.
// Loaded right after the panes it folds, so a folded pane is never drawn open first.
(function () {
  const PREFIX = "takehome-folded:";
  const folded = (name) => {
    try {
      return localStorage.getItem(PREFIX + name) === "1";
    } catch (e) {
      return false;  // no storage (a private window's rules): every pane opens as the page has it
    }
  };
  const remember = (name, isFolded) => {
    try {
      if (isFolded) localStorage.setItem(PREFIX + name, "1");
      else localStorage.removeItem(PREFIX + name);
    } catch (e) { /* as above */ }
  };
  for (const pane of document.querySelectorAll("details[data-fold-key]")) {
    const name = pane.dataset.foldKey;
    if (folded(name)) pane.open = false;
    pane.addEventListener("toggle", () => remember(name, !pane.open));
  }
})();
