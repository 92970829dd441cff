// node --test: compressed answers at the edge. The indexer stores a copy of a published key K
// at _symdex/encoded/<encoding>/K (Content-Encoding set, debuginfod-size the raw size); the
// serving bucket's behaviour runs the access function with CONFIG.encodings (the module's
// `compress`), which picks the encoding from Accept-Encoding, names it in the cache key
// (x-symdex-encoding) and sends the request to an origin group made for it: the copy's origin
// first, the plain bucket on 403/404. harness.mjs's behaviour() models the cache and that
// failover; the plan test shows the module configures the origins, the group's members and
// the cache key as modelled here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { behaviour, bucket, event, load, loadResponse } from './harness.mjs';

const RAW = 'ELF'.padEnd(4096, 'debug info ');
const ZSTD = '(zstd of the debug file)';
const GZIP = '(gzip of the debug file)';
const KEY = 'buildid/ab12/debuginfo';
const SMALL = 'buildid/cd34/debuginfo';
const ALIAS = 'symbols/app.pdb/0123456789abcdef0123456789abcdef1/app.pdb';
const TARGET = 'index2/ap/app.pdb/0123456789abcdef0123456789abcdef1/app.pdb';
const meta = (size, extra = {}) => ({
    'content-type': { value: 'application/octet-stream' },
    'x-amz-meta-debuginfod-size': { value: String(size) },
    'x-amz-meta-debuginfod-file': { value: '/src/app' },
    'x-amz-meta-symdex-content-etag': { value: 'c0ffee' },
    ...extra,
});
const copy = (encoding, body) => ({
    body,
    headers: meta(RAW.length, {
        'content-encoding': { value: encoding },
        'x-amz-meta-symdex-raw-etag': { value: 'c0ffee' },
        'x-amz-meta-symdex-raw-size': { value: String(RAW.length) },
    }),
});
// A key with copies, one without (under 1 KiB: the indexer makes none), an alias (zero bytes,
// never a copy) and its target.
const OBJECTS = {
    [KEY]: { body: RAW, headers: meta(RAW.length) },
    [`_symdex/encoded/zstd/${KEY}`]: copy('zstd', ZSTD),
    [`_symdex/encoded/gzip/${KEY}`]: copy('gzip', GZIP),
    [SMALL]: { body: 'tiny', headers: meta(4) },
    [ALIAS]: { body: '', headers: { 'x-amz-website-redirect-location': { value: '/' + TARGET } } },
    [TARGET]: { body: RAW, headers: meta(RAW.length) },
};

// The serving bucket's behaviour as cdn.tf configures it with `compress = [encodings]`.
function edge(encodings, extra = {}) {
    const fetch = bucket(OBJECTS);
    const origins = { serving: { path: '', fetch } };
    for (const encoding of encodings) origins[`serving-${encoding}`] = { path: `/_symdex/encoded/${encoding}`, fetch };
    const access = load({ foldPrefixes: ['/symbols/', '/index2/'], encodings, ...extra });
    return behaviour({
        access,
        respond: loadResponse({ cors: null, maxAge: 86400, redirects: true, vary: true }),
        origins,
        cacheKeyHeaders: ['x-symdex-encoding'],
    });
}
const ae = (value) => ({ 'accept-encoding': { value } });

