// node --test: access control in front of upstream answers. A prefix in the module's
// `upstreams` is a cache behaviour whose origin group asks the serving bucket first and the
// upstream symbol server on 403/404 (cdn.tf); the access function is on that behaviour's
// viewer-request, as on every other (the Terraform plan test checks the association). This
// models what CloudFront does with such a request, and shows that a private deployment proxies
// upstream symbols for its readers only, never hands a reader's credentials to the upstream,
// and keeps a cached upstream answer as private as the first fetch of it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { event, load, loadResponse } from './harness.mjs';

// One edge location: the viewer-request function (on cache hits too), the cache (keyed by the
// URI the function hands on: the managed CachingOptimized policy keys on nothing else), then
// the origin group. Viewer headers are handed to the origins as the function left them, which
// is more than CloudFront forwards under that policy (none): what the upstream cannot see
// here, it cannot see behind CloudFront either. With `respond`, the behaviour's
// viewer-response function runs on every answer, cached ones too, and is told nothing of which
// origin answered (as in CloudFront).
function edge(handler, { bucket, upstreamPath, upstream, respond }) {
    const cache = new Map();
    const asked = { bucket: [], upstream: [] };
    function answered(uri, answer, from) {
        if (!respond) return { ...answer, from };
        const response = respond({
            version: '1.0',
            context: { eventType: 'viewer-response' },
            viewer: { ip: '203.0.113.9' },
            request: { method: 'GET', uri, querystring: {}, headers: {}, cookies: {} },
            response: {
                statusCode: answer.status,
                statusDescription: '',
                headers: structuredClone(answer.headers || {}),
                cookies: {},
            },
        });
        return { ...answer, status: response.statusCode, headers: response.headers, from };
    }
    async function request(uri, ip, headers = {}) {
        const forwarded = await handler(event(uri, ip, { ...headers }));
        if (forwarded.statusCode) return { status: forwarded.statusCode, headers: forwarded.headers, from: 'edge' };
        if (cache.has(forwarded.uri)) return answered(forwarded.uri, cache.get(forwarded.uri), 'cache');
        asked.bucket.push({ uri: forwarded.uri, headers: { ...forwarded.headers } });
        let answer = bucket(forwarded.uri);
        if (answer.status === 403 || answer.status === 404) {
            asked.upstream.push({ path: upstreamPath + forwarded.uri, headers: { ...forwarded.headers } });
            answer = upstream(upstreamPath + forwarded.uri);
        }
        if (answer.status === 200) cache.set(forwarded.uri, answer);
        return answered(forwarded.uri, answer, 'origin');
    }
    return { request, asked };
}

const OWN = '/symbols/app.pdb/0123456789abcdef0123456789abcdef1/app.pdb';
const SYSTEM = '/symbols/ntdll.pdb/0BDE3C0B6FC7B1F8D2B8E4E5F2A1B3C41/ntdll.pdb';
const bucket = (uri) => (uri === OWN ? { status: 200, body: 'own' } : { status: 403 });
// msdl.microsoft.com as seen through origin_path /download (case-insensitive, as SymSrv is).
const msdl = (path) =>
    path.toLowerCase() === '/download' + SYSTEM.toLowerCase()
        ? { status: 200, body: 'microsoft' }
        : { status: 404 };

test('a private deployment answers upstream symbols to its readers only', async () => {
    const handler = load(
        { allowCidrs: ['10.0.0.0/8'], auth: true, foldPrefixes: ['/symbols/'], kvsId: 'kvs-1' },
        ['reader-token'],
    );
    const cdn = edge(handler, { bucket, upstreamPath: '/download', upstream: msdl });
    const reader = { authorization: { value: 'Bearer reader-token' } };

    // Strangers are refused before any origin is asked: the deployment is no open proxy.
    assert.equal((await cdn.request(SYSTEM, '10.1.2.3')).status, 401);
    assert.equal((await cdn.request(SYSTEM, '10.1.2.3', { authorization: { value: 'Bearer guess' } })).status, 401);
    assert.equal((await cdn.request(SYSTEM, '198.51.100.7', reader)).status, 403, 'outside the allow-list');
    assert.equal(cdn.asked.upstream.length, 0);
    assert.equal(cdn.asked.bucket.length, 0);

    // A reader gets Microsoft's file through the bucket's miss; the upstream sees the path only.
    const first = await cdn.request(SYSTEM, '10.1.2.3', reader);
    assert.deepEqual([first.status, first.body, first.from], [200, 'microsoft', 'origin']);
    assert.equal(cdn.asked.upstream.length, 1);
    assert.equal(cdn.asked.upstream[0].path, '/download' + SYSTEM.toLowerCase(), 'folded, under origin_path');
    assert.equal(cdn.asked.upstream[0].headers.authorization, undefined, 'the token stays at the edge');

    // Cached at the edge now, and still only for readers.
    assert.equal((await cdn.request(SYSTEM, '10.1.2.3')).status, 401);
    const again = await cdn.request(SYSTEM.toUpperCase().replace('/SYMBOLS/', '/symbols/'), '10.9.9.9', reader);
    assert.deepEqual([again.status, again.body, again.from], [200, 'microsoft', 'cache']);
    assert.equal(cdn.asked.upstream.length, 1, 'one upstream fetch for every spelling');
});

