// The journal page's own script: keeps the calls list up to date, and runs a replay from a
// call's page. Everything it puts on the page is HTML the server rendered (and escaped).
"use strict";

const POLL_MS = 2000;

function pageToken() {
  const meta = document.querySelector('meta[name="journal-ui-token"]');
  return meta ? meta.content : "";
}

function pollCalls() {
  const rows = document.getElementById("calls");
  if (!rows || !rows.dataset.poll) return;
  let busy = false;
  setInterval(async () => {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const response = await fetch(rows.dataset.poll, { credentials: "same-origin" });
      if (response.ok) {
        const fresh = await response.text();
        if (fresh !== rows.dataset.shown) {
          rows.innerHTML = fresh;
          rows.dataset.shown = fresh;
        }
      }
    } catch (error) {
      // the page's server is gone for now: the next tick tries again
    } finally {
      busy = false;
    }
  }, POLL_MS);
}

function replayForm() {
  const form = document.getElementById("replay");
  const result = document.getElementById("replay-result");
  if (!form || !result) return;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = form.querySelector("button");
    button.disabled = true;
    result.innerHTML = "";
    result.setAttribute("aria-busy", "true");
    result.textContent = "Replaying…";
    try {
      const response = await fetch(form.action, {
        method: "POST",
        body: new URLSearchParams(new FormData(form)),
        headers: { "X-Journal-UI-Token": pageToken() },
        credentials: "same-origin",
      });
      result.innerHTML = await response.text();
    } catch (error) {
      result.textContent = "The page's server did not answer: " + error;
    } finally {
      result.removeAttribute("aria-busy");
      button.disabled = false;
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  pollCalls();
  replayForm();
});
