// The revision comparison page's charts (templates/deployments/revisions.html): output tok/s
// and median TTFT against concurrency, one line per revision. Reads the figures from the JSON
// data block the section's data-revision-charts attribute names (Django's json_script) and
// draws them with uPlot. No inline script and no inline style in markup, so a Content Security
// Policy without 'unsafe-inline' needs nothing from this file.
(function () {
  "use strict";

  // Tableau 10, as the host page's GPU charts.
  var COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"];
  var HEIGHT = 280;
  var CHARTS = {
    tok_s: { axis: "output tok/s", unit: "tok/s", digits: 0 },
    ttft_p50_ms: { axis: "TTFT p50, ms", unit: "ms", digits: 0 },
  };

  function fmt(value, spec) {
    if (value == null) return "–";
    return value.toLocaleString("en-US", { maximumFractionDigits: spec.digits }) + " " + spec.unit;
  }

  function options(data, spec, width) {
    return {
      width: width,
      height: HEIGHT,
      series: [{ label: "concurrent", value: function (u, v) { return v == null ? "–" : String(v); } }].concat(
        data.series.map(function (s, n) {
          return {
            label: s.label,
            stroke: COLORS[n % COLORS.length],
            width: 2,
            points: { size: 7 },
            value: function (u, v) { return fmt(v, spec); },
          };
        })
      ),
      // Concurrency doubles from level to level: a log2 axis spaces 1, 8, 32, 64 sensibly.
      scales: { x: { time: false, distr: 3, log: 2 }, y: { range: function (u, min, max) { return [0, Math.max(1, (max || 0) * 1.1)]; } } },
      axes: [
        { label: "concurrent streams", labelSize: 20, values: function (u, splits) { return splits.map(String); } },
        { label: spec.axis, labelSize: 20, size: 60 },
      ],
      legend: { live: true },
      cursor: { y: false, focus: { prox: 16 }, sync: { key: "revision-charts" } },
      focus: { alpha: 0.3 },
    };
  }

  function setStatus(root, text) {
    var status = root.querySelector("[data-chart-status]");
    if (!status) return;
    status.textContent = text || "";
    status.hidden = !text;
  }

  function draw(root) {
    var source = document.getElementById(root.dataset.revisionCharts);
    var data = source ? JSON.parse(source.textContent) : null;
    if (!data || !data.series.length) return;
    if (typeof uPlot === "undefined") {
      setStatus(root, "The chart library did not load; the figures are in the table below.");
      return;
    }
    setStatus(root, "Hover for each revision's figures; click a revision to hide it.");
    root._revisionCharts = [];
    root.querySelectorAll("[data-chart]").forEach(function (figure) {
      var key = figure.dataset.chart;
      var spec = CHARTS[key];
      if (!spec) return;
      var target = figure.querySelector(".revision-chart");
      var columns = [data.levels].concat(data.series.map(function (s) { return s[key]; }));
      root._revisionCharts.push(new uPlot(options(data, spec, target.clientWidth || 600), columns, target));
    });
  }

  function init() {
    document.querySelectorAll("[data-revision-charts]").forEach(function (root) {
      if (root.dataset.revisionChartsReady) return;
      root.dataset.revisionChartsReady = "1";
      draw(root);
    });
  }

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      document.querySelectorAll("[data-revision-charts]").forEach(function (root) {
        (root._revisionCharts || []).forEach(function (chart) {
          var width = chart.root.parentNode.clientWidth;
          if (width && width !== chart.width) chart.setSize({ width: width, height: HEIGHT });
        });
      });
    }, 150);
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
