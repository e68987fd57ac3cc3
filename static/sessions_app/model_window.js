// The model window's chat panel: send one prompt to the candidate's own endpoint and show the
// reply as its server-sent events arrive; then the server-rendered history is fetched again.
(function () {
  const form = document.getElementById("model-form");
  if (!form) return;
  const prompt = document.getElementById("model-prompt");
  const send = document.getElementById("model-send");
  const reply = document.getElementById("model-reply");
  const error = document.getElementById("model-error");
  form.hidden = false;

  const showError = (message) => {
    error.textContent = message;
    error.hidden = false;
  };

  // The endpoint answers refusals and faults as OpenAI errors: {"error": {"message": ...}}.
  const errorOf = (body) => (body && body.error && body.error.message) || "";

  async function readError(response) {
    try {
      return errorOf(await response.json()) || "The model window answered " + response.status + ".";
    } catch (e) {
      return "The model window answered " + response.status + ", without a message.";
    }
  }

  // One "data: ..." event: a chunk of the reply, an error, or [DONE].
  function take(event) {
    const data = event.split("\n").filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).trim()).join("\n");
    if (!data || data === "[DONE]") return;
    let chunk;
    try {
      chunk = JSON.parse(data);
    } catch (e) {
      return;
    }
    if (errorOf(chunk)) {
      showError(errorOf(chunk));
      return;
    }
    for (const choice of chunk.choices || []) {
      if (choice.delta && choice.delta.content) reply.textContent += choice.delta.content;
    }
  }

  async function ask(text) {
    const response = await fetch(form.dataset.url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: text }], stream: true }),
    });
    if (!response.ok) {
      showError(await readError(response));
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      // why a buffer: a network chunk may end in the middle of an event.
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        take(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
    take(buffer);
  }

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = prompt.value.trim();
    if (!text) return;
    error.hidden = true;
    reply.textContent = "";
    reply.setAttribute("aria-busy", "true");
    send.disabled = true;
    try {
      await ask(text);
    } catch (err) {
      showError("The reply could not be read: the connection to the server was lost. Your exchange, if it " +
        "reached the model, is in the list below.");
    } finally {
      reply.setAttribute("aria-busy", "false");
      send.disabled = false;
      // The history below asks the server again (hx-trigger="model-exchange from:body").
      document.body.dispatchEvent(new Event("model-exchange"));
    }
  });
})();
