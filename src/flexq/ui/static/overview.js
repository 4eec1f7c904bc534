"use strict";
// The overview: ClusterQueues with quota and usage bars, cohorts, node pools, ProvisioningRequests in flight.
(() => {
  const {el, bar, json, untilText, time, live, duration, steps, bars, svgNode, picture} = flexq;

  function table(head, rows, label) {
    const t = el("table", {"aria-label": label});
    t.append(el("thead", {}, el("tr", {}, ...head.map(h => el("th", {scope: "col"}, h)))));
    const body = el("tbody");
    for (const row of rows) body.append(row);
    t.append(body);
    return t;
  }

  // When the forecast expects the queue's waiting jobs to start: the first, and the last of them.
  function starts(q) {
    if (q.nextStartSeconds === null || q.nextStartSeconds === undefined) return null;
    const text = q.nextStartSeconds === q.allStartedSeconds ? `starts in ${duration(q.nextStartSeconds)}`
      : `starting in ${duration(q.nextStartSeconds)} to ${duration(q.allStartedSeconds)}`;
    return el("div", {class: "muted", "data-forecast": q.name}, text);
  }

  // A quota of no limit (Kueue's examples write 1000000000Gi) is said so, and has no bar to fill.
  function quota(r) { return r.unlimited ? `${r.usedText} (unlimited)` : `${r.usedText} / ${r.nominalText}`; }
  function usage(r, label) { return r.unlimited ? el("span", {class: "muted"}, "no limit") : bar(r.used, r.nominal, label); }

  // The cohort tree: cohorts (parents above children), each with its ClusterQueues, as boxes joined by lines.
  function tree(data) {
    const box = document.getElementById("cohort-tree");
    if (!data.cohorts.length) { box.replaceChildren(); return; }
    const known = new Set(data.cohorts.map(c => c.name));
    const kids = new Map(), rows = [];
    for (const c of data.cohorts) {
      const parent = c.parent && known.has(c.parent) ? c.parent : "";
      if (!kids.has(parent)) kids.set(parent, []);
      kids.get(parent).push(c);
    }
    const queuesByName = new Map(data.queues.map(q => [q.name, q]));
    const busiest = q => Math.max(0, ...q.flavors.flatMap(f => f.resources.filter(r => !r.unlimited && r.nominal > 0)
                                                    .map(r => r.used / r.nominal)));
    function walk(cohort, depth, seen) {
      if (seen.has(cohort.name)) return;  // a cycle (refused by Kueue; drawn once here)
      seen.add(cohort.name);
      const at = rows.length;
      rows.push({kind: "cohort", name: cohort.name, depth, parentRow: null});
      for (const child of kids.get(cohort.name) || []) {
        const first = rows.length;
        walk(child, depth + 1, seen);
        if (rows[first]) rows[first].parentRow = at;
      }
      for (const name of cohort.queues) {
        const q = queuesByName.get(name);
        rows.push({kind: "queue", name, depth: depth + 1, parentRow: at,
                   text: q ? `${q.pending} pending · ${q.admitted} admitted · busiest ${(busiest(q) * 100).toFixed(0)}%` : ""});
      }
    }
    const seen = new Set();
    for (const root of kids.get("") || []) walk(root, 0, seen);
    const standalone = data.queues.filter(q => !q.cohort);
    for (const q of standalone) rows.push({kind: "queue", name: q.name, depth: 0, parentRow: null,
                                          text: `${q.pending} pending · ${q.admitted} admitted (no cohort)`});
    const row = 30, indent = 28, W = 640, H = rows.length * row + 8;
    const svg = picture(W, H, "cohort tree");
    rows.forEach((r, i) => {
      const x = 6 + r.depth * indent, y = 4 + i * row;
      if (r.parentRow !== null) {
        const px = 6 + rows[r.parentRow].depth * indent + 10, py = 4 + r.parentRow * row + 22;
        svgNode(svg, "path", {class: "tree-line", d: `M${px},${py}V${y + 11}H${x}`});
      }
      const g = svgNode(svg, "g", {"data-node": r.name, "data-kind": r.kind, "data-depth": r.depth});
      const width = Math.min(W - x - 4, 12 + 7.2 * r.name.length + (r.text ? 7 * r.text.length / 1.15 + 16 : 0));
      svgNode(g, "rect", {class: `tree-box ${r.kind}`, x, y, width, height: 22, rx: 4});
      svgNode(g, "text", {class: "tree-name", x: x + 6, y: y + 15}, r.kind === "cohort" ? `⧉ ${r.name}` : r.name);
      if (r.text) svgNode(g, "text", {x: x + 16 + 7.2 * r.name.length, y: y + 15}, r.text);
    });
    box.replaceChildren(svg);
  }

  function history(h) {
    const since = h.since, now = h.now;
    document.getElementById("waiting-chart").replaceChildren(h.waiting.length
      ? steps(h.waiting, since, now, "jobs waiting over time", "jobs waiting")
      : el("p", {class: "muted"}, "No jobs in this hour."));
    document.getElementById("admissions-caption").textContent =
      `Admissions per ${duration(h.step)} (${h.admissions.reduce((a, b) => a + b, 0)} in the hour)`;
    document.getElementById("admissions-chart").replaceChildren(bars(h.admissions, since, h.step,
                                                                     "admissions over time", "admitted"));
    // Nodes are known since the server started: drawn from then where that is within the hour.
    const known = Math.min(now - 60, ...h.pools.map(p => p.points.length ? p.points[0][0] : now));
    document.getElementById("pool-charts").replaceChildren(...(h.pools.length ? h.pools.map(p =>
      el("figure", {"data-pool-chart": p.name}, el("figcaption", {}, p.name),
         steps([p], Math.max(since, known), now, `nodes of ${p.name} over time`, "nodes",
               {width: 320, height: 150, legend: false})))
      : [el("p", {class: "muted"}, "No node pools.")]));
  }

  function queues(data) {
    const rows = [];
    for (const q of data.queues) {
      const resources = q.flavors.flatMap(f => f.resources.map(r => [f.flavor, r]));
      resources.forEach(([flavor, r], i) => {
        const head = i === 0 ? [
          el("th", {scope: "row", rowspan: resources.length}, q.name,
             q.active ? null : el("div", {class: "state-failed"}, "inactive: " + q.reason)),
          el("td", {rowspan: resources.length}, q.cohort || "—"),
          el("td", {class: "num", rowspan: resources.length}, q.pending, starts(q)),
          el("td", {class: "num", rowspan: resources.length}, q.reserving),
          el("td", {class: "num", rowspan: resources.length}, q.admitted)] : [];
        rows.push(el("tr", {"data-queue": q.name}, ...head, el("td", {}, flavor), el("td", {}, r.resource),
          el("td", {class: "num"}, quota(r)), el("td", {}, usage(r, `${q.name} ${flavor} ${r.resource} in use`))));
      });
      if (!resources.length) rows.push(el("tr", {}, el("th", {scope: "row"}, q.name), el("td", {}, q.cohort),
        el("td", {class: "num"}, q.pending), el("td", {class: "num"}, q.reserving),
        el("td", {class: "num"}, q.admitted), el("td", {colspan: 4}, "no quota")));
    }
    return rows.length ? table(["ClusterQueue", "cohort", "pending", "reserved", "admitted", "flavor", "resource",
                                "in use / quota", "usage"], rows, "ClusterQueues")
      : el("p", {class: "muted"}, "No ClusterQueues yet.");
  }

  function render(data) {
    document.getElementById("queues").replaceChildren(queues(data));
    document.getElementById("cohorts").replaceChildren(data.cohorts.length ?
      table(["cohort", "ClusterQueues", "flavor", "resource", "in use / quota", "usage"],
        data.cohorts.flatMap(c => {
          const resources = c.flavors.flatMap(f => f.resources.map(r => [f.flavor, r]));
          return resources.map(([flavor, r], i) => el("tr", {"data-cohort": c.name},
            ...(i === 0 ? [el("th", {scope: "row", rowspan: resources.length}, c.name),
                           el("td", {rowspan: resources.length}, c.queues.join(", "))] : []),
            el("td", {}, flavor), el("td", {}, r.resource), el("td", {class: "num"}, quota(r)),
            el("td", {}, usage(r, `cohort ${c.name} ${flavor} ${r.resource} in use`))));
        }), "cohorts")
      : el("p", {class: "muted"}, "No cohorts: each ClusterQueue stands alone."));
    document.getElementById("pools").replaceChildren(data.pools.length ?
      table(["node pool", "machine", "capacity type", "ready", "booting", "not ready", "idle", "max", "$/node-hour",
             "$/hour now"],
        data.pools.map(p => el("tr", {"data-pool": p.name}, el("th", {scope: "row"}, p.name),
          el("td", {}, p.machineType), el("td", {}, p.capacityType), el("td", {class: "num"}, p.ready),
          el("td", {class: "num"}, p.booting), el("td", {class: "num"}, p.notReady), el("td", {class: "num"}, p.idle),
          el("td", {class: "num"}, p.maxNodes ?? ""),
          el("td", {class: "num"}, p.pricePerNodeHour === null ? "" : p.pricePerNodeHour.toFixed(2)),
          el("td", {class: "num"}, p.costPerHour.toFixed(2)))), "node pools")
      : el("p", {class: "muted"}, "No node pools."));
    document.getElementById("provisioning").replaceChildren(data.provisioning.length ?
      table(["ProvisioningRequest", "workload", "state", "created", "ETA", "message"],
        data.provisioning.map(p => el("tr", {"data-request": p.name}, el("th", {scope: "row"}, p.name),
          el("td", {}, el("a", {href: `/ui/jobs/${encodeURIComponent(p.namespace)}/${encodeURIComponent(p.workload)}`},
                          p.workload)),
          el("td", {}, p.state), el("td", {}, time(p.created)), el("td", {class: "eta"}, untilText(p.eta) || "unknown"),
          el("td", {class: "reason"}, p.message))), "ProvisioningRequests in flight")
      : el("p", {class: "muted"}, "None in flight."));
  }

  live(async () => {
    const [data, past] = await Promise.all([json("/flexq/v1/dashboard/overview"),
                                            json("/flexq/v1/dashboard/history?minutes=60")]);
    render(data);
    tree(data);
    history(past);
  });
})();
