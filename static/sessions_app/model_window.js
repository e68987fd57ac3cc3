// The chat with the model this server provides (sessions_app/_model_chat.html), on the candidate's page and
// in the workspace: each prompt goes to the candidate's own endpoint, which keeps the conversation (it sends
// the model the earlier exchanges too, or none after "New conversation"); the reply is shown as its
// server-sent events arrive, then the server's history, with the reply as Markdown, is fetched again.
// The pane may open while the page is open (it asks the server every few seconds while closed), so every
// handler is on the document and the form is shown whenever one appears.
(function () {
  const $ = (id) => document.getElementById(id);
  let startNew = false;

  function wake() {
    const form = $("model-form");
    if (form) form.hidden = false;
  }

  const showError = (message) => {
    $("model-error").textContent = message;
    $("model-error").hidden = false;
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
  function take(event, reply) {
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

  async function ask(url, text, reply) {
    const response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: text }], stream: true,
        conversation: startNew ? "new" : "continue",
      }),
    });
    if (!response.ok) {
      showError(await readError(response));
      return false;
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
        take(buffer.slice(0, end), reply);
        buffer = buffer.slice(end + 2);
      }
    }
    take(buffer, reply);
    return true;
  }

  function setNew(on) {
    startNew = on;
    const button = $("model-new");
    if (!button) return;
    button.setAttribute("aria-pressed", on ? "true" : "false");
    const said = $("model-new-said");
    const last = document.querySelector("#model-history .model-exchange:last-of-type");
    if (on) {
      said.textContent = "Your next prompt starts a new conversation: the model gets none of the earlier exchanges.";
    } else if (last) {
      said.textContent = "Your next prompt goes on with conversation " + last.dataset.conversation + ".";
    }
  }

  document.addEventListener("click", (e) => {
    if (e.target.closest && e.target.closest("#model-new")) setNew(!startNew);
  });

  document.addEventListener("submit", async (e) => {
    const form = e.target;
    if (form.id !== "model-form") return;
    e.preventDefault();
    const prompt = $("model-prompt");
    const send = $("model-send");
    const reply = $("model-reply");
    const text = prompt.value.trim();
    if (!text) return;
    $("model-error").hidden = true;
    reply.textContent = "";
    reply.setAttribute("aria-busy", "true");
    send.disabled = true;
    let sent = false;
    try {
      sent = await ask(form.dataset.url, prompt.value, reply);
    } catch (err) {
      showError("The reply could not be read: the connection to the server was lost. Your exchange, if it " +
        "reached the model, is in the conversation above.");
    } finally {
      reply.setAttribute("aria-busy", "false");
      send.disabled = false;
      if (sent) {
        prompt.value = "";
        setNew(false);
      }
      // The conversation asks the server again (hx-trigger="model-exchange from:body").
      document.body.dispatchEvent(new Event("model-exchange"));
    }
  });

  // Once the conversation came back with the reply in it (as Markdown), the streamed copy goes.
  document.addEventListener("htmx:afterSwap", (e) => {
    if (e.target && e.target.id === "model-history") {
      const reply = $("model-reply");
      if (reply && reply.getAttribute("aria-busy") === "false") reply.textContent = "";
      setNew(startNew);
    }
    wake();
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wake);
  else wake();
})();
