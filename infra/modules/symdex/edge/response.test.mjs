// node --test: the viewer-response function as CloudFront runs it (viewer-response event
// shapes: lowercase header names, `{ value }` objects).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadResponse } from './harness.mjs';

// Every behaviour runs it with its CONFIG line replaced, as cdn.tf does (the plan test checks
// the module writes this line): the serving bucket's without compression or CORS here
// (compression.test.mjs and cors.test.mjs have those).
const load = loadResponse;
const handler = load({ cors: null, maxAge: 86400, redirects: true, vary: false });

function event(uri, status, headers) {
    return {
        version: '1.0',
        context: { eventType: 'viewer-response' },
        viewer: { ip: '203.0.113.9' },
        request: { method: 'GET', uri, querystring: {}, headers: {}, cookies: {} },
        response: { statusCode: status, statusDescription: 'OK', headers, cookies: {} },
    };
}

test('a buildid file answers with debuginfod\'s headers, also on a range', () => {
    for (const status of [200, 206]) {
        const out = handler(event('/buildid/ab12/debuginfo', status, {
            'content-type': { value: 'application/octet-stream' },
            'x-amz-meta-debuginfod-size': { value: '123456' },
            'x-amz-meta-debuginfod-file': { value: 'buildid/ab12/debuginfo' },
            'x-amz-meta-symdex-content-etag': { value: 'f00' },
        }));
        assert.equal(out.headers['x-debuginfod-size'].value, '123456');
        assert.equal(out.headers['x-debuginfod-file'].value, 'buildid/ab12/debuginfo');
        assert.equal(out.headers['x-amz-meta-debuginfod-size'], undefined);
        assert.equal(out.headers['x-amz-meta-symdex-content-etag'], undefined, 'internal');
        assert.equal(out.headers['content-type'].value, 'application/octet-stream');
        assert.equal(out.statusCode, status);
    }
});

test('other files and misses pass unchanged', () => {
    const pdb = event('/symbols/a.pdb/ID/a.pdb', 200, { etag: { value: '"x"' } });
    assert.deepEqual(handler(structuredClone(pdb)), pdb.response);
    const miss = event('/buildid/ab12/source/src/a.c', 404, {});
    assert.deepEqual(handler(structuredClone(miss)), miss.response);
});

test('an alias answers a 301 to the key holding the bytes, for GET and HEAD', () => {
    for (const method of ['GET', 'HEAD']) {
        const e = event('/symbols/foo.pdb/ABC1/foo.pdb', 200, {
            'content-length': { value: '0' },
            'x-amz-website-redirect-location': { value: '/index2/fo/foo.pdb/ABC1/foo.pdb' },
            'x-amz-meta-symdex-content-size': { value: '4096' },
        });
        e.request.method = method;
        const out = handler(e);
        assert.equal(out.statusCode, 301);
        assert.equal(out.headers.location.value, '/index2/fo/foo.pdb/ABC1/foo.pdb');
        assert.equal(out.headers['x-amz-meta-symdex-content-size'], undefined);
    }
});

// What a hostile upstream (or one intercepted) puts in the header, and what the serving bucket
// would hold if anyone but the indexer wrote it: each a place off this site for a client.
const OFF_SITE = [
    '//evil.example/a.pdb',
    '/\\evil.example',
    '/\\/evil.example/a.pdb',
    'https://evil.example/a.pdb',
    'evil.example/a.pdb',
    '/\t/evil.example/a.pdb',
    '/\n/evil.example/a.pdb',
    '',
];

function aliasAnswer(uri, location) {
    return event(uri, 200, {
        'content-length': { value: '0' },
        'x-amz-website-redirect-location': { value: location },
        'x-amz-meta-symdex-content-size': { value: '4096' },
    });
}

// Refused: no 301, no location anywhere, the zero-byte body not served as the file, and the
// refusal not kept by viewers.
function assertRefused(out, what) {
    assert.equal(out.statusCode, 502, what);
    assert.equal(out.headers.location, undefined, what);
    assert.equal(out.headers['x-amz-website-redirect-location'], undefined, what);
    assert.equal(out.headers['cache-control'].value, 'no-store', what);
}

test('the bucket\'s behaviour honours same-site redirects only', () => {
    for (const location of OFF_SITE) {
        assertRefused(handler(aliasAnswer('/symbols/a.pdb/ID/a.pdb', location)), JSON.stringify(location));
    }
    // The deployment's own alias still redirects, kept a day by viewers.
    const out = handler(aliasAnswer('/buildid/ab12/debuginfo', '/symbols/_.debug/elf-buildid-sym-ab12/_.debug'));
    assert.equal(out.statusCode, 301);
    assert.equal(out.headers.location.value, '/symbols/_.debug/elf-buildid-sym-ab12/_.debug');
    assert.equal(out.headers['cache-control'].value, 'max-age=86400');
});

test('an upstream\'s behaviour whose path holds no own keys honours no redirect', () => {
    // cdn.tf: debian/buildid/ holds no layout's keys, so every answer there is the upstream's.
    const upstream = load({ redirects: false, maxAge: 3600 });
    for (const location of [...OFF_SITE, '/debian/buildid/ab12/debuginfo', '/symbols/a.pdb/ID/a.pdb']) {
        assertRefused(upstream(aliasAnswer('/debian/buildid/ab12/debuginfo', location)), JSON.stringify(location));
    }
    // Its answers are otherwise passed on as the bucket's are.
    const file = event('/debian/buildid/ab12/debuginfo', 200, {
        'content-length': { value: '123' },
        'x-amz-meta-symdex-content-etag': { value: 'f00' },
    });
    const out = upstream(structuredClone(file));
    assert.equal(out.statusCode, 200);
    assert.equal(out.headers['content-length'].value, '123');
    assert.equal(out.headers['x-amz-meta-symdex-content-etag'], undefined);
});

test('an upstream\'s behaviour over own keys: own aliases redirect, same-site only, kept briefly', () => {
    // cdn.tf: symbols/ in front of msdl; the bucket answers own keys there first.
    const upstream = load({ redirects: true, maxAge: 3600 });
    for (const location of OFF_SITE) {
        assertRefused(upstream(aliasAnswer('/symbols/ntdll.pdb/ID/ntdll.pdb', location)), JSON.stringify(location));
    }
    const out = upstream(aliasAnswer('/symbols/app.pdb/ID/app.pdb', '/index2/ap/app.pdb/ID/app.pdb'));
    assert.equal(out.statusCode, 301);
    assert.equal(out.headers.location.value, '/index2/ap/app.pdb/ID/app.pdb');
    // No longer than the edge keeps an upstream's answer on this path.
    assert.equal(out.headers['cache-control'].value, 'max-age=3600');
});
