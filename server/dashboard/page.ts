// The dashboard page: one HTML document with its style and script inline, so
// it needs nothing but the router that serves it.
import { dashboardClient } from './client.js';

const STYLE = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2330; }
header { display: flex; gap: 1rem; align-items: center; padding: .6rem 1rem; background: #1d2330; color: #fff; flex-wrap: wrap; }
header h1 { font-size: 1.1rem; margin: 0; }
main { padding: 0 1rem 2rem; }
h2 { font-size: 1rem; margin: 1rem 0 .4rem; } h2 small { font-weight: normal; color: #5b6475; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: .6rem; }
.card { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; padding: .5rem; min-width: 0; }
svg.chart { display: block; overflow: hidden; }
svg .title { font-weight: 600; font-size: 12px; } svg .label, svg .value, svg .axis, svg .legend { font-size: 11px; fill: #3b4252; }
svg .bar { fill: #4c7dd9; } svg .axis-line { stroke: #aab; }
svg .line { fill: none; stroke-width: 1.5; } svg .line.s1 { stroke: #4c7dd9; } svg .line.s2 { stroke: #d9822b; }
svg .legend.s1 { fill: #4c7dd9; } svg .legend.s2 { fill: #d9822b; }
.pill { padding: .1rem .5rem; border-radius: 1rem; background: #3b4252; font-size: 12px; }
.pill.mismatch { background: #b3261e; } .pill.silent { background: #a15c00; } .pill.stale { background: #6b5a00; } .pill.ok { background: #2e7d32; }
table { width: 100%; border-collapse: collapse; background: #fff; font-size: 13px; }
td, th { border-bottom: 1px solid #e4e7ec; padding: .3rem .4rem; text-align: left; vertical-align: top; }
tr.mismatch .verdict { color: #b3261e; font-weight: 700; } tr.silent .verdict { color: #a15c00; font-weight: 700; }
tr.stale .verdict { color: #6b5a00; font-weight: 700; } tr.ok .verdict { color: #2e7d32; }
.fix { color: #5b6475; font-size: 12px; } .error { color: #b3261e; }
textarea { width: 100%; min-height: 5rem; box-sizing: border-box; font: 13px monospace; }
#status { margin-left: auto; font-size: 12px; opacity: .8; }
`;

const BODY = `
<header><h1>kvrouter</h1><span id="summary"></span><span id="status">loading…</span></header>
<main>
<form id="auth" hidden><p>This router has an admin token: <input id="token" type="password" autocomplete="off"> <button>use</button></p></form>
<div id="models"></div>
<h2>Recent minutes</h2><div id="trends" class="grid"></div>
<h2>Diagnostics (worst first)</h2>
<table><thead><tr><th>worker</th><th>verdict</th><th>causes and fixes</th><th>stored/removed/cleared</th><th>last event</th><th>stream</th><th>blocks</th></tr></thead><tbody id="diagnostics"></tbody></table>
<h2>Explain a prompt</h2>
<form id="explain-form"><textarea id="prompt" placeholder="paste a prompt (sent as one user message)"></textarea>
<p>model <select id="model"></select> <button id="explain-button">explain</button></p></form>
<div id="explain-out"></div>
</main>`;

export function dashboardPage(options: { tokenRequired: boolean }): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>kvrouter dashboard</title><style>${STYLE}</style></head>
<body data-token-required="${options.tokenRequired}">${BODY}
<script>(${dashboardClient.toString()})();</script>
</body></html>`;
}
