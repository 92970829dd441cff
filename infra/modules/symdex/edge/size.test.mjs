// node --test: CloudFront takes at most 10 KB of function code (not adjustable). The module
// deploys each function without its comment lines and indentation (harness.mjs's deployed()
// is the same expression as access.tf's), with a CONFIG line of the operator's variables;
// access.tf refuses a configuration whose code would not fit (the plan test shows it). A
// large configuration of each part must fit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { accessSource, deployed, responseSource } from './harness.mjs';

const LIMIT = 10 * 1024;

function withConfig(source, config) {
    const code = deployed(source).replace(/^var CONFIG = .*;$/m, `var CONFIG = ${JSON.stringify(config)};`);
    assert.notEqual(code, deployed(source));
    return code;
}

test('the deployed functions fit CloudFront\'s 10 KB with a large configuration', () => {
    const origins = Array.from({ length: 3 }, (_, i) => `https://profiler-${i}.tools.example.com`);
    const access = withConfig(accessSource, {
        // 30 networks of the allow-list (IPv6, the longer), 5 of the audit grant, 3 CORS origins.
        allowCidrs: Array.from({ length: 30 }, (_, i) => `2001:db8:${(0xa000 + i).toString(16)}::/48`),
        audit: {
            cidrs: Array.from({ length: 5 }, (_, i) => `198.51.${100 + i}.0/24`),
            prefix: '/_symdex/audit/',
            tokenSha256: 'f'.repeat(64),
        },
        auth: true,
        cors: { origins },
        encodings: ['zstd', 'gzip'],
        foldPrefixes: ['/symbols/', '/index2/'],
        kvsId: '8aa1b2c3-d4e5-46f7-8899-aabbccddeeff',
    });
    assert.ok(access.length <= LIMIT, `access.js deployed: ${access.length} bytes`);
    const response = withConfig(responseSource, { cors: { origins }, maxAge: 86400, redirects: true, vary: true });
    assert.ok(response.length <= LIMIT / 2, `response.js deployed: ${response.length} bytes`);
    // The sources themselves need not fit: their comments are why they are readable.
    assert.ok(accessSource.length > LIMIT);
});

test('what is removed is comments and indentation only', () => {
    for (const source of [accessSource, responseSource]) {
        const kept = deployed(source).split('\n').filter((l) => l !== '');
        const code = source.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('//'));
        assert.deepEqual(kept, code);
    }
});