test('Accept-Encoding picks the encoding per RFC 9110: q-values, identity, *, zstd first', async () => {
    const both = load({ encodings: ['zstd', 'gzip'] });
    const zstdOnly = load({ encodings: ['zstd'] });
    const cases = [
        // [Accept-Encoding, with zstd and gzip, with zstd only]
        [undefined, 'identity', 'identity'],
        ['', 'identity', 'identity'],
        ['gzip, zstd', 'zstd', 'zstd'],
        ['zstd;q=0, gzip', 'gzip', 'identity'],
        ['identity', 'identity', 'identity'],
        ['br', 'identity', 'identity'],
        ['*', 'zstd', 'zstd'],
        ['*;q=0', 'identity', 'identity'],
        ['gzip, *;q=0', 'gzip', 'identity'],
        ['br, *;q=0.5', 'zstd', 'zstd'],
        // elfutils' debuginfod-find and gdb (libdebuginfod), LLDB 23.
        ['deflate, gzip, br, zstd', 'zstd', 'zstd'],
        ['deflate, gzip, zstd', 'zstd', 'zstd'],
        // The viewer's weights decide; zstd wins ties.
        ['gzip;q=1, zstd;q=0.5', 'gzip', 'zstd'],
        ['gzip;q=0.8, zstd;q=0.8', 'zstd', 'zstd'],
        ['zstd;q=0.5, identity', 'identity', 'identity'],
        ['zstd, identity;q=0.5', 'zstd', 'zstd'],
        ['ZSTD', 'zstd', 'zstd'],
        ['x-gzip', 'gzip', 'identity'],
        [' zstd ; q=0.001 ', 'zstd', 'zstd'],
        ['zstd;q=1.000', 'zstd', 'zstd'],
        // Malformed weights are not acceptance.
        ['zstd;q=2', 'identity', 'identity'],
        ['zstd;q=0.5000', 'identity', 'identity'],
        ['zstd;q=high, gzip', 'gzip', 'identity'],
        [',,zstd', 'zstd', 'zstd'],
    ];
    for (const [header, withBoth, withZstd] of cases) {
        for (const [handler, want] of [[both, withBoth], [zstdOnly, withZstd]]) {
            const headers = header === undefined ? {} : ae(header);
            const out = await handler(event('/' + KEY, '203.0.113.9', headers));
            assert.equal(out.headers['x-symdex-encoding'].value, want, `${JSON.stringify(header)}`);
            if (want === 'identity') {
                assert.equal(handler.origin, null, `${header}: the behaviour's own origin`);
            } else {
                assert.deepEqual(handler.origin, { group: [`serving-${want}`, 'serving'], statusCodes: [403, 404] });
            }
        }
    }
    // Accept-Encoding sent twice: one list (RFC 9110, 5.3).
    const twice = await both(event('/' + KEY, '203.0.113.9', {
        'accept-encoding': { value: 'br', multiValue: [{ value: 'br' }, { value: 'zstd;q=0.5' }] },
    }));
    assert.equal(twice.headers['x-symdex-encoding'].value, 'zstd');
    // A viewer cannot name its cache key: the function sets it on every request.
    const forged = await both(event('/' + KEY, '203.0.113.9', { 'x-symdex-encoding': { value: 'zstd' } }));
    assert.equal(forged.headers['x-symdex-encoding'].value, 'identity');
});

test('a compressed answer: the stored copy, its Content-Encoding, the raw size, Vary', async () => {
    const cdn = edge(['zstd', 'gzip']);
    for (const [encoding, body] of [['zstd', ZSTD], ['gzip', GZIP]]) {
        const out = await cdn.request('/' + KEY, { headers: ae(`${encoding}, br`) });
        assert.deepEqual([out.status, out.body, out.from], [200, body, 'origin']);
        assert.equal(out.headers['content-encoding'].value, encoding);
        assert.equal(out.headers['content-length'].value, String(body.length));
        assert.equal(out.headers['x-debuginfod-size'].value, String(RAW.length), 'the raw size');
        assert.equal(out.headers['x-debuginfod-file'].value, '/src/app');
        assert.equal(out.headers.vary.value, 'Accept-Encoding');
        for (const internal of ['symdex-raw-etag', 'symdex-raw-size', 'symdex-content-etag']) {
            assert.equal(out.headers['x-amz-meta-' + internal], undefined, internal);
        }
    }
    assert.deepEqual(cdn.asked.map((a) => [a.origin, a.key]), [
        ['serving-zstd', `_symdex/encoded/zstd/${KEY}`],
        ['serving-gzip', `_symdex/encoded/gzip/${KEY}`],
    ]);
    // Only the cache key's header reaches the origin, never the viewer's Accept-Encoding.
    assert.deepEqual(cdn.asked[0].headers, { 'x-symdex-encoding': { value: 'zstd' } });
});

