// symdex access control at the edge: a CloudFront Function (cloudfront-js-2.0, viewer-request)
// in front of every cache behaviour, so it runs on cache hits too.
//
// - IP allow-list: CONFIG.allowCidrs (IPv4 and IPv6 CIDRs); other viewers get 403.
// - Credentials: with CONFIG.auth, a request needs `Authorization: Bearer <token>` or HTTP
//   basic credentials whose SHA-256 is a key of the KeyValueStore CONFIG.kvsId, as
//   `sha256:<hex>` (hashes only: the store never holds a secret). Basic credentials match
//   on `user:password`, or on the password alone (a token used as a password, whatever the
//   user name). Missing or wrong credentials get 401 and a basic challenge, so WinDbg and
//   Visual Studio prompt for them. The same rules as `symdex serve --auth-token-file`.
//
// - Case-insensitive lookups: a request under one of CONFIG.foldPrefixes (the SymSrv family's
//   prefixes, `/symbols/`, `/index2/`) is lowercased (ASCII), and the indexer stores those keys
//   lowercase (SYMDEX_FOLD_CASE), so `FOO.PDB/<GUID>/FOO.PDB` finds `foo.pdb/<guid>/foo.pdb`,
//   as SymSrv over IIS would. Other paths (debuginfod's source paths) keep their case, and
//   so do a build's sources under `/src/` (Source Link's and srcsrv's URLs: the paths the
//   compiler recorded, stored with their case), whatever the fold prefixes.
//
// - Sources (`/src/<product>/<build>/<path>`) are behind the same allow-list and credentials
//   as symbols: cdn.tf puts this function on their behaviour too.
//
// - The audit page (CONFIG.audit, the module's audit_page): the folder the sweeper writes it to
//   (CONFIG.audit.prefix, `/_symdex/audit/`) is shown to the audit grant alone, never on a
//   reader's credentials: the viewer's IP in CONFIG.audit.cidrs, and a token whose SHA-256 is
//   CONFIG.audit.tokenSha256 (hex), as `Authorization: Bearer <token>`, basic credentials
//   whose password is the token (what a browser asks for), or a `symdex_audit` cookie; each
//   part that is configured must hold. Refused: 403 (an IP outside the list, a wrong bearer
//   token or cookie, a reader's credentials), or 401 and a basic challenge when the token is
//   missing or wrong in basic credentials, so a browser asks (again). The path is matched as
//   the bucket reads it (percent escapes decoded, dot segments resolved). The reader
//   allow-list (CONFIG.allowCidrs) still applies first.
//
// - Compressed answers (CONFIG.encodings, the module's `compress`, on the serving bucket's own
//   behaviour only: cdn.tf deploys a second instance there): the indexer stores a zstd (and
//   optionally gzip) copy of a published key K at `_symdex/encoded/<encoding>/K`, carrying
//   its Content-Encoding and the raw size as `debuginfod-size`. A GET without `Range` picks
//   the encoding from Accept-Encoding (RFC 9110, 12.5.3: q-values, `identity`, `*`; the
//   highest weight among the enabled encodings, zstd before gzip at equal weight; no header:
//   identity, as SymSrv clients send none) and is sent to an origin group made for this
//   request: the origin `serving-<encoding>` (the bucket under origin path
//   `/_symdex/encoded/<encoding>`) first, the plain `serving` origin when it answers 403 or
//   404. CloudFront retries a failed-over request with the same URI, so a key without a copy
//   (small, incompressible, a zero-byte alias, not compressed yet) answers its raw bytes.
//   The choice is also the header `x-symdex-encoding` (zstd, gzip or identity), the only
//   viewer-dependent part of that behaviour's cache key, so the edge keeps one answer per
//   encoding. A ranged GET gets the raw bytes (a range of the compressed bytes is of no use
//   to a client that wants part of the file); a HEAD negotiates as its GET would, so its
//   headers are that GET's (RFC 9110, 9.3.2), Content-Encoding and Content-Length included.
//   A path with dot segments is not negotiated (the bucket could read it otherwise than
//   CloudFront matched it), and `/_symdex/encoded/` itself is never served to a viewer,
//   however spelt: a copy is read only through its key.
// - CORS (CONFIG.cors, the module's `cors`): a preflight OPTIONS from an allowed origin
//   (CONFIG.cors.origins, `*` for any) is answered 204 here, before credentials are asked
//   for (browsers send none in a preflight; the IP allow-list still applies), and every
//   answer made here (refusals too, so that a page can read a 401) names the origin and the
//   exposed headers; response.js adds them to the origin's answers.
//
// The request is otherwise passed on unchanged, except that the credentials are not forwarded
// to the origin.
//
// CloudFront Functions take at most 10 KB of code: the module deploys this file without its
// comment lines and indentation (access.tf), and edge/size.test.mjs checks the deployed size.
import cf from 'cloudfront';
import crypto from 'crypto';

