// The page: posts a claim to /v1/verify and shows the verdict with the evidence it read; or
// posts a text and its source to /v1/entail and marks each sentence, with the source's span
// that decided it.
"use strict";

const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("feverous-es-token") || "";

function fold(word) {
  return word.normalize("NFD").replace(/\p{M}/gu, "").toLowerCase();
}

// Text as DOM nodes, the claim's words wrapped in <mark> (whole words, case and accents aside).
function highlighted(text, words) {
  const fragment = document.createDocumentFragment();
  let last = 0;
  for (const match of text.matchAll(/[\p{L}\p{N}]+/gu)) {
    if (!words.has(fold(match[0]))) continue;
    fragment.append(text.slice(last, match.index));
    const mark = document.createElement("mark");
    mark.textContent = match[0];
    fragment.append(mark);
    last = match.index + match[0].length;
  }
  fragment.append(text.slice(last));
  return fragment;
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  node.append(...children);
  return node;
}

function pageLink(page, localId) {
  const href = "https://en.wikipedia.org/wiki/" + encodeURIComponent(page.replaceAll(" ", "_"));
  return element("a", { href, title: `${page}: ${localId}` }, page);
}

function localId(item) {
  return item.id.slice(item.page.length + 1);
}

// The entailment model's reading of one sentence on its own: its likeliest label.
function scoreText(scores) {
  if (!scores) return "";
  const [label, p] = Object.entries(scores).sort((a, b) => b[1] - a[1])[0];
  return ` · on its own: ${label} ${(100 * p).toFixed(0)} %`;
}

function sentence(item, words, scores) {
  return element("div", { class: "evidence", id: "el-" + item.id, "data-type": item.type },
    element("div", { class: "meta" }, pageLink(item.page, localId(item)),
      ` · ${localId(item)} · hop ${item.hop}`, element("span", { class: "score" }, scoreText(scores))),
    element("div", { class: "text" }, highlighted(item.text, words)));
}

function readTable(read, words, evidence) {
  const matched = new Set(read.matched.map(([row, column]) => `${row}:${column}`));
  const hops = [...new Set(evidence.map((e) => e.hop))].join(", ") || "–";
  const caption = element("caption", {}, pageLink(read.page, `table_${read.table}`),
    `, table ${read.table}` + (read.caption ? `: ${read.caption}` : "") + ` · hop ${hops}`);
  const width = Math.max(read.header.length, ...read.rows.map((r) => r.length));
  const head = element("tr", {}, element("th", { scope: "col" }, "row"));
  for (let c = 0; c < width; c++) head.append(element("th", { scope: "col" }, read.header[c] || ""));
  const body = element("tbody");
  read.rows.forEach((row, i) => {
    const tr = element("tr", {}, element("th", { scope: "row" }, String(read.row_numbers[i] + 1)));
    row.forEach((cell, c) => {
      const hit = matched.has(`${i}:${c}`);
      tr.append(element("td", hit ? { class: "matched" } : {}, hit ? highlighted(cell, words) : cell));
    });
    body.append(tr);
  });
  return element("div", { class: "table-wrap evidence", "data-type": "table" },
    element("table", {}, caption, element("thead", {}, head), body));
}

function show(result) {
  const words = new Set(result.decided.words.map(fold));
  const label = $("label");
  label.textContent = result.label;
  label.className = "label " + result.label.replaceAll(" ", "-");
  $("probability").textContent = `${(100 * result.probability).toFixed(1)} %`;
  // The other labels' probabilities (the label's own is the figure beside it).
  $("probabilities").replaceChildren(...Object.entries(result.probabilities)
    .filter(([name]) => name !== result.label)
    .map(([name, p]) => element("span", {}, `${name}: ${(100 * p).toFixed(1)} %`)));
  // Why the evidence does not decide the claim (NOT ENOUGH INFO only).
  $("why").textContent = result.why ? `Why: ${result.why}.` : "";
  $("why").hidden = !result.why;
  const byId = new Map(result.evidence.map((e) => [e.id, e]));
  const read = result.decided.evidence.map((id) => byId.get(id)).filter(Boolean);
  const decided = $("decided");
  decided.replaceChildren();
  if (result.decided.table) {
    decided.append(readTable(result.decided.table, words, read));
  } else {
    const scores = result.decided.scores || {};
    decided.append(...read.map((item) => sentence(item, words, scores[item.id])));
  }
  if (!decided.children.length) decided.append(element("p", {}, "No evidence was found for this claim."));
  $("evidence-count").textContent = String(result.evidence.length);
  $("evidence-list").replaceChildren(...result.evidence.map((item) => element("li", {},
    pageLink(item.page, localId(item)), ` (${item.type}, hop ${item.hop}): `,
    highlighted(item.text, words))));
  $("result").hidden = false;
}

