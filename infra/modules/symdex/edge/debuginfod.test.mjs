// node --test: the debuginfod headers function as CloudFront runs it (viewer-response event
// shapes: lowercase header names, `{ value }` objects).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const source = readFileSync(new URL('./debuginfod.js', import.meta.url), 'utf8');
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
