/**
 * The dashboard's one page: HTML with its CSS and script inline, shipped as a string (no build step
 * for the user, no request to anything but the server that serves it). Nothing from the database
 * is written into this HTML: the script fetches it as JSON and renders every value with
 * `textContent`, so a payload is text, never markup.
 */
import { PAGE_SCRIPT } from './page-script.js';
import { PAGE_STYLE } from './page-style.js';

/** Escapes text for HTML content and double-quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function renderPage(o: {
  title: string;
  basePath: string;
  refreshInterval: number;
  nonce: string;
}): string {
  const title = escapeHtml(o.title);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="outboxer-base" content="${escapeHtml(o.basePath)}">
<meta name="outboxer-refresh" content="${o.refreshInterval}">
<title>${title}</title>
<style nonce="${o.nonce}">${PAGE_STYLE}</style>
</head>
<body>
<header>
  <h1>${title}</h1>
  <label>Outbox <select id="outbox-select" aria-label="Outbox"></select></label>
  <span id="mode" class="badge"></span>
  <span id="status" role="status">Loading…</span>
</header>
<main>
  <section id="figures" aria-label="Counts"></section>
  <section class="panel">
    <h2>Backlog and throughput, last minutes</h2>
    <div id="chart"></div>
  </section>
  <div class="columns">
    <section class="panel">
      <h2>Partitions</h2>
      <table id="partitions"><thead><tr><th>#</th><th>Lease holder</th><th>Epoch</th><th>Lease until</th><th>Backlog</th></tr></thead><tbody></tbody></table>
    </section>
    <section class="panel">
      <h2>Relaying nodes</h2>
      <table id="nodes"><thead><tr><th>Node</th><th>Last seen</th><th>State</th><th>Partitions</th></tr></thead><tbody></tbody></table>
    </section>
  </div>
  <section class="panel">
    <h2>Blocked groups</h2>
    <input id="blocked-search" type="search" placeholder="Group key starts with…" aria-label="Search blocked groups by group-key prefix">
    <span id="blocked-note" class="note"></span>
    <table id="blocked"><thead><tr><th>Group key</th><th>Head</th><th>State</th><th>Since</th><th>Attempts</th><th>Last error</th><th></th></tr></thead><tbody></tbody></table>
  </section>
  <section class="panel">
    <h2>Messages</h2>
    <div class="toolbar">
      <select id="message-status" aria-label="Status"><option value="dead">Dead</option><option value="pending">Pending</option></select>
      <input id="filter-group" placeholder="Group key (exact)" aria-label="Group key">
      <input id="filter-type" placeholder="Type (exact)" aria-label="Type">
      <input id="filter-error" placeholder="Error contains" aria-label="Error contains">
      <button id="apply-filters" type="button">Filter</button>
      <input id="find-id" type="search" inputmode="numeric" placeholder="Message id" aria-label="Open a message by its id" size="10">
      <button id="open-id" type="button">Open</button>
      <span class="spacer"></span>
      <button id="retry-group" type="button" class="change" hidden>Retry all of the group</button>
      <button id="retry-selected" type="button" class="change">Retry selected</button>
      <button id="discard-selected" type="button" class="change danger">Discard selected…</button>
    </div>
    <table id="messages"><thead><tr><th><input type="checkbox" id="select-all" aria-label="Select all"></th><th>Id</th><th>Group key</th><th>Type</th><th>State</th><th>Attempts</th><th>Last error</th><th>Published</th></tr></thead><tbody></tbody></table>
    <button id="more" type="button" hidden>Load more</button>
  </section>
</main>
<aside id="detail" hidden aria-label="Message detail">
  <div class="detail-head"><h2 id="detail-title"></h2><button id="detail-close" type="button" aria-label="Close">×</button></div>
  <dl id="detail-fields"></dl>
  <h3>Payload</h3><pre id="detail-payload"></pre>
  <h3>Headers</h3><pre id="detail-headers"></pre>
  <h3>Last error</h3><pre id="detail-error"></pre>
  <div class="toolbar"><button id="detail-retry" type="button" class="change">Retry</button><button id="detail-discard" type="button" class="change danger">Discard…</button></div>
</aside>
<div id="confirm" hidden role="dialog" aria-modal="true" aria-labelledby="confirm-title">
  <div class="box"><h2 id="confirm-title"></h2><p id="confirm-text"></p><ul id="confirm-list"></ul>
  <div class="toolbar"><button id="confirm-cancel" type="button">Cancel</button><button id="confirm-ok" type="button" class="danger"></button></div></div>
</div>
<script nonce="${o.nonce}">${PAGE_SCRIPT}</script>
</body>
</html>
`;
}
