"use strict";
// The overview: ClusterQueues with quota and usage bars, cohorts, node pools, ProvisioningRequests in flight.
(() => {
  const {el, bar, json, untilText, time, live, duration} = flexq;

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
          el("td", {class: "num"}, `${r.usedText} / ${r.nominalText}`),
          el("td", {}, bar(r.used, r.nominal, `${q.name} ${flavor} ${r.resource} in use`))));
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
            el("td", {}, flavor), el("td", {}, r.resource), el("td", {class: "num"}, `${r.usedText} / ${r.nominalText}`),
            el("td", {}, bar(r.used, r.nominal, `cohort ${c.name} ${flavor} ${r.resource} in use`))));
        }), "cohorts")
      : el("p", {class: "muted"}, "No cohorts: each ClusterQueue stands alone."));
    document.getElementById("pools").replaceChildren(data.pools.length ?
      table(["node pool", "machine", "capacity type", "ready", "booting", "idle", "max", "$/node-hour", "$/hour now"],
        data.pools.map(p => el("tr", {"data-pool": p.name}, el("th", {scope: "row"}, p.name),
          el("td", {}, p.machineType), el("td", {}, p.capacityType), el("td", {class: "num"}, p.ready),
          el("td", {class: "num"}, p.booting), el("td", {class: "num"}, p.idle),
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

  live(async () => render(await json("/flexq/v1/dashboard/overview")));
})();
