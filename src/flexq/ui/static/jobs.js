"use strict";
// The jobs table: filtered, sorted and paged by the server; the choices live in the address (shareable).
(() => {
  const {el, json, duration, untilText, time, live} = flexq;
  // ETA and cost come before the long columns, and what matters least goes first on a narrow screen (app.css hides
  // the .wide columns under 1100 px): the table never needs scrolling sideways to show when a job starts and costs.
  const columns = [["name", "job"], ["queue", "queue"], ["state", "state"], ["wait", "wait"], [null, "ETA"],
                   ["cost", "cost"], [null, "flavors"], [null, "why pending"], ["priority", "priority", "wide"],
                   ["created", "created", "wide"]];
  const params = new URLSearchParams(location.search);
  const view = {queue: params.get("queue") || "", state: params.get("state") || "", flavor: params.get("flavor") || "",
                sort: params.get("sort") || "created", order: params.get("order") || "asc",
                offset: Number(params.get("offset") || 0), limit: Number(params.get("limit") || 50)};
  const filters = {queue: "f-queue", state: "f-state", flavor: "f-flavor", limit: "f-limit"};

  function query() {
    const q = new URLSearchParams();
    for (const [key, value] of Object.entries(view)) if (value !== "" && value !== null) q.set(key, value);
    return q.toString();
  }

  function options(select, values, chosen) {
    const keep = select.value;
    select.replaceChildren(el("option", {value: ""}, "all"), ...values.map(v => el("option", {value: v}, v)));
    select.value = values.includes(chosen) ? chosen : (values.includes(keep) ? keep : "");
  }

  // Built once and then only marked, so that a sort button keeps the keyboard focus across refreshes.
  function header() {
    const row = document.querySelector("#jobs thead tr");
    if (!row.children.length) {
      row.append(...columns.map(([key, label, wide]) => {
        if (!key) return el("th", {scope: "col", class: label === "ETA" ? "eta" : null}, label);
        const button = el("button", {type: "button", "data-sort": key}, label, el("span", {class: "arrow"}));
        button.addEventListener("click", () => {
          view.order = view.sort === key && view.order === "asc" ? "desc" : "asc";
          view.sort = key; view.offset = 0; refresh();
        });
        return el("th", {scope: "col", "data-sort": key, class: wide || (key === "cost" ? "num" : null)}, button);
      }));
    }
    for (const th of row.querySelectorAll("th[data-sort]")) {
      const sorted = view.sort === th.dataset.sort;
      th.setAttribute("aria-sort", sorted ? (view.order === "asc" ? "ascending" : "descending") : "none");
      th.querySelector(".arrow").textContent = sorted ? (view.order === "asc" ? " ▲" : " ▼") : "";
    }
  }

  let asked = 0;  // refreshes started: an answer to an older one than the last is not shown over a newer one's
  async function refresh() {
    const mine = ++asked;
    history.replaceState(null, "", "?" + query());
    header();
    const page = await json("/flexq/v1/dashboard/jobs?" + query());
    if (mine !== asked) return;
    options(document.getElementById("f-queue"), page.queues, view.queue);
    options(document.getElementById("f-state"), page.states, view.state);
    options(document.getElementById("f-flavor"), page.flavors, view.flavor);
    document.getElementById("f-limit").value = String(view.limit);
    const body = document.querySelector("#jobs tbody");
    body.replaceChildren(...page.items.map(j => el("tr", {"data-job": j.jobName || j.name, "data-state": j.state},
      el("th", {scope: "row", class: "job"},
         el("a", {href: `/ui/jobs/${encodeURIComponent(j.namespace)}/${encodeURIComponent(j.name)}`}, j.jobName || j.name),
         el("div", {class: "muted"}, `${j.namespace}/${j.name}`)),
      el("td", {}, j.queue, el("div", {class: "muted"}, j.clusterQueue)),
      el("td", {class: `state state-${j.state}`}, j.state),
      el("td", {class: "num"}, duration(j.waitSeconds)), el("td", {class: "eta"}, untilText(j.eta)),
      el("td", {class: "num cost"}, "$" + j.costUsd.toFixed(2)), el("td", {class: "flavors"}, j.flavors.replaceAll(",", ",\u200b")),
      el("td", {class: "reason"}, j.reason), el("td", {class: "num wide"}, j.priority),
      el("td", {class: "wide"}, time(j.created)))));
    if (!page.items.length) {
      body.replaceChildren(el("tr", {}, el("td", {colspan: columns.length, class: "muted"},
        page.total ? "No rows on this page." : "No jobs match.")));
    }
    const first = page.total ? page.offset + 1 : 0, last = Math.min(page.total, page.offset + page.items.length);
    document.getElementById("count").textContent = `${page.total} job(s)`;
    document.getElementById("page").textContent = `rows ${first} to ${last} of ${page.total}`;
    document.getElementById("prev").disabled = page.offset === 0;
    document.getElementById("next").disabled = last >= page.total;
  }

  for (const [key, id] of Object.entries(filters)) {
    document.getElementById(id).addEventListener("change", (event) => {
      view[key] = key === "limit" ? Number(event.target.value) : event.target.value;
      view.offset = 0; refresh();
    });
  }
  document.getElementById("prev").addEventListener("click", () => {
    view.offset = Math.max(0, view.offset - view.limit); refresh();
  });
  document.getElementById("next").addEventListener("click", () => { view.offset += view.limit; refresh(); });
  live(refresh);
})();
