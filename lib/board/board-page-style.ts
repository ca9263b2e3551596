/** The board page's stylesheet, inline (its hash is in the page's CSP: change it freely). */
export const BOARD_STYLE = `
:root { color-scheme: light dark; --line: #8884; --muted: #777; --accent: #2563eb; --bad: #c0392b; }
* { box-sizing: border-box; }
body { margin: 0; padding: 1.25rem 1.5rem; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
header { display: flex; align-items: baseline; gap: 1rem; }
h1 { margin: 0 0 .75rem; font-size: 1.35rem; }
.live { font-size: .8rem; padding: .1rem .5rem; border-radius: 1rem; border: 1px solid var(--line); }
.live.on { color: #15803d; border-color: #15803d; }
.live.off { color: var(--muted); }
form { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem; margin-bottom: .5rem; }
input[type=search] { min-width: 18rem; padding: .3rem .5rem; font: inherit; }
button { font: inherit; padding: .25rem .7rem; cursor: pointer; }
button:disabled { cursor: default; opacity: .5; }
.free-toggle { color: var(--muted); }
#summary { color: var(--muted); margin: .25rem 0; }
#status { min-height: 1.4em; margin: .25rem 0 .5rem; }
#status.error { color: var(--bad); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: .4rem .6rem; border-bottom: 1px solid var(--line); }
th { font-weight: 600; font-size: .85rem; color: var(--muted); }
td.key code { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; word-break: break-all; white-space: pre-wrap; }
.leader { display: inline-block; font-weight: 600; color: var(--accent); }
.raw { display: block; color: var(--muted); }
tr.free td { color: var(--muted); }
.holder { display: flex; flex-wrap: wrap; gap: .75rem; }
.holder-id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
.fence, .lease, .scope, .weight { color: var(--muted); }
button.release.armed { color: #fff; background: var(--bad); border-color: var(--bad); }
nav { display: flex; gap: .5rem; margin-top: .75rem; }
`;
