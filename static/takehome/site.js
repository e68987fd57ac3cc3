// Loaded on every page (templates/base.html). A write the server could not do (busy, disk
// full) answers 503 with a notice aimed at #server-busy (takehome/unavailable.py); htmx 2
// swaps no 5xx by default, so let that one in, leaving the form as it was, and clear the
// notice once a request succeeds again.
document.body.addEventListener("htmx:beforeSwap", (e) => {
  const box = document.getElementById("server-busy");
  if (e.detail.xhr.status === 503 && e.detail.target === box) {
    e.detail.shouldSwap = true;
    e.detail.isError = false;
  } else if (box && e.detail.xhr.status < 400) {
    box.replaceChildren();
  }
});

// A form with data-confirm="question" asks before it is sent (in place of an inline onsubmit,
// which the Content-Security-Policy blocks). htmx forms can use hx-confirm instead.
document.addEventListener("submit", (e) => {
  const form = e.target.closest("form[data-confirm]");
  if (form && !window.confirm(form.dataset.confirm)) e.preventDefault();
});
