// Test support for the edge functions' node tests (not deployed: the module reads access.js
// and response.js only). The functions are loaded from their own source as CloudFront runs
// them: as the module deploys them (deployed(): comment lines and indentation removed), their
// imports provided (the `cloudfront` module's KeyValueStore played by a map, its origin helpers
// recorded), their CONFIG line replaced as the Terraform module replaces it.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { readFileSync } from 'node:fs';

export const accessSource = readFileSync(new URL('./access.js', import.meta.url), 'utf8');
export const responseSource = readFileSync(new URL('./response.js', import.meta.url), 'utf8');

// What access.tf and cdn.tf upload: the same regular expression (RE2 there, JavaScript here),
// so that the 10 KB CloudFront allows holds the code and not its comments.
export function deployed(source) {
    return source.replace(/^[ \t]*(\/\/.*)?\n?/gm, '');
}

// The access function's CONFIG as the module writes it: every key present (the tests name the
// ones they set).
const ACCESS_DEFAULTS = {
    allowCidrs: [], auth: false, foldPrefixes: [], kvsId: '', audit: null, encodings: [], cors: null,
};

// The `cloudfront` module's origin helpers, checked against the documented shapes
// (helper-functions-origin-modification): what a call asks for is kept in `state.origin`.
function originHelpers(state) {
    return {
        createRequestOriginGroup(group) {
            assert.equal(group.originIds.length, 2, 'an origin group has two origins');
            for (const member of group.originIds) assert.equal(typeof member.originId, 'string');
            assert.ok(group.failoverCriteria.statusCodes.length > 0);
            assert.equal(state.origin, null, 'one origin choice per request');
            state.origin = {
                group: group.originIds.map((m) => m.originId),
                statusCodes: group.failoverCriteria.statusCodes,
            };
        },
        selectRequestOriginById(id) {
            assert.equal(state.origin, null, 'one origin choice per request');
            state.origin = { group: [id], statusCodes: [] };
        },
    };
}

// The viewer-request function; the returned handler says (`handler.origin`) which origins the
// last request was sent to, or null for the behaviour's own.
export function load(config, secrets = []) {
    config = { ...ACCESS_DEFAULTS, ...config };
    const kvs = new Map(secrets.map((s) => [
        'sha256:' + crypto.createHash('sha256').update(s).digest('hex'), '1',
    ]));
    const state = { origin: null };
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
        ...originHelpers(state),
    };
    const source = deployed(accessSource);
    const body = source
        .replace(/^import .*$/gm, '')
        .replace(/^var CONFIG = .*$/m, `var CONFIG = ${JSON.stringify(config)};`);
    assert.notEqual(body, source, 'the CONFIG line is where Terraform expects it');
    const handler = new Function('cf', 'crypto', 'Buffer', `${body}\nreturn handler;`)(cf, crypto, Buffer);
    async function run(event) {
        state.origin = null;
        const out = await handler(event);
        run.origin = state.origin;
        return out;
    }
    run.origin = null;
    return run;
}

export function event(uri, ip, headers = {}, method = 'GET') {
    return {
        version: '1.0',
        context: { eventType: 'viewer-request' },
        viewer: { ip },
        request: { method, uri, querystring: {}, headers, cookies: {} },
    };
}

// The viewer-response function as the module deploys it on a behaviour: its CONFIG line
// replaced as cdn.tf replaces it.
export function loadResponse(config) {
    const source = deployed(responseSource);
    const body = source.replace(/^var CONFIG = .*;$/m, `var CONFIG = ${JSON.stringify(config)};`);
    assert.notEqual(body, source, 'the CONFIG line is where Terraform expects it');
    return new Function(`${body}\nreturn handler;`)();
}

// The serving bucket as S3 answers CloudFront's GETs and HEADs: objects by key (`body` a string,
// `headers` the stored metadata in CloudFront's shape), 404 for a missing key (the bucket
// policy grants ListBucket), a `Range: bytes=a-b` as a 206 of those bytes.
export function bucket(objects) {
    return function fetch(key, method, headers) {
        const object = objects[key];
        if (!object) return { status: 404, headers: {}, body: '' };
        const out = {
            ...structuredClone(object.headers || {}),
            'content-length': { value: String(object.body.length) },
            etag: { value: '"' + crypto.createHash('md5').update(object.body).digest('hex') + '"' },
        };
        const range = headers.range && /^bytes=(\d+)-(\d+)$/.exec(headers.range.value);
        if (range) {
            const part = object.body.slice(Number(range[1]), Number(range[2]) + 1);
            out['content-length'] = { value: String(part.length) };
            out['content-range'] = { value: `bytes ${range[1]}-${range[2]}/${object.body.length}` };
            return { status: 206, headers: out, body: method === 'HEAD' ? '' : part };
        }
        return { status: 200, headers: out, body: method === 'HEAD' ? '' : object.body };
    };
}