// Sends a request, asking for the server's token once if it needs one; the answer's JSON, or
// an Error with the server's one-line message.
async function api(path, payload) {
  let response = await post(path, payload);
  if (response.status === 401) {
    token = window.prompt("This server needs its access token:") || "";
    sessionStorage.setItem("feverous-es-token", token);
    response = await post(path, payload);
  }
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function post(path, payload) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  return fetch(path, { method: "POST", headers, body: JSON.stringify(payload) });
}

// Runs a form's request with its button disabled and its status line kept up to date.
async function submitting(button, status, work) {
  button.disabled = true;
  status.className = "";
  status.textContent = "Checking…";
  try {
    await work();
    status.textContent = "";
  } catch (error) {
    status.textContent = "Error: " + error.message;
    status.className = "error";
  } finally {
    button.disabled = false;
  }
}

function check(event) {
  event.preventDefault();
  const claim = $("claim").value.trim();
  if (!claim) {
    $("status").textContent = "Type a claim first.";
    $("status").className = "error";
    return;
  }
  submitting($("check"), $("status"),
    async () => show(await api("/v1/verify", { claim, evidence_scores: true })));
}

// The source's documents: its parts between lines holding only "---", each read on its own
// (no window crosses two), trimmed as the server trims them, with where each starts.
function documentsOf(source) {
  const parts = [];
  let at = 0;
  const add = (end) => {
    const part = source.slice(at, end);
    const text = part.trim();
    if (text) parts.push({ start: at + part.length - part.trimStart().length, text });
  };
  for (const line of source.matchAll(/^---[ \t]*$/gm)) {
    add(line.index);
    at = line.index + line[0].length;
  }
  add(source.length);
  return parts;
}

// The UTF-16 length (a JavaScript string's) of the first `points` code points of `text`: the
// service counts code points, and an emoji is one of them but two of a string's units.
const units = (text, points) => Array.from(text).slice(0, points).join("").length;

// The source with one span marked: the window that decided the selected sentence (its offsets
// are in `document`, the text sent, which starts at `document.start` in the source).
function showSpan(source, window, document) {
  const start = document.start + units(document.text, window.start);
  const end = document.start + units(document.text, window.end);
  const mark = element("mark", { id: "decided-span" }, source.slice(start, end));
  $("source-view").replaceChildren(source.slice(0, start), mark, source.slice(end));
  mark.scrollIntoView({ block: "nearest" });
}

function showText(result, source, documents) {
  const documentOf = (answer) => documents[answer.document ?? 0];
  const { supported, sentences } = result.summary;
  $("summary").textContent = `${supported} of ${sentences} sentences supported by the source`;
  const items = result.sentences.map((answer, i) => {
    const verdict = answer.supported ? "supported" : "not-supported";
    const item = element("li", { class: "sentence " + verdict, tabindex: "0", "data-index": String(i) },
      element("span", { class: "label " + answer.label.replaceAll(" ", "-") }, answer.label),
      ` ${(100 * answer.probabilities.SUPPORTS).toFixed(0)} % `,
      element("span", { class: "claim-text" }, answer.claim));
    const select = () => {
      for (const other of $("sentences").children) other.removeAttribute("aria-current");
      item.setAttribute("aria-current", "true");
      showSpan(source, answer.window, documentOf(answer));
    };
    item.addEventListener("click", select);
    item.addEventListener("focus", select);
    return item;
  });
  $("sentences").replaceChildren(...items);
  $("text-result").hidden = false;
  if (items.length) {
    items[0].setAttribute("aria-current", "true");
    showSpan(source, result.sentences[0].window, documentOf(result.sentences[0]));
  }
}

function checkText(event) {
  event.preventDefault();
  const source = $("source").value.trim();
  const text = $("text").value.trim();
  if (!source || !text) {
    $("text-status").textContent = source ? "Type the text to check first." : "Paste the source first.";
    $("text-status").className = "error";
    return;
  }
  const documents = documentsOf(source);
  const body = { text, evidence: documents.map((d) => d.text), documents: documents.length > 1 };
  submitting($("check-text"), $("text-status"),
    async () => showText(await api("/v1/entail", body), source, documents));
}

// The two views, one shown at a time, chosen by the address's #fragment.
function route() {
  const text = location.hash === "#text-view";
  $("claim-view").hidden = text;
  $("text-view").hidden = !text;
  $("to-claim").toggleAttribute("aria-current", !text);
  $("to-text").toggleAttribute("aria-current", text);
}

for (const [form, box] of [["claim-form", "claim"], ["text-form", "text"], ["text-form", "source"]]) {
  $(box).addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $(form).requestSubmit();
  });
}
$("claim-form").addEventListener("submit", check);
$("text-form").addEventListener("submit", checkText);
window.addEventListener("hashchange", route);
route();
