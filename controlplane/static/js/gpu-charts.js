// The host page's GPU charts (templates/hosts/partials/gpu_charts.html). Finds each
// [data-gpu-charts] section, fetches its per-GPU series from the URL in that attribute
// (hosts:gpu_series) and draws one uPlot chart per metric, one line per GPU. No inline script
// and no inline style attributes in markup, so a Content Security Policy without
// 'unsafe-inline' needs nothing from this file.
(function () {
  "use strict";

  // Tableau 10: distinguishable for most colour-vision deficiencies, and on white.
  var COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7"];
  var HEIGHT = 230;
  var CHARTS = {
    memory: { metric: "memory_max_pct", average: "memory_pct", axis: "memory used, %", max: 100 },
    power: { metric: "power_w", axis: "power, W" },
    utilization: { metric: "utilization_pct", axis: "utilisation, %", max: 100 },
    temperature: { metric: "temperature_c", axis: "temperature, °C" },
  };

  function fmt(value, unit) {
    return value == null ? "–" : value.toFixed(1) + " " + unit;
  }

  // A bucket with no sample between two that have one is a missed probe (or the probe's own
  // jitter across a bucket boundary) when the samples on either side are at most two probe
  // intervals apart: uPlot spans `undefined` values. Longer runs stay null and show as gaps,
  // so an outage is not drawn over with a straight line.
  function bridgeShortGaps(values, maxRun) {
    var out = values.slice();
    var i = 0;
    while (i < out.length) {
      if (out[i] !== null) { i++; continue; }
      var j = i;
      while (j < out.length && out[j] === null) j++;
      if (i > 0 && j < out.length && j - i <= maxRun) {
        for (var k = i; k < j; k++) out[k] = undefined;
      }
      i = j;
    }
    return out;
  }

  function pad(n) {
    return n < 10 ? "0" + n : String(n);
  }

  // Time ticks in UTC and 24 h (as every other time on the pages), the date under the first
  // tick and under each tick that starts a new day.
  function timeTicks(u, splits) {
    var day = null;
    return splits.map(function (ts) {
      var d = new Date(ts * 1e3);
      var date = d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate());
      var label = pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes());
      if (date !== day) label += "\n" + date.slice(5);
      day = date;
      return label;
    });
  }

  function lineSeries(data, spec, unit) {
    var averages = spec.average ? data.series[spec.average] : null;
    return data.gpus.map(function (gpu, n) {
      var key = String(gpu);
      return {
        label: "GPU " + gpu,
        stroke: COLORS[n % COLORS.length],
        width: 1.5,
        value: function (u, value, si, di) {
          if (value == null) return "–";
          var avg = averages && di != null ? averages[key][di] : null;
          return fmt(value, unit) + (avg != null ? " (avg " + avg.toFixed(1) + ")" : "");
        },
      };
    });
  }

  function options(data, spec, width, syncKey) {
    var unit = data.units[spec.metric];
    return {
      width: width,
      height: HEIGHT,
      // The rest of the product shows UTC; local time here would disagree with the tables.
      // (The legend's time comes from this; the axis ticks from timeTicks.)
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      series: [{ label: "UTC", value: "{YYYY}-{MM}-{DD} {HH}:{mm}" }].concat(lineSeries(data, spec, unit)),
      scales: {
        x: { time: true, range: [data.t[0], data.t[data.t.length - 1] + data.bucket_seconds] },
        y: {
          range: function (u, min, max) {
            var top = spec.max != null ? spec.max : Math.max(1, (max || 0) * 1.1);
            return [spec.max != null ? 0 : Math.min(0, min || 0), top];
          },
        },
      },
      axes: [
        { label: "time (UTC)", labelSize: 20, values: timeTicks },
        { label: spec.axis, labelSize: 20, size: 48 },
      ],
      legend: { live: true },
      plugins: [eventMarkers(data.events || [])],
      // One cursor for the four charts: hovering a time shows every metric's values at it.
      cursor: { y: false, focus: { prox: 16 }, sync: { key: syncKey } },
      focus: { alpha: 0.3 },
    };
  }

  // A dashed vertical line at each GPU event (an Xid from the kernel log), on every chart.
  function eventMarkers(events) {
    return {
      hooks: {
        draw: function (u) {
          var ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = "#c0392b";
          ctx.setLineDash([4, 3]);
          ctx.lineWidth = 1.5;
          events.forEach(function (event) {
            var x = Math.round(u.valToPos(event.t, "x", true));
            if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
          });
          ctx.restore();
        },
      },
    };
  }

  function listEvents(root, events) {
    var list = root.querySelector("[data-chart-events]");
    if (!list) return;
    list.textContent = "";
    events.forEach(function (event) {
      var item = document.createElement("li");
      var when = new Date(event.t * 1e3).toISOString().replace("T", " ").slice(0, 19);
      item.textContent = when + " UTC · GPU " + (event.gpu == null ? "?" : event.gpu) + " · " + event.label;
      list.appendChild(item);
    });
    list.hidden = !events.length;
  }

  function setStatus(root, text) {
    var status = root.querySelector("[data-chart-status]");
    status.textContent = text || "";
    status.hidden = !text;
  }

  function draw(root, data) {
    (root._gpuCharts || []).forEach(function (chart) { chart.destroy(); });
    root._gpuCharts = [];
    listEvents(root, data.events || []);
    if (!data.gpus.length) {
      setStatus(root, "No GPU readings in this window yet.");
      return;
    }
    var maxRun = Math.floor((2 * data.probe_interval_seconds) / data.bucket_seconds) - 1;
    var minutes = data.bucket_seconds / 60;
    setStatus(root, "Each point is the " + (minutes >= 60 ? minutes / 60 + " h" : minutes + " min") +
      " average (memory: the peak) of the probes in it. Hover for values; click a GPU to hide it.");
    root.querySelectorAll("[data-chart]").forEach(function (figure) {
      var spec = CHARTS[figure.dataset.chart];
      if (!spec) return;
      var target = figure.querySelector(".gpu-chart");
      var columns = [data.t].concat(data.gpus.map(function (gpu) {
        return bridgeShortGaps(data.series[spec.metric][String(gpu)], maxRun);
      }));
      var opts = options(data, spec, target.clientWidth || 480, root.id || "gpu-charts");
      root._gpuCharts.push(new uPlot(opts, columns, target));
    });
  }

  function load(root, win) {
    setStatus(root, "Loading the GPU history…");
    var request = (root._gpuRequest || 0) + 1;
    root._gpuRequest = request;
    root.dataset.window = win;
    root.querySelectorAll("a[data-window]").forEach(function (link) {
      var current = link.dataset.window === win;
      link.classList.toggle("current", current);
      if (current) link.setAttribute("aria-current", "true"); else link.removeAttribute("aria-current");
    });
    var url = root.dataset.gpuCharts + "?window=" + encodeURIComponent(win);
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().then(function (body) {
          if (!response.ok) throw new Error(body.error || response.statusText);
          return body;
        });
      })
      .then(function (data) {
        if (request === root._gpuRequest) draw(root, data);  // a later click won the race
      })
      .catch(function (error) {
        if (request === root._gpuRequest) setStatus(root, "Could not load the GPU history: " + error.message);
      });
  }

  function init(root) {
    if (root.dataset.gpuChartsReady) return;
    root.dataset.gpuChartsReady = "1";
    if (typeof uPlot === "undefined") {
      setStatus(root, "The chart library did not load; the latest readings are in the table above.");
      return;
    }
    // The links work without JavaScript (they reload the page on that window); here they
    // redraw in place and keep the address shareable.
    root.querySelectorAll("a[data-window]").forEach(function (link) {
      link.addEventListener("click", function (event) {
        event.preventDefault();
        history.replaceState(null, "", link.getAttribute("href"));
        load(root, link.dataset.window);
      });
    });
    load(root, root.dataset.window || "24h");
  }

  function resizeAll() {
    document.querySelectorAll("[data-gpu-charts]").forEach(function (root) {
      (root._gpuCharts || []).forEach(function (chart) {
        var width = chart.root.parentNode.clientWidth;
        if (width && width !== chart.width) chart.setSize({ width: width, height: HEIGHT });
      });
    });
  }

  function initAll() {
    document.querySelectorAll("[data-gpu-charts]").forEach(init);
  }

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(resizeAll, 150);
  });
  document.addEventListener("htmx:afterSettle", initAll);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", initAll);
  else initAll();
})();
