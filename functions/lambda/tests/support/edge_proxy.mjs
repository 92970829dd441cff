// A stand-in for CloudFront in front of the serving bucket, for tests: forwards GET/HEAD to
// moto_server (path-style, anonymous), runs the module's viewer-response function
// (infra/modules/symdex/edge/response.js, loaded from its source as in its node tests) on the
// origin's answer, and sends what the function returns. Prints `listening <port>`, then one
// `<status> <path>` line per request.
//
//   node edge_proxy.mjs <origin base URL, e.g. http://127.0.0.1:5000/serving>
import http from 'node:http';
import { readFileSync } from 'node:fs';

const origin = process.argv[2];
const source = readFileSync(
    new URL('../../../../infra/modules/symdex/edge/response.js', import.meta.url),
    'utf8',
);
const handler = new Function(`${source}\nreturn handler;`)();

const server = http.createServer(async (req, res) => {
    const answer = await fetch(origin + req.url, { method: req.method, redirect: 'manual' });
    const headers = {};
    answer.headers.forEach((value, name) => {
        headers[name] = { value };
    });
    const out = handler({
        version: '1.0',
        context: { eventType: 'viewer-response' },
        viewer: { ip: req.socket.remoteAddress },
        request: { method: req.method, uri: req.url, querystring: {}, headers: {}, cookies: {} },
        response: { statusCode: answer.status, statusDescription: '', headers, cookies: {} },
    });
    const sent = {};
    for (const [name, h] of Object.entries(out.headers || {})) {
        if (!['content-length', 'transfer-encoding', 'connection'].includes(name)) {
            sent[name] = h.value;
        }
    }
    const body = out === answer || out.statusCode === answer.status
        ? Buffer.from(await answer.arrayBuffer())
        : Buffer.alloc(0);
    sent['content-length'] = String(req.method === 'HEAD' ? 0 : body.length);
    // Logged before the answer goes out: once a client has it, its line is in the pipe.
    console.log(`${out.statusCode} ${req.url}`);
    res.writeHead(out.statusCode, sent);
    res.end(req.method === 'HEAD' ? undefined : body);
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
