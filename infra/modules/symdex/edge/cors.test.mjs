// node --test: CORS at the edge (the module's `cors`, `cors_origins`). With it on, a browser
// page on another origin can fetch symbols and read debuginfod's headers: the access function
// answers the preflight (no credentials needed: browsers send none in one), everything else
// keeps its access control, and every answer names the allowed origin and the headers a page
// may read. Off (the default), nothing changes: an OPTIONS is a request like any other (and
// CloudFront refuses the method: the plan test shows the behaviours allow GET and HEAD only).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { behaviour, bucket, event, load, loadResponse } from './harness.mjs';

const KEY = '/buildid/ab12/debuginfo';
const PAGE = 'https://profiler.example';
const EXPOSE = 'X-Debuginfod-Size, X-Debuginfod-File, X-Debuginfod-Archive, Content-Encoding';
const preflight = (origin = PAGE) => ({
    origin: { value: origin },
    'access-control-request-method': { value: 'GET' },
    'access-control-request-headers': { value: 'authorization, range' },
});
const reader = { authorization: { value: 'Bearer tok' } };
const closed = (cors) => load({ auth: true, kvsId: 'kvs-1', allowCidrs: ['10.0.0.0/8'], cors }, ['tok']);

test('a preflight is answered 204 without credentials, with the methods and headers', async () => {
    const handler = closed({ origins: ['*'] });
    const out = await handler(event(KEY, '10.1.2.3', preflight(), 'OPTIONS'));
    assert.equal(out.statusCode, 204);
    const h = Object.fromEntries(Object.entries(out.headers).map(([k, v]) => [k, v.value]));
    assert.deepEqual(h, {
        'access-control-allow-origin': '*',
        'access-control-allow-methods': 'GET, HEAD, OPTIONS',
        'access-control-allow-headers': 'Authorization, Range, X-DEBUGINFOD-MAXSIZE',
        'access-control-expose-headers': EXPOSE,
        'access-control-max-age': '86400',
    });
    // The allow-list is no credential: a viewer outside it is refused its preflight too.
    assert.equal((await handler(event(KEY, '198.51.100.7', preflight(), 'OPTIONS'))).statusCode, 403);
});

test('everything but the preflight keeps its access control, and says so readably', async () => {
    const handler = closed({ origins: ['*'] });
    const refused = await handler(event(KEY, '10.1.2.3', { origin: { value: PAGE } }));
    assert.equal(refused.statusCode, 401);
    // The page can read the 401 (and ask for credentials) instead of a network error.
    assert.equal(refused.headers['access-control-allow-origin'].value, '*');
    assert.match(refused.headers['www-authenticate'].value, /^Basic /);
    const out = await handler(event(KEY, '10.1.2.3', { origin: { value: PAGE }, ...reader }));
    assert.equal(out.uri, KEY);
    assert.equal(out.headers.authorization, undefined);
});

test('the origin\'s answers name the allowed origin and the headers a page may read', async () => {
    const cdn = behaviour({
        access: closed({ origins: ['*'] }),
        respond: loadResponse({ cors: { origins: ['*'] }, maxAge: 86400, redirects: true, vary: false }),
        origins: {
            serving: {
                path: '',
                fetch: bucket({
                    'buildid/ab12/debuginfo': {
                        body: 'ELF...',
                        headers: { 'x-amz-meta-debuginfod-size': { value: '6' } },
                    },
                    'symbols/a.pdb/ID/a.pdb': {
                        body: '',
                        headers: { 'x-amz-website-redirect-location': { value: '/index2/a.pdb/ID/a.pdb' } },
                    },
                }),
            },
        },
    });
    const headers = { origin: { value: PAGE }, ...reader };
    for (const from of ['origin', 'cache']) {
        const out = await cdn.request(KEY, { ip: '10.1.2.3', headers });
        assert.deepEqual([out.status, out.from], [200, from]);
        assert.equal(out.headers['access-control-allow-origin'].value, '*');
        assert.equal(out.headers['access-control-expose-headers'].value, EXPOSE);
        assert.equal(out.headers['x-debuginfod-size'].value, '6');
        assert.equal(out.headers.vary, undefined, 'the same answer for every origin');
    }
    // A browser follows an alias's redirect only if it may read it.
    const alias = await cdn.request('/symbols/a.pdb/ID/a.pdb', { ip: '10.1.2.3', headers });
    assert.equal(alias.status, 301);
    assert.equal(alias.headers['access-control-allow-origin'].value, '*');
});

test('a list of origins: the viewer\'s own named when listed, none otherwise, Vary: Origin', async () => {
    const cors = { origins: ['https://profiler.example', 'http://localhost:8080'] };
    const handler = closed(cors);
    const ok = await handler(event(KEY, '10.1.2.3', preflight('http://localhost:8080'), 'OPTIONS'));
    assert.equal(ok.statusCode, 204);
    assert.equal(ok.headers['access-control-allow-origin'].value, 'http://localhost:8080');
    assert.equal(ok.headers.vary.value, 'Origin');
    for (const origin of ['https://evil.example', 'https://profiler.example.evil', 'null']) {
        const out = await handler(event(KEY, '10.1.2.3', preflight(origin), 'OPTIONS'));
        assert.equal(out.statusCode, 403, origin);
        assert.equal(out.headers['access-control-allow-origin'], undefined, origin);
    }
    const respond = loadResponse({ cors, maxAge: 86400, redirects: true, vary: true });
    const answer = (origin) => respond({
        request: { method: 'GET', uri: KEY, headers: origin ? { origin: { value: origin } } : {}, querystring: {}, cookies: {} },
        response: { statusCode: 200, headers: {}, cookies: {} },
    });
    assert.equal(answer(PAGE).headers['access-control-allow-origin'].value, PAGE);
    assert.equal(answer(PAGE).headers.vary.value, 'Accept-Encoding, Origin');
    assert.equal(answer('https://evil.example').headers['access-control-allow-origin'], undefined);
    // Without an Origin (a debugger), the answer still says it depends on one, so that a
    // browser's cache does not hand it to a page.
    assert.equal(answer(null).headers.vary.value, 'Accept-Encoding, Origin');
});

test('cors off: OPTIONS gets no preflight answer, access control as before, no CORS headers', async () => {
    const handler = closed(null);
    const out = await handler(event(KEY, '10.1.2.3', preflight(), 'OPTIONS'));
    assert.equal(out.statusCode, 401);
    assert.equal(out.headers['access-control-allow-origin'], undefined);
    const open = load({ foldPrefixes: [] });
    const passed = await open(event(KEY, '203.0.113.9', preflight(), 'OPTIONS'));
    assert.equal(passed.uri, KEY, 'passed on as any request (CloudFront allows no OPTIONS then)');
    const respond = loadResponse({ cors: null, maxAge: 86400, redirects: true, vary: false });
    const answer = respond({
        request: { method: 'GET', uri: KEY, headers: { origin: { value: PAGE } }, querystring: {}, cookies: {} },
        response: { statusCode: 200, headers: {}, cookies: {} },
    });
    assert.equal(answer.headers['access-control-allow-origin'], undefined);
});
