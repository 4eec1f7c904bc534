"use strict";
(() => {
  const {el, json, time, live} = flexq;
  live(async () => {
    const reports = await json("/flexq/v1/dashboard/reports");
    const box = document.getElementById("reports");
    if (!reports.length) { box.replaceChildren(el("p", {class: "muted"}, "No reports yet.")); return; }
    const list = el("ul");
    for (const r of reports) list.append(el("li", {}, el("a", {href: r.url}, r.name), " ",
                                             el("span", {class: "muted"}, time(r.modified))));
    box.replaceChildren(list);
  });
})();
