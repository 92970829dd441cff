// node --test: the audit page's folder at the edge (access.js with CONFIG.audit, as the module
// sets it with audit_page): shown to the audit grant alone, never to a symbol reader.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { event, load } from './harness.mjs';

const PAGE = '/_symdex/audit/index.html';
const KEY = '/symbols/foo.pdb/ABCDEF0123456789ABCDEF01234567891/foo.pdb';
const TOKEN = 'audit-7f3c9e1b';
const READER = 'reader-tok';
const sha256 = (text) => crypto.createHash('sha256').update(text).digest('hex');
const basic = (pair) => ({ value: 'Basic ' + Buffer.from(pair).toString('base64') });
const bearer = (token) => ({ value: 'Bearer ' + token });

// The module's configuration: readers' credentials on (a KeyValueStore of their hashes) and
// the audit page's own grant.
function config(audit, extra = {}) {
    return {
        allowCidrs: [],
        auth: true,
        foldPrefixes: [],
        kvsId: 'kvs-1',
        audit: { prefix: '/_symdex/audit/', tokenSha256: '', cidrs: [], ...audit },
        ...extra,
    };
}

const withCookie = (uri, ip, value) => {
    const e = event(uri, ip);
    e.request.cookies = { symdex_audit: { value } };
    return e;
};

test('a symbol reader is refused the audit page, and still reads symbols', async () => {
    const handler = load(config({ tokenSha256: sha256(TOKEN) }), [READER, 'ci:s3cret']);
    for (const authorization of [bearer(READER), basic('ci:s3cret'), basic('x:' + READER)]) {
        const headers = () => ({ authorization: { ...authorization } });
        const symbols = await handler(event(KEY, '203.0.113.9', headers()));
        assert.equal(symbols.uri, KEY, `${authorization.value} reads symbols`);
        const page = await handler(event(PAGE, '203.0.113.9', headers()));
        assert.ok([401, 403].includes(page.statusCode), `${authorization.value}: ${page.statusCode}`);
    }
    // A reader's bearer token (what symbol clients send) is a 403, as is a wrong cookie.
    assert.equal((await handler(event(PAGE, '203.0.113.9', { authorization: bearer(READER) }))).statusCode, 403);
    assert.equal((await handler(withCookie(PAGE, '203.0.113.9', READER))).statusCode, 403);
});

test('the audit token opens the page: bearer, basic (a browser), cookie; a wrong one does not', async () => {
    const handler = load(config({ tokenSha256: sha256(TOKEN) }), [READER]);
    for (const headers of [{ authorization: bearer(TOKEN) }, { authorization: basic('anyone:' + TOKEN) }, { authorization: basic(':' + TOKEN) }]) {
        const label = headers.authorization.value;
        const out = await handler(event(PAGE, '203.0.113.9', headers));
        assert.equal(out.uri, PAGE, label);
        assert.equal(out.headers.authorization, undefined, 'not forwarded to the origin');
    }
    const cookie = await handler(withCookie(PAGE, '203.0.113.9', TOKEN));
    assert.equal(cookie.uri, PAGE);
    assert.equal(cookie.cookies.symdex_audit, undefined, 'not forwarded to the origin');
    // No token: a challenge, so a browser asks; a wrong one in a browser's prompt: asked again.
    for (const headers of [{}, { authorization: basic('anyone:wrong') }, { authorization: basic('anyone:') }]) {
        const out = await handler(event(PAGE, '203.0.113.9', headers));
        assert.equal(out.statusCode, 401, JSON.stringify(headers));
        assert.match(out.headers['www-authenticate'].value, /^Basic realm="symdex audit"/);
    }
    for (const headers of [{ authorization: bearer('wrong') }, { authorization: bearer(TOKEN.toUpperCase()) }]) {
        const out = await handler(event(PAGE, '203.0.113.9', headers));
        assert.equal(out.statusCode, 403, JSON.stringify(headers));
    }
    // The audit token is no reader's credential: it does not read symbols.
    const symbols = await handler(event(KEY, '203.0.113.9', { authorization: bearer(TOKEN) }));
    assert.equal(symbols.statusCode, 401);
});

test('the audit CIDR list opens the page to its addresses only', async () => {
    const handler = load(config({ cidrs: ['192.0.2.0/24', '2001:db8:a::/48'] }), [READER]);
    for (const ip of ['192.0.2.17', '2001:db8:a::5']) {
        assert.equal((await handler(event(PAGE, ip))).uri, PAGE, ip);
    }
    for (const ip of ['192.0.3.1', '2001:db8:b::5', '', 'not-an-ip']) {
        const out = await handler(event(PAGE, ip, { authorization: bearer(READER) }));
        assert.equal(out.statusCode, 403, ip || '(none)');
    }
});

test('token and CIDR list together: both must hold', async () => {
    const handler = load(config({ tokenSha256: sha256(TOKEN), cidrs: ['192.0.2.0/24'] }), [READER]);
    const good = () => ({ authorization: bearer(TOKEN) });
    assert.equal((await handler(event(PAGE, '192.0.2.1', good()))).uri, PAGE);
    assert.equal((await handler(event(PAGE, '198.51.100.1', good()))).statusCode, 403, 'outside the list');
    assert.equal((await handler(event(PAGE, '192.0.2.1'))).statusCode, 401, 'no token');
});

test('the reader allow-list still applies first', async () => {
    const handler = load(config({ tokenSha256: sha256(TOKEN) }, { allowCidrs: ['10.0.0.0/8'] }), [READER]);
    const good = () => ({ authorization: bearer(TOKEN) });
    assert.equal((await handler(event(PAGE, '8.8.8.8', good()))).statusCode, 403);
    assert.equal((await handler(event(PAGE, '10.1.1.1', good()))).uri, PAGE);
});

test('the folder is matched as the bucket reads it: escapes and dot segments do not get around it', async () => {
    const handler = load(config({ tokenSha256: sha256(TOKEN) }), [READER]);
    for (const uri of [
        '/_symdex/audit/',
        '/_symdex/audit/other.html',
        '/_symdex/%61udit/index.html',
        '/%5Fsymdex/audit/index.html',
        '/symbols/../_symdex/audit/index.html',
        '/_symdex/./audit/index.html',
        '/x/%2E%2E/_symdex/audit/index.html',
    ]) {
        const out = await handler(event(uri, '203.0.113.9', { authorization: bearer(READER) }));
        assert.equal(out.statusCode, 403, uri);
    }
    // Not the folder: the reader's rules (the private prefixes answer 404 behind the edge).
    const state = await handler(event('/_symdex/refs/x.json', '203.0.113.9', { authorization: bearer(READER) }));
    assert.equal(state.uri, '/_symdex/refs/x.json');
});

test('the page off (no audit configuration): its folder is like any private path', async () => {
    const handler = load({ allowCidrs: [], auth: false, foldPrefixes: [], kvsId: '', audit: null });
    assert.equal((await handler(event(PAGE, '203.0.113.9'))).uri, PAGE, 'to the unserved origin');
});

test('an audit configuration without a grant shows the page to nobody', async () => {
    const handler = load(config({}), [READER]);
    for (const headers of [{}, { authorization: bearer(READER) }, { authorization: bearer('') }]) {
        assert.equal((await handler(event(PAGE, '203.0.113.9', headers))).statusCode, 403);
    }
});
