// node --test: the viewer-response function as CloudFront runs it (viewer-response event
// shapes: lowercase header names, `{ value }` objects).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const source = readFileSync(new URL('./response.js', import.meta.url), 'utf8');
const handler = new Function(`${source}\nreturn handler;`)();

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
    // A redirect that is not a path of this bucket is not followed blindly.
    const foreign = event('/symbols/a/b/a', 200, {
        'x-amz-website-redirect-location': { value: 'https://evil.example/' },
    });
    assert.equal(handler(foreign).statusCode, 200);
});