// Replaced by the Terraform module (access.tf); the tests load the file with their own.
var CONFIG = { allowCidrs: [], auth: false, foldPrefixes: [], kvsId: '', audit: null, encodings: [], cors: null };

var ENCODED = '/_symdex/encoded/';
var SOURCES = '/src/';
var EXPOSE = 'X-Debuginfod-Size, X-Debuginfod-File, X-Debuginfod-Archive, Content-Encoding';
// The CORS headers of the answers made here for this request (set anew for every request).
var corsHeaders = {};

function parseIPv4(text) {
    var parts = text.split('.');
    if (parts.length !== 4) return null;
    var bytes = [];
    for (var i = 0; i < 4; i++) {
        if (!/^[0-9]{1,3}$/.test(parts[i])) return null;
        var n = parseInt(parts[i], 10);
        if (n > 255) return null;
        bytes.push(n);
    }
    return bytes;
}

function parseIPv6(text) {
    var halves = text.split('::');
    if (halves.length > 2) return null;
    function groups(part) {
        if (part === '') return [];
        var out = [];
        var items = part.split(':');
        for (var i = 0; i < items.length; i++) {
            var item = items[i];
            if (i === items.length - 1 && item.indexOf('.') >= 0) {
                var v4 = parseIPv4(item);
                if (!v4) return null;
                out.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
            } else {
                if (!/^[0-9a-fA-F]{1,4}$/.test(item)) return null;
                out.push(parseInt(item, 16));
            }
        }
        return out;
    }
    var head = groups(halves[0]);
    var tail = halves.length === 2 ? groups(halves[1]) : [];
    if (!head || !tail) return null;
    var missing = 8 - head.length - tail.length;
    if (halves.length === 2 ? missing < 1 : missing !== 0) return null;
    var all = head.slice();
    for (var z = 0; z < missing; z++) all.push(0);
    all = all.concat(tail);
    var bytes = [];
    all.forEach(function (g) { bytes.push(g >> 8, g & 255); });
    return bytes;
}

function parseIP(text) {
    return text.indexOf(':') >= 0 ? parseIPv6(text) : parseIPv4(text);
}

function inCidr(ip, cidr) {
    var slash = cidr.indexOf('/');
    var net = parseIP(slash >= 0 ? cidr.slice(0, slash) : cidr);
    if (!net || !ip || net.length !== ip.length) return false;
    var bits = slash >= 0 ? parseInt(cidr.slice(slash + 1), 10) : net.length * 8;
    if (!(bits >= 0 && bits <= net.length * 8)) return false;
    for (var i = 0; i < net.length && bits > 0; i++, bits -= 8) {
        var mask = bits >= 8 ? 255 : (255 << (8 - bits)) & 255;
        if ((ip[i] & mask) !== (net[i] & mask)) return false;
    }
    return true;
}

function ipIn(viewerIp, cidrs) {
    var ip = parseIP(viewerIp || '');
    return cidrs.some(function (cidr) { return inCidr(ip, cidr); });
}

function sha256(text) {
    return crypto.createHash('sha256').update(text).digest('hex');
}

async function known(kvs, secret) {
    try {
        await kvs.get('sha256:' + sha256(secret));
        return true;
    } catch (missing) {
        return false;
    }
}