test('the cache keeps one answer per encoding', async () => {
    const cdn = edge(['zstd', 'gzip']);
    const zstd = await cdn.request('/' + KEY, { headers: ae('zstd') });
    const plain = await cdn.request('/' + KEY);
    const gzip = await cdn.request('/' + KEY, { headers: ae('gzip') });
    assert.deepEqual([zstd.body, zstd.from, plain.body, plain.from, gzip.body, gzip.from],
        [ZSTD, 'origin', RAW, 'origin', GZIP, 'origin'], 'each encoding its own miss');
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(plain.headers.vary.value, 'Accept-Encoding', 'identity answers vary too');
    // Hits now, each with its own bytes, whatever else the viewer accepts.
    for (const [header, body] of [['zstd, gzip', ZSTD], ['br', RAW], [undefined, RAW], ['gzip;q=0.5', GZIP]]) {
        const out = await cdn.request('/' + KEY, { headers: header === undefined ? {} : ae(header) });
        assert.deepEqual([out.body, out.from], [body, 'cache'], String(header));
    }
    assert.equal(cdn.cache.size, 3);
    assert.equal(cdn.asked.length, 3);
});

test('a key without a copy answers 200 with its raw bytes, through the failover', async () => {
    const cdn = edge(['zstd']);
    const out = await cdn.request('/' + SMALL, { headers: ae('zstd') });
    assert.deepEqual([out.status, out.body], [200, 'tiny']);
    assert.equal(out.headers['content-encoding'], undefined, 'identity');
    assert.equal(out.headers['x-debuginfod-size'].value, '4');
    assert.deepEqual(cdn.asked.map((a) => [a.origin, a.key]), [
        ['serving-zstd', `_symdex/encoded/zstd/${SMALL}`],
        ['serving', SMALL],
    ], 'the same URI asked of the plain bucket');
    // Kept under the zstd key: the next zstd viewer does not fail over again.
    assert.equal((await cdn.request('/' + SMALL, { headers: ae('zstd') })).from, 'cache');
    assert.equal(cdn.asked.length, 2);
    // A miss everywhere is still a miss.
    const missing = await cdn.request('/buildid/ffff/debuginfo', { headers: ae('zstd') });
    assert.equal(missing.status, 404);
    assert.equal(missing.headers.vary, undefined);
});

test('an alias has no copy: its redirect is answered, to a target that has one', async () => {
    const cdn = edge(['zstd']);
    const out = await cdn.request('/' + ALIAS.toUpperCase().replace('SYMBOLS', 'symbols'), { headers: ae('zstd') });
    assert.equal(out.status, 301);
    assert.equal(out.headers.location.value, '/' + TARGET);
    const target = await cdn.request(out.headers.location.value, { headers: ae('zstd') });
    assert.deepEqual([target.status, target.body], [200, RAW], 'no copy of the target here: raw');
});

test('a range gets the raw bytes; a HEAD has its GET\'s headers', async () => {
    const cdn = edge(['zstd']);
    const range = { ...ae('zstd'), range: { value: 'bytes=16-31' } };
    const part = await cdn.request('/' + KEY, { headers: range });
    assert.deepEqual([part.status, part.body], [206, RAW.slice(16, 32)]);
    assert.equal(part.headers['content-encoding'], undefined);
    assert.equal(part.headers['x-debuginfod-size'].value, String(RAW.length));
    assert.deepEqual(cdn.asked.map((a) => [a.origin, a.key, a.headers['x-symdex-encoding'].value]), [
        ['serving', KEY, 'identity'],
    ]);
    // From the cache too: a kept identity answer is cut, never a kept compressed one.
    await cdn.request('/' + KEY, { headers: ae('zstd') });
    await cdn.request('/' + KEY);
    const cached = await cdn.request('/' + KEY, { headers: range });
    assert.deepEqual([cached.status, cached.body, cached.from], [206, RAW.slice(16, 32), 'cache']);

    const fresh = edge(['zstd']);
    const head = await fresh.request('/' + KEY, { headers: ae('zstd'), method: 'HEAD' });
    const get = await fresh.request('/' + KEY, { headers: ae('zstd') });
    assert.equal(head.body, '');
    assert.deepEqual(head.headers, get.headers, 'HEAD: the compressed GET\'s headers');
    assert.equal(head.headers['content-length'].value, String(ZSTD.length));
    assert.equal(fresh.asked[0].origin, 'serving-zstd');
});

