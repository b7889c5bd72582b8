"use strict";
/* The inbox people work in all day, beside ui.html: the interrupts as a dense table (one line each),
   the current one's detail in a side panel (its card, as the page draws it), keys to move and to
   answer, bulk answers for the rows selected, and on a run's page its children as a tree, the time
   between events, and a confirmation before fork and cancel.
   Loaded before the page's own script, it calls that script's helpers ($, el, api, post, card,
   utc, span, sessionOf, problemText, me) only once the page runs. */

/* --- the table --------------------------------------------------------------------------- */
const queueCards = new Map();  // requestId -> its card, built once and kept (it holds the answer's state)
const queueItems = new Map();  // requestId -> the item as last listed
let queueCurrent = null;       // the row the keys act on (its request id)
let queueAnchor = null;        // the checkbox clicked last: a shift-click selects the range from it

function queueRows() { return Array.from($("items").children); }
function queueRow(requestId) { return queueRows().find((tr) => tr.dataset.requestId === requestId) || null; }
function queueQuestion(item) { const asked = item.request || {}; return asked.question || asked.schemaId || "(no question)"; }

// Draw the listing: rows for new items in the listing's order, times refreshed for the others; a
// row that left the listing goes unless it was acted on here (it then says how that went).
function queueReconcile(items, drop) {
  const list = $("items");
  const seen = new Set(items.map((item) => item.requestId));
  if (drop) for (const tr of queueRows()) if (!seen.has(tr.dataset.requestId) && !tr.dataset.state) queueForget(tr);
  let before = list.firstChild;
  for (const item of items) {
    queueItems.set(item.requestId, item);
    let tr = queueRow(item.requestId);
    if (!tr) tr = queueRowFor(item); else queueFill(tr, item);
    if (tr !== before) list.insertBefore(tr, before); else before = before.nextSibling;
    before = tr.nextSibling;
  }
  queueSelectionChanged();
}
function queueAppend(items) {
  for (const item of items) if (!queueRow(item.requestId)) { queueItems.set(item.requestId, item); $("items").append(queueRowFor(item)); }
  queueSelectionChanged();
}
function queueForget(tr) {
  const id = tr.dataset.requestId;
  tr.remove(); queueItems.delete(id);
  if (queueCurrent === id) queueClose(); else queueCards.delete(id);
}
function queueReset() {
  $("items").replaceChildren(); queueItems.clear(); queueAnchor = null;
  if (queueCurrent) queueClose();
  queueCards.clear();
  $("bulk-summary").replaceChildren();
  queueSelectionChanged();
}
function queueRowFor(item) {
  const question = queueQuestion(item);
  const tr = el("tr", { "data-request-id": item.requestId });
  const box = el("input", { type: "checkbox", class: "pick", "aria-label": "Select: " + question });
  box.addEventListener("click", (e) => queuePick(tr, e.shiftKey));
  const open = el("button", { type: "button", class: "open", text: question, title: question, on: { click: () => queueOpen(item.requestId, true) } });
  const session = sessionOf(item);
  tr.append(
    el("td", { class: "c-pick" }, box),
    el("td", { class: "c-status" }, el("span", { class: "dot", "aria-hidden": "true" }), el("span", { class: "state" })),
    el("td", { class: "c-q" }, open),
    el("td", { class: "c-kind", text: (item.request || { kind: "text" }).kind }),
    el("td", { class: "c-wf" }, item.workflow + " · " + item.node,
      session ? [" · ", el("a", { class: "session-link", href: "/ui/sessions/" + encodeURIComponent(session), text: "session" })] : null),
    el("td", { class: "c-aud", text: item.audience || "—" }),
    el("td", { class: "c-age" }), el("td", { class: "c-exp" }));
  tr.addEventListener("click", (e) => { if (!e.target.closest("a, input, button")) queueOpen(item.requestId, true); });
  queueFill(tr, item);
  return tr;
}
// The row's status (a colour and its word), age and time left, from the item and what the page did
function queueFill(tr, item) {
  const now = Date.now();
  const life = item.lifecycle;
  const ended = life && life.status !== "pending";
  const cardState = (queueCards.get(item.requestId) || {}).dataset;
  const local = cardState && cardState.state;
  let state = ended ? life.status : "pending";
  if (local === "answered" || local === "taken" || local === "sending") state = local;
  else if (!ended && item.expiresAt - now < Math.max(2 * 60 * 1000, (item.expiresAt - item.createdAt) / 5)) state = "due soon";  // its last fifth
  if (local) tr.dataset.state = local; else delete tr.dataset.state;
  tr.dataset.status = state.replace(" ", "-");
  tr.querySelector(".state").textContent = state;
  tr.querySelector(".c-age").textContent = span(now - item.createdAt);
  tr.querySelector(".c-exp").textContent = ended ? "—" : item.expiresAt > now ? span(item.expiresAt - now) : "now";
  tr.querySelector(".c-exp").title = ended ? "" : "expires " + utc(item.expiresAt);
  tr.querySelector(".c-age").title = "asked " + utc(item.createdAt);
  if (queueCards.has(item.requestId)) refreshTimes(queueCards.get(item.requestId), item);
}
function queueRefresh(requestId) {
  const tr = queueRow(requestId), item = queueItems.get(requestId);
  if (tr && item) queueFill(tr, item);
}