async function authorized(header) {
    if (!header || !header.value) return false;
    var value = header.value.trim();
    var space = value.indexOf(' ');
    if (space < 0) return false;
    var scheme = value.slice(0, space).toLowerCase();
    var credentials = value.slice(space + 1).trim();
    var kvs = cf.kvs(CONFIG.kvsId);
    if (scheme === 'bearer') return credentials !== '' && known(kvs, credentials);
    if (scheme !== 'basic') return false;
    var decoded = Buffer.from(credentials, 'base64').toString('utf8');
    var colon = decoded.indexOf(':');
    if (colon < 0) return false;
    return (await known(kvs, decoded)) || known(kvs, decoded.slice(colon + 1));
}

// Percent escapes decoded (a malformed one left as it is).
function decoded(uri) {
    try {
        return decodeURIComponent(uri);
    } catch (malformed) {
        return uri;
    }
}

// The path as the bucket reads it: percent escapes decoded, `.` and `..` segments resolved.
function bucketPath(uri) {
    var out = [];
    decoded(uri).split('/').forEach(function (segment, i) {
        if (segment === '.' && i > 0) return;
        if (segment === '..' && i > 0) {
            if (out.length > 1) out.pop();
            return;
        }
        out.push(segment);
    });
    return out.join('/');
}

function underAudit(uri) {
    var prefix = CONFIG.audit.prefix;
    return uri.indexOf(prefix) === 0 || bucketPath(uri).indexOf(prefix) === 0;
}

// The token a request offers for the audit page, and how: [token, 'basic' | 'bearer' |
// 'cookie'], or null.
function auditToken(request) {
    var header = request.headers.authorization;
    var value = header && header.value ? header.value.trim() : '';
    var space = value.indexOf(' ');
    if (space > 0) {
        var scheme = value.slice(0, space).toLowerCase();
        var credentials = value.slice(space + 1).trim();
        if (scheme === 'bearer') return [credentials, 'bearer'];
        if (scheme === 'basic') {
            var decoded = Buffer.from(credentials, 'base64').toString('utf8');
            var colon = decoded.indexOf(':');
            return [colon < 0 ? '' : decoded.slice(colon + 1), 'basic'];
        }
    }
    var cookie = request.cookies && request.cookies.symdex_audit;
    if (cookie && cookie.value) return [cookie.value, 'cookie'];
    return null;
}

function auditChallenge() {
    return refuse(401, 'Unauthorized', {
        'www-authenticate': { value: 'Basic realm="symdex audit", charset="UTF-8"' },
        'cache-control': { value: 'no-store' },
    });
}

// The answer to a request under the audit page's folder: the request (credentials removed),
// or its refusal. Without a grant configured (the module refuses that plan), nobody.
function auditAnswer(request, viewerIp) {
    var audit = CONFIG.audit;
    var cidrs = audit.cidrs || [];
    if (!audit.tokenSha256 && cidrs.length === 0) return refuse(403, 'Forbidden');
    if (cidrs.length > 0 && !ipIn(viewerIp, cidrs)) return refuse(403, 'Forbidden');
    if (audit.tokenSha256) {
        var offered = auditToken(request);
        if (!offered) return auditChallenge();
        if (offered[0] === '' || sha256(offered[0]) !== audit.tokenSha256) {
            return offered[1] === 'basic' ? auditChallenge() : refuse(403, 'Forbidden');
        }
    }
    delete request.headers.authorization;
    if (request.cookies) delete request.cookies.symdex_audit;
    return request;
}

// An answer made at the edge, with this request's CORS headers.
function answer(statusCode, statusDescription, headers) {
    headers = headers || {};
    for (var name in corsHeaders) headers[name] = corsHeaders[name];
    return { statusCode: statusCode, statusDescription: statusDescription, headers: headers };
}

var refuse = answer;

// The CORS headers of an answer to `request`: the allowed origin (any, or the viewer's when
// listed) and what a page may read; the answer depends on the Origin unless any is allowed.
function corsFor(request) {
    var origins = CONFIG.cors.origins;
    var origin = request.headers.origin;
    var allowed = origins.indexOf('*') >= 0 ? '*' : origin && origins.indexOf(origin.value.toLowerCase()) >= 0 && origin.value;
    var headers = allowed ? {
        'access-control-allow-origin': { value: allowed },
        'access-control-expose-headers': { value: EXPOSE },
    } : {};
    if (allowed !== '*') headers.vary = { value: 'Origin' };
    return headers;
}