test('own symbols never reach the upstream; a miss everywhere is a miss', async () => {
    const handler = load({ allowCidrs: [], auth: true, foldPrefixes: ['/symbols/'], kvsId: 'kvs-1' }, ['t']);
    const cdn = edge(handler, { bucket, upstreamPath: '/download', upstream: msdl });
    const reader = { authorization: { value: 'Bearer t' } };
    const own = await cdn.request(OWN, '203.0.113.9', reader);
    assert.deepEqual([own.status, own.body], [200, 'own']);
    assert.equal(cdn.asked.upstream.length, 0);
    const missing = await cdn.request('/symbols/none.pdb/00/none.pdb', '203.0.113.9', reader);
    assert.equal(missing.status, 404);
    assert.equal(cdn.asked.upstream.length, 1);
});

test('a public deployment is a public proxy of its upstreams, as of its own symbols', async () => {
    // No require_auth, no allowed_cidrs: the module's documented choice for open symbol servers.
    const handler = load({ allowCidrs: [], auth: false, foldPrefixes: ['/symbols/'], kvsId: '' });
    const cdn = edge(handler, { bucket, upstreamPath: '/download', upstream: msdl });
    const out = await cdn.request(SYSTEM, '198.51.100.7', { authorization: { value: 'Bearer anything' } });
    assert.equal(out.status, 200);
    // Without credential checks the header is not the function's to remove; CloudFront's
    // cache policy forwards no viewer header to any origin.
    assert.equal(cdn.asked.upstream.length, 1);
});

// A hostile (or intercepted) upstream answers with S3's alias header pointing off the site.
// The function on an upstream's behaviour cannot know which origin answered: only the target
// decides, and only a path of this site is followed.
test('an upstream cannot send readers off the site through an alias header', async () => {
    const access = load({ allowCidrs: [], auth: false, foldPrefixes: ['/symbols/'], kvsId: '' });
    const ALIAS = '/symbols/app.pdb/0123456789abcdef0123456789abcdef1/app.pdb';
    const TARGET = '/index2/ap/app.pdb/0123456789abcdef0123456789abcdef1/app.pdb';
    const withAlias = (uri) =>
        uri === ALIAS
            ? { status: 200, body: '', headers: { 'x-amz-website-redirect-location': { value: TARGET } } }
            : { status: 403 };
    const hostile = (location) => () => ({
        status: 200,
        body: '',
        headers: { 'x-amz-website-redirect-location': { value: location } },
    });

    // symbols/ in front of msdl holds own keys: own aliases redirect, the upstream's do not.
    for (const location of ['//evil.example/a.pdb', '/\\evil.example']) {
        const cdn = edge(access, {
            bucket: withAlias,
            upstreamPath: '/download',
            upstream: hostile(location),
            respond: loadResponse({ redirects: true, maxAge: 86400 }),
        });
        for (const from of ['origin', 'cache']) {
            const answer = await cdn.request(SYSTEM, '198.51.100.7');
            assert.deepEqual([answer.status, answer.from], [502, from], location);
            assert.equal(answer.headers.location, undefined, location);
        }
        assert.equal(cdn.asked.upstream.length, 1);
        const own = await cdn.request(ALIAS, '198.51.100.7');
        assert.deepEqual([own.status, own.headers.location.value], [301, TARGET]);
    }

    // A prefix that holds no own keys: every answer is the upstream's, no redirect is followed,
    // not even to a path of this site.
    const cdn = edge(access, {
        bucket: () => ({ status: 404 }),
        upstreamPath: '',
        upstream: hostile(ALIAS),
        respond: loadResponse({ redirects: false, maxAge: 86400 }),
    });
    const answer = await cdn.request('/debian/buildid/ab12/debuginfo', '198.51.100.7');
    assert.equal(answer.status, 502);
    assert.equal(answer.headers.location, undefined);
});
