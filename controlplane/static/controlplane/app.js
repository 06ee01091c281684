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
