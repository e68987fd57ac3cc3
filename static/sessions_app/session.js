// The candidate's session page: the upload form's checks and progress (the countdown is clock.js).
(function () {
  function wire(root) {
    const form = root.querySelector && root.querySelector("form.upload");
    if (!form || form.dataset.wired) return;
    form.dataset.wired = "1";
    const input = form.querySelector("input[type=file]");
    const zone = form.querySelector(".dropzone");
    const chosen = form.querySelector(".chosen");
    const error = form.querySelector("#client-error");
    const bar = form.querySelector("progress");
    const max = Number(form.dataset.maxBytes);
    const show = () => {
      const file = input.files[0];
      chosen.textContent = file ? file.name + " (" + Math.ceil(file.size / 1024) + " KB)" : "";
      error.hidden = true;
      // A new file: the server's verdict on the previous one no longer applies.
      form.querySelectorAll("ul.errors").forEach((list) => list.remove());
      if (file && file.size > max) {
        error.textContent = "This file is larger than the limit of " + form.dataset.maxSize + ". Leave out " +
          "virtual environments, .git and caches, or use 'python gate.py submit', which does that for you.";
        error.hidden = false;
      }
    };
    input.addEventListener("change", show);
    ["dragenter", "dragover"].forEach((name) => zone.addEventListener(name, (e) => { e.preventDefault(); zone.classList.add("over"); }));
    ["dragleave", "drop"].forEach((name) => zone.addEventListener(name, (e) => { e.preventDefault(); zone.classList.remove("over"); }));
    zone.addEventListener("drop", (e) => { if (e.dataTransfer.files.length) { input.files = e.dataTransfer.files; show(); } });
    form.addEventListener("htmx:confirm", (e) => {
      const file = input.files[0];
      if (file && file.size > max) { e.preventDefault(); show(); }
    });
    form.addEventListener("htmx:xhr:progress", (e) => {
      bar.hidden = false;
      if (e.detail.lengthComputable) bar.value = Math.round((e.detail.loaded / e.detail.total) * 100);
    });
  }
  wire(document);
  document.body.addEventListener("htmx:afterSwap", (e) => wire(document));
  // An upload too soon after the last, or one too many, is answered 429 with the form and its
  // message; htmx 2 swaps no 4xx by default, so let this one in (and only for the upload form).
  document.body.addEventListener("htmx:beforeSwap", (e) => {
    if (e.detail.xhr.status === 429 && e.detail.target && e.detail.target.id === "upload-form") {
      e.detail.shouldSwap = true;
      e.detail.isError = false;
    }
  });
})();