/* --- the side panel: the current interrupt's card -------------------------------------------- */
function queueCardOf(requestId) {
  let li = queueCards.get(requestId);
  if (!li) {
    li = card(queueItems.get(requestId));
    queueCards.set(requestId, li);
    // its row follows the card's state (answered from the panel: the row says so)
    new MutationObserver(() => queueRefresh(requestId)).observe(li, { attributes: true, attributeFilter: ["data-state"] });
  }
  return li;
}
function queueOpen(requestId, byHand) {
  if (!queueItems.has(requestId)) return;
  const before = queueRow(queueCurrent);
  if (before) { before.classList.remove("current"); before.removeAttribute("aria-current"); }
  queueCurrent = requestId;
  const tr = queueRow(requestId);
  tr.classList.add("current"); tr.setAttribute("aria-current", "true");
  $("panel-card").replaceChildren(queueCardOf(requestId));
  $("panel").hidden = false;
  $("list").classList.add("with-panel");
  tr.scrollIntoView({ block: "nearest" });
  if (byHand && window.matchMedia("(max-width: 899px)").matches) $("panel").scrollIntoView({ block: "start" });
}
function queueClose() {
  const tr = queueRow(queueCurrent);
  if (tr) { tr.classList.remove("current"); tr.removeAttribute("aria-current"); }
  $("panel").hidden = true; $("panel-card").replaceChildren();
  $("list").classList.remove("with-panel");
  if (tr) tr.querySelector("button.open").focus();
}
function queueMove(by) {
  const rows = queueRows();
  if (!rows.length) return;
  const at = rows.findIndex((tr) => tr.dataset.requestId === queueCurrent);
  const next = rows[at < 0 ? (by > 0 ? 0 : rows.length - 1) : Math.min(rows.length - 1, Math.max(0, at + by))];
  queueOpen(next.dataset.requestId, false);
  next.querySelector("button.open").focus();
}