// Accept-Encoding's weights: coding (lowercase) -> q, its first mention counting; an element
// whose q is malformed is left out (RFC 9110, 12.4.2: at most three decimals, at most 1).
function weights(header) {
    var q = {};
    var values = header.multiValue ? header.multiValue.map(function (v) { return v.value; }) : [header.value];
    values.join(',').split(',').forEach(function (element) {
        var params = element.split(';');
        var coding = params[0].trim().toLowerCase();
        var weight = 1;
        for (var i = 1; i < params.length; i++) {
            var param = params[i].trim();
            if (/^q=/i.test(param)) weight = /^q=(0(\.\d{0,3})?|1(\.0{0,3})?)$/i.test(param) ? parseFloat(param.slice(2)) : -1;
        }
        // RFC 9110, 8.4.1.3: x-gzip is gzip.
        if (coding === 'x-gzip') coding = 'gzip';
        if (coding !== '' && weight >= 0 && !(coding in q)) q[coding] = weight;
    });
    return q;
}

// The encoding to answer with: one of CONFIG.encodings (the module lists them in its order of
// preference, zstd first) or 'identity'.
function encodingFor(request) {
    var header = request.headers['accept-encoding'];
    if (!header || (request.method !== 'GET' && request.method !== 'HEAD') || request.headers.range) {
        return 'identity';
    }
    var q = weights(header);
    var best = 'identity';
    var bestWeight = 0;
    CONFIG.encodings.forEach(function (encoding) {
        var weight = encoding in q ? q[encoding] : '*' in q ? q['*'] : 0;
        if (weight > bestWeight) {
            best = encoding;
            bestWeight = weight;
        }
    });
    // A viewer that weighs identity above every encoding it accepts gets identity.
    return 'identity' in q && q.identity > bestWeight ? 'identity' : best;
}

// The compressed copy, or the raw key where there is none (the header comment says how).
function negotiate(request) {
    var encoding = 'identity';
    if (bucketPath(request.uri) === decoded(request.uri)) encoding = encodingFor(request);
    request.headers['x-symdex-encoding'] = { value: encoding };
    if (encoding === 'identity') return;
    cf.createRequestOriginGroup({
        originIds: [{ originId: 'serving-' + encoding }, { originId: 'serving' }],
        failoverCriteria: { statusCodes: [403, 404] },
    });
}

async function handler(event) {
    var request = event.request;
    corsHeaders = CONFIG.cors ? corsFor(request) : {};
    if (CONFIG.allowCidrs.length > 0 && !ipIn(event.viewer && event.viewer.ip, CONFIG.allowCidrs)) {
        return refuse(403, 'Forbidden');
    }
    if (CONFIG.cors && request.method === 'OPTIONS') {
        if (!corsHeaders['access-control-allow-origin']) return refuse(403, 'Forbidden');
        return answer(204, 'No Content', {
            'access-control-allow-methods': { value: 'GET, HEAD, OPTIONS' },
            'access-control-allow-headers': { value: 'Authorization, Range, X-DEBUGINFOD-MAXSIZE' },
            'access-control-max-age': { value: '86400' },
        });
    }
    if (CONFIG.audit && underAudit(request.uri)) {
        return auditAnswer(request, event.viewer && event.viewer.ip);
    }
    if (CONFIG.auth) {
        if (!(await authorized(request.headers.authorization))) {
            return refuse(401, 'Unauthorized', {
                'www-authenticate': { value: 'Basic realm="symbols"' },
            });
        }
        delete request.headers.authorization;
    }
    if (bucketPath(request.uri).indexOf(ENCODED) === 0) {
        return refuse(404, 'Not Found');
    }
    var fold = bucketPath(request.uri).indexOf(SOURCES) === 0 ? [] : CONFIG.foldPrefixes;
    for (var i = 0; i < fold.length; i++) {
        if (request.uri.indexOf(fold[i]) === 0) {
            // ASCII only, as the indexer folds (percent escapes stay escapes).
            request.uri = request.uri.replace(/[A-Z]+/g, function (s) {
                return s.toLowerCase();
            });
            break;
        }
    }
    if (CONFIG.encodings.length > 0) negotiate(request);
    return request;
}
