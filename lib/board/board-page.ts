import { createHash } from 'node:crypto';
import { BOARD_SCRIPT } from './board-page-script';
import { BOARD_STYLE } from './board-page-style';

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/** CSP: only the page's own inline style and script (hashes of the served strings), same origin. */
const BOARD_CSP = [
  "default-src 'none'",
  `script-src ${sha256(BOARD_SCRIPT)}`,
  `style-src ${sha256(BOARD_STYLE)}`,
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers of the page: its CSP, and no sniffing, caching or referrer. */
export const BOARD_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy': BOARD_CSP,
  'X-Content-Type-Options': 'nosniff',
  'Cache-Control': 'no-store',
  'Referrer-Policy': 'no-referrer',
};

/** The page holds no data; its script finds the API relative to its own path, under any prefix. */
export function boardPage(allowRelease: boolean): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Locks</title>
<style>${BOARD_STYLE}</style>
</head>
<body data-allow-release="${allowRelease ? 'true' : 'false'}">
<header><h1>Locks</h1><span id="live" class="live off">connecting</span></header>
<form id="filter" role="search">
<label for="prefix">Key prefix</label>
<input id="prefix" type="search" autocomplete="off" spellcheck="false">
<button type="submit">Filter</button>
<label class="free-toggle"><input id="show-free" type="checkbox"> show free keys</label>
</form>
<p id="summary"></p>
<p id="status" role="status"></p>
<table>
<thead><tr><th>Key</th><th>Mode</th><th>Holders (id, fence, lease, scope)</th><th>Waiting</th><th></th></tr></thead>
<tbody id="rows"></tbody>
</table>
<nav><button id="first" type="button">First page</button><button id="next" type="button">Next page</button></nav>
<script>${BOARD_SCRIPT}</script>
</body>
</html>
`;
}