/* --- keys: j/k move, a/r/1–9 answer, x selects, / searches, Escape closes -------------------- */
function queueTyping(target) {
  if (!(target instanceof HTMLElement)) return false;
  if (target.isContentEditable || target.tagName === "TEXTAREA" || target.tagName === "SELECT") return true;
  return target.tagName === "INPUT" && !["checkbox", "radio", "button", "submit"].includes(target.type);
}
function queueKey(e) {
  if ($("list").hidden || e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
  if (document.querySelector("dialog[open]")) return;
  const typing = queueTyping(e.target);
  if (e.key === "Escape") {
    if (typing) { e.target.blur(); const tr = queueRow(queueCurrent); if (tr) tr.querySelector("button.open").focus(); }
    else if (queueCurrent) queueClose();
    return;
  }
  if (typing) return;
  const key = e.key;
  if (key === "j" || key === "k") { e.preventDefault(); queueMove(key === "j" ? 1 : -1); }
  else if (key === "/") { e.preventDefault(); $("f-q").focus(); }
  else if (key === "x" && queueCurrent) { e.preventDefault(); const tr = queueRow(queueCurrent); tr.querySelector("input.pick").click(); }
  else if ((key === "a" || key === "r" || /^[1-9]$/.test(key)) && queueCurrent) { e.preventDefault(); if (!e.repeat) queueKeyAnswer(key); }
}
document.addEventListener("keydown", queueKey);

// a: the first option (approve); r: a reject-like option, else the second; 1–9: that option
const REJECT_LIKE = /^(no|reject|refuse|deny|decline|cancel|block|stop|keep)\b/i;
function queueOptionFor(options, key) {
  if (key === "a") return options[0];
  if (key === "r") return options.find((o) => REJECT_LIKE.test(o.id) || REJECT_LIKE.test(o.label)) || options[1];
  return options[Number(key) - 1];
}
async function queueKeyAnswer(key) {
  const requestId = queueCurrent;
  const item = queueItems.get(requestId);
  const options = ((item && item.request) || {}).options || [];
  const settled = (queueCards.get(requestId) || { dataset: {} }).dataset.state;
  if (!item || settled || (item.lifecycle && item.lifecycle.status !== "pending")) { say("This interrupt is not open here any more.", "bad"); return; }
  if (!options.length) {  // a picker, a text, a form: answered in its card
    say("This interrupt is answered in its form (in the panel).");
    const first = $("panel-card").querySelector("input, textarea, select, button");
    if (first) first.focus();
    return;
  }
  const option = queueOptionFor(options, key);
  if (!option) { say("This interrupt has no option " + key + ".", "bad"); return; }
  const result = await queueSend(item, option);
  say(queueQuestion(item) + ": " + result.text, result.recorded ? "good" : "bad");
  if (result.recorded && queueCurrent === requestId) queueMove(1);
}

// Answer one interrupt with one option, as its card would (the answer route, `selected`); the card
// (built if need be) then says how it went, and so does its row.
async function queueSend(item, option) {
  const li = queueCardOf(item.requestId);
  li.dataset.state = "sending";
  let r;
  try { r = await post("/v1/interrupts/" + encodeURIComponent(item.requestId) + "/answer", { selected: option.id, runId: item.runId }); }
  catch (_) { delete li.dataset.state; return { recorded: false, text: "not sent (the server did not answer)" }; }
  let text, state = null;
  if (r.status === 200) { state = "answered"; text = "answered “" + option.label + "” as " + (me ? me.name : "you"); }
  else if (r.status === 409) { state = "taken"; text = "refused: already answered"; }
  else if (r.status === 410) { state = "taken"; text = "refused: it expired"; }
  else if (r.status === 404) { state = "taken"; text = "refused: it is not there (any more) for this key"; }
  else text = "refused: " + problemText(r);
  if (state) {
    const outcome = el("p", { class: "outcome " + (state === "answered" ? "good" : "bad"), role: "status", text: text[0].toUpperCase() + text.slice(1) + "." });
    const area = li.querySelector(".answer");
    if (area) area.replaceWith(outcome); else li.append(outcome);
    li.dataset.state = state;
  } else delete li.dataset.state;
  queueRefresh(item.requestId);
  return { recorded: r.status === 200, text };
}

/* --- select several, answer alike ------------------------------------------------------------- */
function queueSelected() { return queueRows().filter((tr) => tr.querySelector("input.pick").checked); }
function queuePick(tr, range) {
  const rows = queueRows();
  const anchor = queueAnchor && rows.indexOf(queueAnchor) >= 0 ? queueAnchor : null;
  if (range && anchor && anchor !== tr) {  // shift-click: the rows between take this one's state
    const [from, to] = [rows.indexOf(anchor), rows.indexOf(tr)].sort((x, y) => x - y);
    const on = tr.querySelector("input.pick").checked;
    for (const row of rows.slice(from, to + 1)) row.querySelector("input.pick").checked = on;
  }
  queueAnchor = tr;
  queueSelectionChanged();
}
// The options the selected rows hold (the same id and label is the same option), with how many have it
function queueChoices(rows) {
  const found = new Map();
  for (const tr of rows) {
    const item = queueItems.get(tr.dataset.requestId);
    for (const o of ((item && item.request) || {}).options || []) {
      const key = o.id + "\u0000" + o.label;
      if (!found.has(key)) found.set(key, { option: o, have: 0 });
      found.get(key).have += 1;
    }
  }
  return found;
}
function queueSelectionChanged() {
  const rows = queueSelected();
  for (const tr of queueRows()) tr.classList.toggle("picked", tr.querySelector("input.pick").checked);
  const all = $("pick-all");
  all.checked = rows.length > 0 && rows.length === queueRows().length;
  all.indeterminate = rows.length > 0 && !all.checked;
  $("bulk").hidden = rows.length === 0;
  $("bulk-count").textContent = rows.length + " selected";
  const select = $("bulk-option");
  const was = select.value;
  select.replaceChildren(...Array.from(queueChoices(rows)).map(([key, c]) =>
    el("option", { value: key, text: c.option.label + " (" + c.have + " of " + rows.length + ")" })));
  if (Array.from(select.options).some((o) => o.value === was)) select.value = was;
  $("bulk-answer").disabled = !select.options.length;
}
async function queueBulk() {
  const rows = queueSelected();
  const choice = queueChoices(rows).get($("bulk-option").value);
  if (!choice) return;
  const option = choice.option;
  const recorded = [], refused = [];
  const sends = [];
  for (const tr of rows) {
    const item = queueItems.get(tr.dataset.requestId);
    const options = ((item && item.request) || {}).options || [];
    const settled = (queueCards.get(tr.dataset.requestId) || { dataset: {} }).dataset.state;
    if (!item || settled) refused.push([item, "not open here any more"]);
    else if (!options.some((o) => o.id === option.id && o.label === option.label)) refused.push([item, "it has no option “" + option.label + "”"]);
    else sends.push(item);
  }
  $("bulk-answer").disabled = true;
  const pool = sends.slice();
  await Promise.all([0, 1, 2, 3].map(async () => {  // four at a time
    for (let item = pool.shift(); item; item = pool.shift()) {
      const result = await queueSend(item, option);
      (result.recorded ? recorded : refused).push([item, result.text]);
      if (result.recorded) { const tr = queueRow(item.requestId); if (tr) tr.querySelector("input.pick").checked = false; }
    }
  }));
  const line = (pair) => el("li", {}, el("span", { text: queueQuestion(pair[0] || {}) }), " — " + pair[1]);
  $("bulk-summary").replaceChildren(
    el("p", { class: refused.length ? "bad" : "good", text: "“" + option.label + "”: recorded " + recorded.length + ", refused " + refused.length + "." }),
    recorded.length ? el("details", {}, el("summary", { text: "Recorded (" + recorded.length + ")" }), el("ul", {}, recorded.map(line))) : null,
    refused.length ? el("div", {}, el("p", { text: "Refused (" + refused.length + "):" }), el("ul", { class: "refused" }, refused.map(line))) : null);
  queueSelectionChanged();
}
function queueWire() {
  $("pick-all").addEventListener("change", () => {
    for (const tr of queueRows()) tr.querySelector("input.pick").checked = $("pick-all").checked;
    queueSelectionChanged();
  });
  $("bulk").addEventListener("submit", (e) => { e.preventDefault(); queueBulk(); });
  $("bulk-clear").addEventListener("click", () => { for (const tr of queueSelected()) tr.querySelector("input.pick").checked = false; queueSelectionChanged(); });
  $("panel-close").addEventListener("click", queueClose);
}
document.addEventListener("DOMContentLoaded", queueWire);

/* --- a run's page: children as a tree, time between events, confirm before fork and cancel ---- */
// Ask first, in a modal dialog (Escape or "Keep" says no); resolves true for yes.
function confirmFirst(title, text, yes) {
  const dialog = $("confirm");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-yes").textContent = yes;
  return new Promise((done) => {
    dialog.returnValue = "";
    dialog.addEventListener("close", () => done(dialog.returnValue === "yes"), { once: true });
    dialog.showModal();
    $("confirm-no").focus();  // the safe answer is the default one
  });
}
function confirmWire() {
  $("confirm-yes").addEventListener("click", () => $("confirm").close("yes"));
  $("confirm-no").addEventListener("click", () => $("confirm").close("no"));
}
document.addEventListener("DOMContentLoaded", confirmWire);

// the time since the event before, on each timeline line
function gapText(ms) {
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return span(ms);
}
function timelineGap(li, ts, previous) {
  if (previous == null) return;
  const gap = el("span", { class: "gap muted", title: "time since the event before", text: "+" + gapText(Math.max(0, ts - previous)) + " " });
  li.insertBefore(gap, li.children[1] || null);
}

// A run's children, from its own events (child.started, then child.completed or child.ended): each
// links to its page and opens, on demand, to its own children (read from its events the same way).
const runChildren = new Map();
function noteChild(found, type, data) {
  const id = data.childRunId;
  if (!id || !(type === "child.started" || type === "child.completed" || type === "child.ended")) return false;
  const known = found.get(id) || { runId: id, workflow: data.workflow, name: data.id, status: "started" };
  if (type !== "child.started") known.status = data.status || (type === "child.completed" ? "completed" : "ended");
  if (data.workflow) known.workflow = data.workflow;
  found.set(id, known);
  return true;
}
function childrenSeen(type, data) {
  if (!noteChild(runChildren, type, data)) return;
  const shown = new Map(Array.from($("run-children").querySelectorAll("li[data-child]")).map((li) => [li.dataset.child, li]));
  const top = $("run-children").querySelector(":scope > li > ul") || null;
  if (!top) {
    $("run-children").replaceChildren(el("li", { class: "root" }, el("span", { class: "tag", text: "this run" }), " " + runRoot(), el("ul", {})));
    $("run-children-box").hidden = false;
  }
  const list = $("run-children").querySelector(":scope > li > ul");
  for (const c of runChildren.values()) {
    const li = shown.get(c.runId);
    if (li) li.querySelector(":scope > .tag").textContent = c.status;  // (an opened branch stays open)
    else list.append(childLine(c));
  }
}
function childLine(c) {
  const li = el("li", { "data-child": c.runId },
    el("a", { href: "/ui/runs/" + encodeURIComponent(c.runId), text: (c.workflow || "child") + " · " + c.runId }),
    " ", el("span", { class: "tag", text: c.status }),
    c.name ? el("span", { class: "muted", text: " (as " + c.name + ") " }) : " ");
  const open = el("button", { type: "button", class: "expand", "aria-expanded": "false", text: "its children" });
  open.addEventListener("click", async () => {
    const below = li.querySelector(":scope > ul, :scope > p");
    if (below) { below.remove(); open.setAttribute("aria-expanded", "false"); return; }
    open.disabled = true;
    const kids = await childrenOf(c.runId);
    open.disabled = false;
    li.append(kids === null ? el("p", { class: "bad", text: "Its events cannot be read." })
      : kids.length ? el("ul", {}, kids.map(childLine)) : el("p", { class: "muted", text: "No children." }));
    open.setAttribute("aria-expanded", "true");
  });
  li.append(open);
  return li;
}
// A run's children as its event stream tells them: read from the start until it ends or goes quiet
// for half a second (what it has written so far has come by then), then closed.
async function childrenOf(runId) {
  const found = new Map();
  const stop = new AbortController();
  let idle = null;
  const quiet = () => { clearTimeout(idle); idle = setTimeout(() => stop.abort(), 500); };
  try {
    const r = await fetch("/v1/runs/" + encodeURIComponent(runId) + "/events?after=0", { headers: auth(), signal: stop.signal });
    if (!r.ok) return null;
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    quiet();
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      quiet();
      buffer += decoder.decode(chunk.value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end); buffer = buffer.slice(end + 2);
        const fields = {};
        for (const line of frame.split("\n")) {
          const at = line.indexOf(": ");
          if (!line.startsWith(":") && at > 0) fields[line.slice(0, at)] = line.slice(at + 2);
        }
        if (fields.event) noteChild(found, fields.event, JSON.parse(fields.data || "{}"));
        if (fields.event === "done") stop.abort();
      }
    }
  } catch (_) { /* closed by us: what came is what it has */ }
  clearTimeout(idle);
  return Array.from(found.values());
}
function runRoot() { const m = location.pathname.match(/^\/ui\/runs\/([^/]+)$/); return m ? decodeURIComponent(m[1]) : ""; }