test('copies are never read directly, however spelt', async () => {
    const paths = [
        `/_symdex/encoded/zstd/${KEY}`,
        `/%5Fsymdex/encoded/zstd/${KEY}`,
        `/_symdex/%65ncoded/gzip/${KEY}`,
        `/symbols/../_symdex/encoded/zstd/${KEY}`,
        `/x/%2E%2E/_symdex/encoded/zstd/${KEY}`,
    ];
    // On the negotiating behaviour, and on every other (the function without encodings).
    for (const encodings of [['zstd', 'gzip'], []]) {
        const handler = load({ encodings });
        for (const uri of paths) {
            for (const headers of [{}, ae('zstd')]) {
                const out = await handler(event(uri, '203.0.113.9', headers));
                assert.equal(out.statusCode, 404, `${uri} ${encodings}`);
                assert.equal(handler.origin, null);
            }
        }
    }
    // Behind credentials, the credentials come first.
    const closed = load({ encodings: ['zstd'], auth: true, kvsId: 'kvs-1' }, ['tok']);
    assert.equal((await closed(event(paths[0], '203.0.113.9'))).statusCode, 401);
    const reader = { authorization: { value: 'Bearer tok' } };
    assert.equal((await closed(event(paths[0], '203.0.113.9', reader))).statusCode, 404);
});

test('a path with dot segments is answered as it is, never from a copy', async () => {
    const handler = load({ encodings: ['zstd'] });
    for (const uri of ['/buildid/ab12/../ab12/debuginfo', '/buildid/./ab12/debuginfo', '/buildid/ab12/%2e%2e/x']) {
        const out = await handler(event(uri, '203.0.113.9', ae('zstd')));
        assert.equal(out.uri, uri);
        assert.equal(out.headers['x-symdex-encoding'].value, 'identity', uri);
        assert.equal(handler.origin, null);
    }
});

test('behaviours that do not negotiate (compress off, upstreams, private prefixes) never choose an origin', async () => {
    const handler = load({ foldPrefixes: ['/symbols/'] });
    for (const headers of [{}, ae('zstd, gzip'), ae('*')]) {
        const out = await handler(event('/symbols/ntdll.pdb/ABC1/ntdll.pdb', '203.0.113.9', headers));
        assert.equal(out.uri, '/symbols/ntdll.pdb/abc1/ntdll.pdb');
        assert.equal(out.headers['x-symdex-encoding'], undefined);
        assert.equal(handler.origin, null, 'the behaviour\'s origin (an upstream group) stays');
    }
    // And their answers do not say Vary.
    const respond = loadResponse({ cors: null, maxAge: 3600, redirects: true, vary: false });
    const out = respond({
        request: { method: 'GET', uri: '/x', headers: {}, querystring: {}, cookies: {} },
        response: { statusCode: 200, headers: {}, cookies: {} },
    });
    assert.equal(out.headers.vary, undefined);
});

test('access control runs before negotiation', async () => {
    const handler = load({ encodings: ['zstd'], auth: true, kvsId: 'kvs-1', allowCidrs: ['10.0.0.0/8'] }, ['tok']);
    const reader = { authorization: { value: 'Bearer tok' }, ...ae('zstd') };
    assert.equal((await handler(event('/' + KEY, '203.0.113.9', { ...reader }))).statusCode, 403);
    assert.equal(handler.origin, null);
    assert.equal((await handler(event('/' + KEY, '10.1.2.3', ae('zstd')))).statusCode, 401);
    assert.equal(handler.origin, null);
    const out = await handler(event('/' + KEY, '10.1.2.3', { ...reader }));
    assert.equal(out.headers.authorization, undefined);
    assert.deepEqual(handler.origin.group, ['serving-zstd', 'serving']);
});
