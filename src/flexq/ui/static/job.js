"use strict";
// One job: where it stands, its racing variants, flavors considered, timeline, training metrics, driver log.
(() => {
  const {el, json, duration, untilText, time, live, svgNode, picture, timeAxis} = flexq;
  const PHASE_COLORS = {queued: "#a15c00", racing: "#8f3f97", provisioning: "#3d8c9e", "waiting for checks": "#986a44",
                        running: "#2a7f3f", admitted: "#5b6475"};
  const [, , , namespace, name] = location.pathname.split("/").map(decodeURIComponent);
  const api = `/flexq/v1/dashboard/jobs/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
  const MAX_LINES = 5000;
  let logState = "none";  // none -> following | loaded
  let metrics = [], executes = true;

  function table(head, rows, label) {
    return el("table", {"aria-label": label}, el("thead", {}, el("tr", {}, ...head.map(h => el("th", {scope: "col"}, h)))),
              el("tbody", {}, ...rows));
  }

  function facts(d) {
    const j = d.job;
    const pairs = [["job", `${j.jobKind} ${j.namespace}/${j.jobName}`], ["workload", j.name],
      ["queue", `${j.queue} → ${j.clusterQueue}`], ["state", el("span", {class: `state state-${j.state}`, id: "state"},
                                                             j.state)],
      ["job status", d.jobStatus || "—"],
      ["execution", d.executes ? "run by this server" : el("span", {id: "execution"},
        "not executed: this server runs with --runtime none")], ["priority", j.priority], ["flavors", j.flavors || "—"],
      ["created", time(j.created)], [j.state === "pending" || j.state === "reserved" ? "waiting" : "waited",
                                     duration(j.waitSeconds)],
      ["why", d.why || j.reason || "—"], ["ETA", untilText(j.eta) || "—"],
      ["forecast", j.forecast ? `${j.forecast} (${j.forecastBasis.toLowerCase()})` : "—"],
      ["cost so far", "$" + j.costUsd.toFixed(4)],
      ["Ray dashboard", d.rayDashboardUrl ? el("a", {href: d.rayDashboardUrl, id: "ray-link"},
                                               "open the job's Ray dashboard")
                                          : el("span", {class: "muted"}, "while its Ray cluster runs")]];
    document.getElementById("facts").replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  // One row per phase on a shared time axis, from the job's creation to now (or its end).
  function phases(list) {
    const box = document.getElementById("phases");
    if (!list.length) { box.replaceChildren(el("p", {class: "muted"}, "Nothing recorded yet.")); return; }
    const now = Date.now() / 1000, at = iso => new Date(iso).getTime() / 1000;
    const t0 = Math.min(...list.map(p => at(p.start)));
    const t1 = Math.max(t0 + 1, ...list.map(p => p.end ? at(p.end) : now));
    const W = 720, L = 140, R = 16, row = 26, T = 8, H = T + row * list.length + 44;
    const x = t => L + (W - L - R) * (t - t0) / (t1 - t0);
    const svg = picture(W, H, "the job's phases over time");
    list.forEach((p, i) => {
      const y = T + i * row, start = at(p.start), end = p.end ? at(p.end) : now;
      svgNode(svg, "text", {x: L - 8, y: y + 16, "text-anchor": "end", class: "phase-label"}, p.name);
      const rect = svgNode(svg, "rect", {x: x(start).toFixed(1), y: y + 4, height: row - 8, rx: 3,
        width: Math.max(2, x(end) - x(start)).toFixed(1), fill: PHASE_COLORS[p.name] || "#1a5fb4",
        "data-phase": p.name, "data-ongoing": p.end ? "false" : "true"});
      svgNode(rect, "title", {}, `${p.name}: ${duration(end - start)}${p.end ? "" : " so far"} — ${p.detail}`);
    });
    timeAxis(svg, t0, t1, L, W - R, T + row * list.length + 4, `time (${flexq.zone})`);
    box.replaceChildren(svg, el("ul", {class: "phase-list"}, ...list.map(p => el("li", {},
      el("strong", {}, p.name), ` ${time(p.start)} → ${p.end ? time(p.end) : "now"}`,
      ` (${duration((p.end ? at(p.end) : now) - at(p.start))}) `, el("span", {class: "muted"}, p.detail)))));
  }

  function chart() {
    const select = document.getElementById("metric");
    const keys = [...new Set(metrics.flatMap(p => Object.keys(p.values)))].filter(k => k !== "epoch");
    const chosen = keys.includes(select.value) ? select.value : (keys.includes("loss") ? "loss" : keys[0]);
    select.replaceChildren(...keys.map(k => el("option", {value: k}, k)));
    select.value = chosen || "";
    const box = document.getElementById("chart");
    const points = metrics.filter(p => chosen in p.values)
      .map(p => [p.values.epoch ?? p.report, p.values[chosen]]);
    if (!points.length) {
      box.replaceChildren(el("p", {class: "muted"}, executes ? "No metrics reported yet."
                                                              : "No metrics: jobs are not executed by this server."));
      return;
    }
    const W = 640, H = 260, L = 64, R = 16, T = 12, B = 36;
    const xs = points.map(p => p[0]), ys = points.map(p => p[1]);
    const log = document.getElementById("log-scale").checked && ys.every(v => v > 0);
    const f = log ? Math.log10 : (v => v);
    const x0 = Math.min(...xs), x1 = Math.max(...xs);
    const y0 = log ? Math.min(...ys) : Math.min(0, ...ys), y1 = Math.max(...ys);
    const sx = v => L + (x1 === x0 ? 0.5 : (v - x0) / (x1 - x0)) * (W - L - R);
    const sy = v => H - B - (f(y1) === f(y0) ? 0.5 : (f(v) - f(y0)) / (f(y1) - f(y0))) * (H - T - B);
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    const add = (parent, tag, attrs, text) => {
      const node = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
      if (text !== undefined) node.textContent = text;
      parent.append(node);
      return node;
    };
    for (const [k, v] of Object.entries({class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
                                         "aria-label": `${chosen} against ${"epoch" in metrics[0].values ? "epoch"
                                                                                                       : "report"}`})) {
      svg.setAttribute(k, v);
    }
    add(svg, "line", {class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B});
    add(svg, "line", {class: "axis", x1: L, y1: T, x2: L, y2: H - B});
    add(svg, "text", {x: L - 6, y: sy(y1) + 4, "text-anchor": "end"}, y1.toPrecision(3));
    add(svg, "text", {x: L - 6, y: sy(y0) + 4, "text-anchor": "end"}, y0.toPrecision(3));
    add(svg, "text", {x: sx(x0), y: H - B + 16, "text-anchor": "middle"}, x0);
    add(svg, "text", {x: sx(x1), y: H - B + 16, "text-anchor": "middle"}, x1);
    add(svg, "text", {x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle"}, "epoch" in metrics[0].values ? "epoch"
                                                                                                         : "report");
    add(svg, "path", {class: "line", d: points.map((p, i) => `${i ? "L" : "M"}${sx(p[0])},${sy(p[1])}`).join(" ")});
    for (const [x, y] of points) {
      add(add(svg, "circle", {cx: sx(x), cy: sy(y), r: 4, "data-x": x, "data-y": y}), "title", {}, `${x}: ${y}`);
    }
    box.replaceChildren(svg);
  }

  function appendLog(text) {
    const pre = document.getElementById("log");
    pre.textContent += text;
    const lines = pre.textContent.split("\n");
    if (lines.length > MAX_LINES) pre.textContent = lines.slice(-MAX_LINES).join("\n");
    if (document.getElementById("follow").checked) pre.scrollTop = pre.scrollHeight;
  }

  async function loadLog(url, finished) {
    if (logState !== "none") return;
    logState = finished ? "loaded" : "following";
    const pre = document.getElementById("log");
    pre.textContent = "";
    const response = await fetch(finished ? url : url + "?follow=true");
    if (!response.ok) { logState = "none"; return; }
    const reader = response.body.getReader(), decoder = new TextDecoder();
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      appendLog(decoder.decode(value, {stream: true}));
    }
    logState = "loaded";
  }

  // What stands in for the log where there is none: it agrees with the state and the phases above.
  function logNote(d) {
    const state = d.job.state;
    const idle = "this server runs with --runtime none, so jobs are queued and admitted but never executed";
    if (state === "pending" || state === "reserved") {
      return "The job has not started yet: it waits to be admitted." + (d.executes ? "" : ` Once admitted it will not run: ${idle}.`);
    }
    if (state === "inactive") return "The job is deactivated: it does not run.";
    if (!d.executes) return `No driver log: ${idle}.` + (state === "admitted" ? " This job is admitted; nothing runs." : "");
    if (state === "admitted") return "The job is admitted: its log shows once its driver starts.";
    return d.job.jobKind === "RayJob" ? "No driver log was kept for this job."
      : `No driver log: only RayJobs' drivers are logged here (this is a ${d.job.jobKind || "workload"}).`;
  }

  async function refresh() {
    const d = await json(api);
    document.getElementById("title").textContent = `${d.job.jobKind || "Workload"} ${d.job.jobName || d.job.name}`;
    document.title = `flexq · ${d.job.jobName || d.job.name}`;
    facts(d);
    document.getElementById("variants-card").hidden = !d.variants.length;
    document.getElementById("variants").replaceChildren(table(["variant", "flavor", "state", "why"],
      d.variants.map(v => el("tr", {}, el("td", {}, v.name), el("td", {}, v.flavor), el("td", {}, v.state),
                             el("td", {class: "reason"}, v.message))), "racing variants"));
    document.getElementById("considered").replaceChildren(d.considered.length ?
      table(["pod set", "flavor", "mode", "borrowing", "why refused"], d.considered.map(c => el("tr", {},
        el("td", {}, c.podSet), el("td", {}, c.flavor), el("td", {}, c.mode), el("td", {}, c.borrowing ? "yes" : "no"),
        el("td", {class: "reason"}, c.reasons.join("; ") || "taken"))), "flavors considered")
      : el("p", {class: "muted"}, "No nomination recorded (the workload holds its flavors, or none was tried)."));
    document.getElementById("timeline").replaceChildren(table(["time", "source", "what", "detail"],
      d.timeline.map(t => el("tr", {}, el("td", {}, time(t.time)), el("td", {}, t.source), el("td", {}, t.what),
                             el("td", {class: "reason"}, t.detail))), "timeline"));
    metrics = d.metrics;
    executes = d.executes;
    chart();
    phases(d.phases);
    if (d.logUrl) loadLog(d.logUrl, ["succeeded", "failed"].includes(d.job.state));
    else if (logState === "none") document.getElementById("log").textContent = logNote(d);
  }

  document.getElementById("metric").addEventListener("change", chart);
  document.getElementById("log-scale").addEventListener("change", chart);
  live(refresh);
})();
