"use strict";
// Shared by every page: JSON fetches (same origin, relative URLs), times in the viewer's zone, live refresh.
const flexq = (() => {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const timeFormat = new Intl.DateTimeFormat(undefined, {dateStyle: "medium", timeStyle: "medium"});

  // The session's CSRF token, given to this page by the server (its cookie is HttpOnly): a write sends it back.
  const csrf = document.querySelector('meta[name="flexq-csrf"]')?.content || "";

  async function answered(response) {
    if (!response.ok) {
      const body = await response.text();
      let said = body;
      try { said = JSON.parse(body).message || body; } catch (_) { /* not JSON: the text as it came */ }
      throw new Error(`${response.status} ${said.trim()}`);
    }
    return response.status === 204 ? null : response.json();
  }

  async function json(url) {
    return answered(await fetch(url, {headers: {Accept: "application/json"}}));
  }

  // send("DELETE", url) or send("POST", url, object): a write as the session, with its CSRF token.
  async function send(method, url, body) {
    const headers = {Accept: "application/json", "X-CSRF-Token": csrf};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return answered(await fetch(url, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)}));
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

  // Calls refresh() now and whenever the store changes (server-sent events), at most once a second. While the
  // server cannot be read, the page says so (#error, and each card still loading) and tries again every 5 s.
  function live(refresh) {
    const status = document.getElementById("live");
    const banner = document.getElementById("error");
    let busy = false, again = false, retry = null;
    async function run() {
      if (busy) { again = true; return; }
      busy = true;
      try {
        await refresh();
        if (banner) banner.hidden = true;
      } catch (error) {
        console.warn(error);
        const text = `Could not read the server: ${error.message || error}`;
        if (banner) { banner.textContent = text + " (trying again)"; banner.hidden = false; }
        for (const node of document.querySelectorAll(".loading")) {
          node.textContent = "Could not load this: the server did not answer.";
          node.classList.add("failed");
        }
        clearTimeout(retry);
        retry = setTimeout(run, 5000);
      }
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

  // --- pictures: inline SVG drawn here, nothing fetched from elsewhere --------------------------------------------
  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = ["#1a5fb4", "#c64600", "#2a7f3f", "#8f3f97", "#986a44", "#b3261e", "#3d8c9e", "#5b6475"];

  function svgNode(parent, tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = String(text);
    if (parent) parent.append(node);
    return node;
  }

  // An <svg> that scales to its box's width (down to its viewBox's), labelled for screen readers.
  function picture(width, height, label) {
    return svgNode(null, "svg", {class: "chart", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
                                 "aria-label": label, preserveAspectRatio: "xMinYMin meet"});
  }

  const clock = new Intl.DateTimeFormat(undefined, {hour: "2-digit", minute: "2-digit"});

  // A time axis from t0 to t1 (epoch seconds) along y, between x0 and x1, with a tick every so often.
  function timeAxis(svg, t0, t1, x0, x1, y, title) {
    svgNode(svg, "line", {class: "axis", x1: x0, y1: y, x2: x1, y2: y});
    const span = Math.max(1, t1 - t0), n = x1 - x0 < 400 ? 2 : 4;  // ticks far enough apart for their labels
    for (let i = 0; i <= n; i++) {
      const x = x0 + (x1 - x0) * i / n, t = t0 + span * i / n;
      svgNode(svg, "line", {class: "axis", x1: x, y1: y, x2: x, y2: y + 4});
      svgNode(svg, "text", {x, y: y + 16, "text-anchor": i === 0 ? "start" : i === n ? "end" : "middle"},
              span < 600 ? new Date(t * 1000).toLocaleTimeString() : clock.format(new Date(t * 1000)));
    }
    svgNode(svg, "text", {x: (x0 + x1) / 2, y: y + 31, "text-anchor": "middle", class: "axis-title"}, title);
  }

  // A value axis from 0 to top along x0, between y0 (bottom) and y1, with its title turned along it.
  function valueAxis(svg, top, x0, y0, y1, title) {
    svgNode(svg, "line", {class: "axis", x1: x0, y1: y0, x2: x0, y2: y1});
    const whole = Number.isInteger(top);
    for (const v of [0, top / 2, top]) {
      if (whole && !Number.isInteger(v)) continue;
      const y = y0 - (y0 - y1) * (top ? v / top : 0);
      svgNode(svg, "line", {class: "grid", x1: x0, y1: y, x2: x0 - 4, y2: y});
      svgNode(svg, "text", {x: x0 - 6, y: y + 4, "text-anchor": "end"}, v);
    }
    svgNode(svg, "text", {class: "axis-title", "text-anchor": "middle",
                          transform: `translate(12 ${(y0 + y1) / 2}) rotate(-90)`}, title);
  }

  // Step lines (each value holds until the next point) over [since, now], one per series, with a legend.
  function steps(series, since, now, label, yTitle, options = {}) {
    const W = options.width || 640, H = options.height || 220, L = 52, R = 12, T = options.legend === false ? 10 : 26,
          B = 40;
    const svg = picture(W, H, label);
    const top = Math.max(1, ...series.flatMap(s => s.points.map(p => p[1])));
    const x = t => L + (W - L - R) * Math.min(1, Math.max(0, (t - since) / Math.max(1, now - since)));
    const y = v => H - B - (H - T - B) * v / top;
    valueAxis(svg, top, L, H - B, T, yTitle);
    timeAxis(svg, since, now, L, W - R, H - B, `time (${zone})`);
    series.forEach((s, i) => {
      const color = s.color || COLORS[i % COLORS.length];
      let d = "", last = 0;
      for (const [t, v] of s.points) {
        d += d ? `L${x(t).toFixed(1)},${y(last).toFixed(1)}L${x(t).toFixed(1)},${y(v).toFixed(1)}`
               : `M${x(t).toFixed(1)},${y(v).toFixed(1)}`;
        last = v;
      }
      if (!d) return;
      d += `L${x(now).toFixed(1)},${y(last).toFixed(1)}`;
      const path = svgNode(svg, "path", {class: "series", d, stroke: color, "data-series": s.name});
      svgNode(path, "title", {}, `${s.name}: ${last} now`);
      if (options.legend !== false) {
        svgNode(svg, "text", {x: L + 4 + i * 150, y: 14, style: `fill:${color}`, class: "legend"}, `■ ${s.name}`);
      }
    });
    return svg;
  }

  // Bars: one per bucket of `step` seconds from `since`.
  function bars(values, since, step, label, yTitle) {
    const W = 640, H = 180, L = 52, R = 12, T = 10, B = 40, now = since + step * values.length;
    const svg = picture(W, H, label);
    const top = Math.max(1, ...values);
    const width = (W - L - R) / Math.max(1, values.length);
    valueAxis(svg, top, L, H - B, T, yTitle);
    timeAxis(svg, since, now, L, W - R, H - B, `time (${zone})`);
    values.forEach((v, i) => {
      if (!v) return;
      const h = (H - T - B) * v / top;
      const rect = svgNode(svg, "rect", {class: "bar-v", x: (L + i * width + 0.5).toFixed(1), y: (H - B - h).toFixed(1),
                                         width: Math.max(1, width - 1).toFixed(1), height: h.toFixed(1), "data-value": v});
      svgNode(rect, "title", {}, `${v} from ${time(new Date((since + i * step) * 1000).toISOString())}`);
    });
    return svg;
  }

  return {json, send, time, duration, untilText, el, bar, live, zone, svgNode, picture, steps, bars, timeAxis, COLORS};
})();
