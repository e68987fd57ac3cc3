// "Copy link" buttons (button.copy with data-copy) on the invite result and the invitations board.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button.copy");
  if (!button) return;
  const text = button.dataset.copy;
  try {
    await navigator.clipboard.writeText(text);
  } catch (err) {
    // Clipboard needs a secure context; fall back to selecting the text.
    const field = button.parentElement.querySelector("input.link-field");
    if (field) { field.select(); document.execCommand("copy"); }
  }
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = "Copy link"; }, 2000);
});
