// Drives the audit page in Debian's headless Chromium (playwright-core, no browser download)
// for tests/audit_page.rs: `node audit_page.mjs SPEC.json` opens SPEC.page from disk, runs
// each probe (a view by its URL fragment, a search typed into the page), and prints what it
// saw as one JSON object: the Rust test asserts on it. Every request that is not for a
// file: URL is refused and reported, as are dialogs and script errors.
import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const spec = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const context = await chromium.launchPersistentContext(spec.userDataDir, {
  executablePath: spec.chromium,
  headless: true,
  args: FLAGS,
  viewport: { width: 1280, height: 900 },
});
const seen = { refused: [], requests: [], dialogs: [], errors: [], probes: {} };
await context.route('**/*', (route) => {
  const url = route.request().url();
  if (url.startsWith('file:')) return route.continue();
  seen.refused.push(url);
  return route.abort();
});
const page = context.pages()[0] || await context.newPage();
page.on('request', (r) => seen.requests.push(r.url()));
page.on('dialog', async (d) => { seen.dialogs.push(d.message()); await d.dismiss(); });
page.on('pageerror', (e) => seen.errors.push(String(e)));

const url = 'file://' + spec.page;
const ready = () => page.waitForSelector('body[data-ready="1"]', { timeout: spec.timeoutMs });

// What a probe reads off the page once it has drawn.
async function collect() {
  return page.evaluate(() => {
    const text = (sel) => { const e = document.querySelector(sel); return e ? e.innerText : null; };
    const count = document.querySelector('#count');
    return {
      count: count ? Number(count.dataset.count) : null,
      rows: [...document.querySelectorAll('#rows tbody tr')].map((tr) => [...tr.cells].map((c) => c.innerText)),
      detail: text('#detail'),
      main: document.querySelector('main').innerText.slice(0, 20000),
      source: text('#source'),
      scripts: document.querySelectorAll('script').length,
    };
  });
}

for (const probe of spec.probes) {
  const started = Date.now();
  if (probe.load) {
    await page.goto(url + (probe.hash ? '#' + probe.hash : ''));
  } else if (probe.search !== undefined) {
    await page.evaluate(() => { document.body.dataset.ready = '0'; });
    await page.fill('#search', probe.search);
  } else {
    await page.evaluate((h) => { document.body.dataset.ready = '0'; location.hash = h; }, probe.hash);
  }
  await ready();
  const ms = Date.now() - started;
  const result = Object.assign({ ms }, await collect());
  if (probe.screenshot) await page.screenshot({ path: probe.screenshot, fullPage: probe.fullPage !== false });
  seen.probes[probe.name] = result;
}
await context.close();
process.stdout.write(JSON.stringify(seen));
