/** The page's CSS: system fonts, no image, no request. */
export const PAGE_STYLE = `
:root { --fg: #1d2330; --muted: #5f6b7a; --line: #dde2e8; --bg: #f6f7f9; --card: #fff; --accent: #2f6fdb; --bad: #c23b32; --warn: #b7791f; --ok: #2f855a; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 16px; align-items: center; padding: 10px 20px; background: #1d2330; color: #fff; flex-wrap: wrap; }
header h1 { font-size: 18px; margin: 0; }
header select { margin-left: 6px; }
#status { margin-left: auto; font-size: 12px; opacity: .8; }
#status.error { color: #ffb4ad; opacity: 1; }
.badge { font-size: 12px; padding: 2px 8px; border-radius: 10px; background: #44506a; }
.badge.on { background: var(--warn); }
main { padding: 16px 20px; display: grid; gap: 16px; }
#figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(140px, 1fr)); gap: 10px; }
.figure { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
.figure .label { color: var(--muted); font-size: 12px; }
.figure .value { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.figure.bad .value { color: var(--bad); }
.figure.warn .value { color: var(--warn); }
.panel { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 12px; overflow-x: auto; }
.panel h2 { font-size: 14px; margin: 0 0 8px; }
.columns { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
@media (max-width: 900px) { .columns { grid-template-columns: 1fr; } }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 500; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.error { max-width: 360px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; color: var(--bad); }
tbody tr.clickable { cursor: pointer; }
tbody tr.clickable:hover { background: #eef3fb; }
.state-dead, .state-parked { color: var(--bad); }
.state-retrying { color: var(--warn); }
.state-live { color: var(--ok); }
.note { color: var(--muted); font-size: 12px; margin-left: 8px; }
.toolbar { display: flex; gap: 8px; align-items: center; margin-bottom: 8px; flex-wrap: wrap; }
.spacer { flex: 1; }
input, select, button { font: inherit; padding: 4px 8px; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
button { cursor: pointer; }
button.change { border-color: var(--accent); color: var(--accent); }
button.danger { border-color: var(--bad); color: var(--bad); }
button:disabled { opacity: .5; cursor: default; }
.readonly .change { display: none; }
#chart svg { width: 100%; height: 180px; display: block; }
#chart .legend { font-size: 12px; color: var(--muted); }
#detail { position: fixed; top: 0; right: 0; bottom: 0; width: min(560px, 100%); background: #fff; border-left: 1px solid var(--line); box-shadow: -4px 0 16px rgba(0,0,0,.08); padding: 14px; overflow-y: auto; }
.detail-head { display: flex; justify-content: space-between; align-items: center; }
#detail dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; font-size: 13px; }
#detail dt { color: var(--muted); }
#detail dd { margin: 0; word-break: break-all; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 4px; padding: 8px; white-space: pre-wrap; word-break: break-all; max-height: 320px; overflow: auto; font-size: 12px; }
#confirm { position: fixed; inset: 0; background: rgba(20,24,32,.45); display: flex; align-items: center; justify-content: center; }
#confirm[hidden], #detail[hidden] { display: none; }
#confirm .box { background: #fff; border-radius: 6px; padding: 16px 20px; width: min(520px, 92%); }
#confirm ul { max-height: 200px; overflow: auto; font-size: 13px; }
`;
