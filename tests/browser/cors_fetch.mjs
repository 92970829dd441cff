// Fetches from `symdex serve` as a web page on another origin would, in Debian's headless
// Chromium (playwright-core, no browser download), for tests/serve_cors.rs:
// `node cors_fetch.mjs SPEC.json` opens SPEC.page (a page served from another loopback port),
// runs each of SPEC.fetches with the page's own fetch() — the browser's CORS checks and all —
// and prints one JSON array: for each fetch, what the page could read, or the error fetch()
// rejected with. The Rust test asserts on it.
import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const context = await chromium.launchPersistentContext(spec.userDataDir, {
  executablePath: spec.chromium,
  headless: true,
  args: FLAGS,
});
const page = context.pages()[0] || await context.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(String(e)));
await page.goto(spec.page);

const results = [];
for (const f of spec.fetches) {
  results.push(await page.evaluate(async ({ url, method, headers }) => {
    try {
      const r = await fetch(url, { method, headers, cache: 'no-store' });
      const body = new Uint8Array(await r.arrayBuffer());
      let sum = 0;
      for (const b of body) sum = (sum * 31 + b) >>> 0;
      return {
        ok: true,
        origin: location.origin,
        status: r.status,
        size: r.headers.get('x-debuginfod-size'),
        file: r.headers.get('x-debuginfod-file'),
        encoding: r.headers.get('content-encoding'),
        length: body.length,
        sum,
      };
    } catch (e) {
      return { ok: false, origin: location.origin, error: String(e) };
    }
  }, { url: f.url, method: f.method || 'GET', headers: f.headers || {} }));
}
await context.close();
process.stdout.write(JSON.stringify({ results, errors }));
