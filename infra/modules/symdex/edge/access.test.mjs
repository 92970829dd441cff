// node --test: the access function as CloudFront runs it (loaded by harness.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { event, load } from './harness.mjs';

const basic = (pair) => ({ value: 'Basic ' + Buffer.from(pair).toString('base64') });
const KEY = '/symbols/Foo.PDB/ABCDEF0123456789ABCDEF01234567891/Foo.PDB';

test('no configuration: every request passes unchanged', async () => {
    const handler = load({ allowCidrs: [], auth: false, foldPrefixes: [], kvsId: '' });
    const e = event(KEY, '203.0.113.9');
    assert.deepEqual(await handler(e), e.request);
    assert.equal((await handler(e)).uri, KEY, 'case and path untouched');
});

test('IP allow-list: IPv4 and IPv6 CIDRs', async () => {
    const handler = load({
        allowCidrs: ['10.0.0.0/8', '192.168.1.17/32', '2001:db8:abcd::/48', '::ffff:198.51.100.0/120'],
        auth: false,
        foldPrefixes: [],
        kvsId: '',
    });
    for (const ip of ['10.1.2.3', '192.168.1.17', '2001:db8:abcd:12::1', '::ffff:198.51.100.77']) {
        const out = await handler(event(KEY, ip));
        assert.equal(out.uri, KEY, `${ip} allowed`);
    }
    for (const ip of ['11.0.0.1', '192.168.1.18', '2001:db8:abce::1', '', 'not-an-ip', '1.2.3', '1:2:3:4:5:6:7:8:9']) {
        const out = await handler(event(KEY, ip));
        assert.equal(out.statusCode, 403, `${ip || '(none)'} denied`);
    }
});

test('tokens and basic credentials against hashed keys', async () => {
    const handler = load({ allowCidrs: [], auth: true, foldPrefixes: [], kvsId: 'kvs-1' }, ['tok-123', 'ci:s3cret']);
    const allowed = [
        { value: 'Bearer tok-123' },
        { value: 'bearer tok-123' },
        basic('ci:s3cret'),
        basic('anyone:tok-123'),
    ];
    for (const authorization of allowed) {
        const out = await handler(event(KEY, '203.0.113.9', { authorization }));
        assert.equal(out.uri, KEY, authorization.value);
        assert.equal(out.headers.authorization, undefined, 'not forwarded to the origin');
    }
    const denied = [
        undefined,
        { value: '' },
        { value: 'Bearer' },
        { value: 'Bearer wrong' },
        { value: 'Digest tok-123' },
        basic('other:s3cret'),
        basic('no-colon'),
        { value: 'Basic %%%' },
    ];
    for (const authorization of denied) {
        const headers = authorization ? { authorization } : {};
        const out = await handler(event(KEY, '203.0.113.9', headers));
        assert.equal(out.statusCode, 401, JSON.stringify(authorization));
        assert.match(out.headers['www-authenticate'].value, /^Basic realm=/);
    }
});

test('both: the IP is checked first, then the credentials', async () => {
    const handler = load({ allowCidrs: ['10.0.0.0/8'], auth: true, foldPrefixes: [], kvsId: 'kvs-1' }, ['tok']);
    const good = { authorization: { value: 'Bearer tok' } };
    assert.equal((await handler(event(KEY, '8.8.8.8', good))).statusCode, 403);
    assert.equal((await handler(event(KEY, '10.0.0.1', {}))).statusCode, 401);
    assert.equal((await handler(event(KEY, '10.0.0.1', good))).uri, KEY);
});

test('case-insensitive lookups: the SymSrv prefixes are lowercased, other paths keep their case', async () => {
    const handler = load({ allowCidrs: [], auth: false, foldPrefixes: ['/symbols/', '/index2/'], kvsId: '' });
    for (const [uri, want] of [
        [KEY, '/symbols/foo.pdb/abcdef0123456789abcdef01234567891/foo.pdb'],
        ['/symbols/FOO.PDB/ABCDEF0123456789ABCDEF01234567891/FOO.PDB', '/symbols/foo.pdb/abcdef0123456789abcdef01234567891/foo.pdb'],
        ['/index2/Fo/Foo.exe/542D574Ec2000/Foo.exe', '/index2/fo/foo.exe/542d574ec2000/foo.exe'],
        ['/symbols/A%2BB.pdb/X/A%2BB.pdb', '/symbols/a%2bb.pdb/x/a%2bb.pdb'],
        ['/buildid/ab12/source/Home/CI/Main.c', '/buildid/ab12/source/Home/CI/Main.c'],
        ['/unified/ab/12/debuginfo', '/unified/ab/12/debuginfo'],
    ]) {
        const out = await handler(event(uri, '203.0.113.9'));
        assert.equal(out.uri, want, uri);
    }
});

test('sources under /src/: the same IP allow-list and credentials as symbols, and never folded', async () => {
    const SOURCE = '/src/App/1.2.3/Src/Main.CPP';
    const handler = load(
        { allowCidrs: ['10.0.0.0/8', '2001:db8::/32'], auth: true, foldPrefixes: ['/symbols/', '/index2/'], kvsId: 'kvs-1' },
        ['tok-123', 'ci:s3cret'],
    );
    for (const uri of [KEY, SOURCE]) {
        for (const [ip, authorization] of [
            ['10.1.2.3', { value: 'Bearer tok-123' }],
            ['2001:db8::7', basic('ci:s3cret')],
            ['10.9.9.9', basic('anyone:tok-123')],
        ]) {
            const out = await handler(event(uri, ip, { authorization }));
            assert.equal(out.statusCode, undefined, `${uri} from ${ip} allowed`);
            assert.equal(out.headers.authorization, undefined, 'not forwarded to the origin');
        }
        for (const ip of ['8.8.8.8', '2001:db9::1', '']) {
            const out = await handler(event(uri, ip, { authorization: { value: 'Bearer tok-123' } }));
            assert.equal(out.statusCode, 403, `${uri} from ${ip || '(none)'} denied`);
        }
        for (const authorization of [undefined, { value: 'Bearer wrong' }, basic('ci:wrong')]) {
            const headers = authorization ? { authorization } : {};
            const out = await handler(event(uri, '10.1.2.3', headers));
            assert.equal(out.statusCode, 401, `${uri}: ${JSON.stringify(authorization)}`);
            assert.match(out.headers['www-authenticate'].value, /^Basic realm=/);
        }
    }
    // Source paths keep their case, even were a fold prefix configured over them, and however
    // the path reaches /src/; symbols still fold.
    // (A fresh header set each time: the function deletes the credentials it took.)
    const good = () => ({ authorization: { value: 'Bearer tok-123' } });
    const folding = load({ allowCidrs: [], auth: false, foldPrefixes: ['/symbols/', '/src/'], kvsId: '' });
    for (const uri of [SOURCE, '/symbols/../src/App/1/A.cs', '/src/App/1/Dir%20X/B.CS']) {
        assert.equal((await folding(event(uri, '203.0.113.9', good()))).uri, uri, uri);
    }
    assert.equal(
        (await handler(event(SOURCE, '10.1.2.3', good()))).uri,
        SOURCE,
    );
    assert.equal(
        (await handler(event(KEY, '10.1.2.3', good()))).uri,
        KEY.toLowerCase(),
    );
});
