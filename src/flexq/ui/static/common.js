"use strict";
// Shared by every page: JSON fetches (same origin, relative URLs), times in the viewer's zone, live refresh.
const flexq = (() => {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const timeFormat = new Intl.DateTimeFormat(undefined, {dateStyle: "medium", timeStyle: "medium"});

  async function json(url) {
    const response = await fetch(url, {headers: {Accept: "application/json"}});
    if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
    return response.json();
  }

  function time(iso) {
    if (!iso) return "";
    const at = new Date(iso);
    return isNaN(at) ? iso : timeFormat.format(at);
  }

  function duration(seconds) {
    let s = Math.max(0, Math.round(seconds));
    if (s < 120) return `${s}s`;
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    if (d) return `${d}d${h ? h + "h" : ""}`;
    if (h) return `${h}h${m ? m + "m" : ""}`;
    return `${m}m${s % 60 ? s % 60 + "s" : ""}`;
  }

  function untilText(iso) {
    if (!iso) return "";
    const left = (new Date(iso) - Date.now()) / 1000;
    return `${time(iso)} (${left > 0 ? "in " + duration(left) : "due"})`;
  }

  // el("td", {class: "num"}, "text", child...): text is set as text, never parsed as HTML.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function bar(used, total, label) {
    const share = total > 0 ? Math.min(1, used / total) : 0;
    const outer = el("span", {class: "bar", role: "meter", "aria-label": label, "aria-valuemin": 0,
                              "aria-valuemax": total, "aria-valuenow": used});
    outer.append(el("span", {style: `width:${(share * 100).toFixed(1)}%`}));
    return outer;
  }

  // Calls refresh() now and whenever the store changes (server-sent events), at most once a second.
  function live(refresh) {
    const status = document.getElementById("live");
    let busy = false, again = false;
    async function run() {
      if (busy) { again = true; return; }
      busy = true;
      try { await refresh(); } catch (error) { console.warn(error); }
      busy = false;
      if (again) { again = false; setTimeout(run, 1000); }
    }
    run();
    const source = new EventSource("/flexq/v1/dashboard/changes");
    source.addEventListener("change", run);
    source.onopen = () => { if (status) status.textContent = `live · times in ${zone}`; };
    source.onerror = () => { if (status) status.textContent = `reconnecting… · times in ${zone}`; };
    return source;
  }

  return {json, time, duration, untilText, el, bar, live, zone};
})();
