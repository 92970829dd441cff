// Test support for the edge functions' node tests (not deployed: the module reads access.js
// and response.js only). The access function is loaded from its own source as CloudFront runs
// it: its two imports provided (the `cloudfront` module's KeyValueStore played by a map), its
// CONFIG line replaced as the Terraform module replaces it.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { readFileSync } from 'node:fs';

const source = readFileSync(new URL('./access.js', import.meta.url), 'utf8');
const responseSource = readFileSync(new URL('./response.js', import.meta.url), 'utf8');

export function load(config, secrets = []) {
    const kvs = new Map(secrets.map((s) => [
        'sha256:' + crypto.createHash('sha256').update(s).digest('hex'), '1',
    ]));
    const cf = {
        kvs(id) {
            assert.equal(id, config.kvsId);
            return {
                async get(key) {
                    if (!kvs.has(key)) throw new Error('key not found');
                    return kvs.get(key);
                },
            };
        },
    };
    const body = source
        .replace(/^import .*$/gm, '')
        .replace(/^var CONFIG = .*$/m, `var CONFIG = ${JSON.stringify(config)};`);
    assert.notEqual(body, source, 'the CONFIG line is where Terraform expects it');
    return new Function('cf', 'crypto', 'Buffer', `${body}\nreturn handler;`)(cf, crypto, Buffer);
}

export function event(uri, ip, headers = {}) {
    return {
        version: '1.0',
        context: { eventType: 'viewer-request' },
        viewer: { ip },
        request: { method: 'GET', uri, querystring: {}, headers, cookies: {} },
    };
}

// The viewer-response function as the module deploys it on an upstream's behaviour: its
// CONFIG line replaced as cdn.tf replaces it (the bucket's behaviours run the source as it is).
export function loadResponse(config) {
    const body = responseSource.replace(/^var CONFIG = .*;$/m, `var CONFIG = ${JSON.stringify(config)};`);
    assert.notEqual(body, responseSource, 'the CONFIG line is where Terraform expects it');
    return new Function(`${body}\nreturn handler;`)();
}
