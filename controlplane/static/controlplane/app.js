// Snapshot ages count up between refreshes. The server renders the age it computed with its own
// clock (data-age); the browser only adds the time elapsed since, so client clock skew is harmless.
(function () {
  function tick() {
    const now = performance.now() / 1000;
    document.querySelectorAll("[data-age]").forEach(function (el) {
      if (!el.dataset.seenAt) el.dataset.seenAt = String(now);
      const age = Math.round(parseFloat(el.dataset.age) + now - parseFloat(el.dataset.seenAt));
      const limit = parseFloat(el.dataset.maxAge || "0");
      el.textContent = age + " s ago";
      if (limit) {
        el.classList.toggle("stale", age > limit);
        el.classList.toggle("fresh", age <= limit);
      }
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("htmx:afterSettle", tick);
  document.addEventListener("DOMContentLoaded", tick);
})();

// Behaviour that used to sit in attributes (onclick, hx-on, an hx-trigger filter) lives here:
// the Content-Security-Policy allows scripts from our static files only, with no inline
// handlers and no eval (which htmx uses for hx-on and for "[...]" trigger filters).
(function () {
  // <form data-confirm="question">: ask before submitting.
  document.addEventListener("submit", function (event) {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });
  // A poll with data-poll-unless="selector" skips its request while that selector matches
  // (the fleet table waits while a row polls for its own probe).
  document.addEventListener("htmx:beforeRequest", function (event) {
    const selector = event.detail.elt.dataset && event.detail.elt.dataset.pollUnless;
    if (selector && document.querySelector(selector)) event.preventDefault();
  });
  // 422: a form's input was refused, and the answer is the fragment with its error in place
  // of the form (htmx leaves 4xx answers unswapped by default).
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr.status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
  // data-reload-after="ms": reload the page that long after the element's request ended.
  document.addEventListener("htmx:afterRequest", function (event) {
    const delay = event.detail.elt.dataset && event.detail.elt.dataset.reloadAfter;
    if (delay) {
      setTimeout(function () {
        window.location.reload();
      }, parseInt(delay, 10));
    }
  });
})();

// A disclosure a person opened or closed stays so when htmx swaps its part of the page in again
// (the change page refreshes its steps every second): what they chose, by the element's id,
// wins over how the server renders it.
(function () {
  const chosen = new Map();
  document.addEventListener("click", function (event) {
    const summary = event.target.closest && event.target.closest("summary");
    const details = summary && summary.parentElement;
    if (!details || details.tagName !== "DETAILS" || !details.id) return;
    setTimeout(function () {
      chosen.set(details.id, details.open);
    }, 0);
  });
  document.addEventListener("htmx:afterSettle", function () {
    chosen.forEach(function (open, id) {
      const details = document.getElementById(id);
      if (details && details.tagName === "DETAILS" && details.open !== open) details.open = open;
    });
  });
})();