// One cache behaviour at one edge location, as CloudFront runs it:
// - the viewer-request function first (on hits too); an answer it makes is the viewer's, and
//   no viewer-response function runs on it;
// - the cache, keyed by the URI and the request headers the cache policy names
//   (`cacheKeyHeaders`, as the function left them): full GET answers (200) are kept, a range
//   of a kept answer is cut from it, a HEAD is answered from a kept GET's headers;
// - on a miss, the origin the function chose (an origin group made for the request:
//   cf.createRequestOriginGroup) or the behaviour's `target`; an origin is a `path` (its
//   origin_path) over the bucket's `fetch`, asked for path + URI with only the cache key's
//   headers and Range forwarded; a group asks its second origin, with the same URI, when the
//   first answers one of the group's failover status codes;
// - the viewer-response function (`respond`) on every answer from the cache or an origin.
// `asked` lists each origin request: { origin, key, headers }.
export function behaviour({ access, respond, target = 'serving', origins, cacheKeyHeaders = [] }) {
    const cache = new Map();
    const asked = [];
    function fetchFrom(id, uri, method, headers) {
        const origin = origins[id];
        assert.ok(origin, `origin ${id} is in the distribution`);
        const key = decodeURIComponent(origin.path + uri).replace(/^\//, '');
        asked.push({ origin: id, key, headers: structuredClone(headers) });
        return origin.fetch(key, method, headers);
    }
    function viewerAnswer(request, answer, from) {
        if (!respond) return { ...answer, from };
        const out = respond({
            version: '1.0',
            context: { eventType: 'viewer-response' },
            viewer: { ip: '203.0.113.9' },
            request: structuredClone(request),
            response: {
                statusCode: answer.status,
                statusDescription: '',
                headers: structuredClone(answer.headers || {}),
                cookies: {},
            },
        });
        return { ...answer, status: out.statusCode, headers: out.headers, from };
    }
    async function request(uri, { ip = '203.0.113.9', headers = {}, method = 'GET' } = {}) {
        const viewer = structuredClone(headers);
        let forwarded = event(uri, ip, structuredClone(headers), method).request;
        if (access) {
            forwarded = await access(event(uri, ip, structuredClone(headers), method));
            if (forwarded.statusCode) {
                return { status: forwarded.statusCode, headers: forwarded.headers, body: '', from: 'edge' };
            }
        }
        const seen = { ...forwarded, headers: { ...viewer } };
        const keyParts = [forwarded.uri];
        const toOrigin = {};
        for (const name of cacheKeyHeaders) {
            const header = forwarded.headers[name];
            keyParts.push(header ? header.value : '');
            if (header) toOrigin[name] = { value: header.value };
        }
        const cacheKey = JSON.stringify(keyParts);
        const range = forwarded.headers.range && /^bytes=(\d+)-(\d+)$/.exec(forwarded.headers.range.value);
        if (cache.has(cacheKey)) {
            const kept = cache.get(cacheKey);
            if (method === 'HEAD') return viewerAnswer(seen, { ...kept, body: '' }, 'cache');
            if (range) {
                const part = kept.body.slice(Number(range[1]), Number(range[2]) + 1);
                const headers = {
                    ...structuredClone(kept.headers),
                    'content-length': { value: String(part.length) },
                    'content-range': { value: `bytes ${range[1]}-${range[2]}/${kept.body.length}` },
                };
                return viewerAnswer(seen, { status: 206, headers, body: part }, 'cache');
            }
            return viewerAnswer(seen, kept, 'cache');
        }
        if (forwarded.headers.range) toOrigin.range = { value: forwarded.headers.range.value };
        const chosen = access && access.origin ? access.origin : typeof target === 'string'
            ? { group: [target], statusCodes: [] }
            : target;
        let answer = fetchFrom(chosen.group[0], forwarded.uri, method, toOrigin);
        if (chosen.group.length > 1 && chosen.statusCodes.includes(answer.status)) {
            answer = fetchFrom(chosen.group[1], forwarded.uri, method, toOrigin);
        }
        if (method === 'GET' && answer.status === 200) cache.set(cacheKey, answer);
        return viewerAnswer(seen, answer, 'origin');
    }
    return { request, asked, cache };
}
