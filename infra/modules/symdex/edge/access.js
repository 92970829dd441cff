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
//   as SymSrv over IIS would. Other paths (debuginfod's source paths) keep their case.
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
// The request is otherwise passed on unchanged, except that the credentials are not forwarded
// to the origin.
import cf from 'cloudfront';
import crypto from 'crypto';

// Replaced by the Terraform module (access.tf); the tests load the file with their own.
var CONFIG = { allowCidrs: [], auth: false, foldPrefixes: [], kvsId: '', audit: null };

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

// The path as the bucket reads it: percent escapes decoded (a malformed one left as it is),
// `.` and `..` segments resolved.
function bucketPath(uri) {
    var decoded = uri;
    try {
        decoded = decodeURIComponent(uri);
    } catch (malformed) {
        decoded = uri;
    }
    var out = [];
    decoded.split('/').forEach(function (segment, i) {
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

function refuse(statusCode, statusDescription, headers) {
    return { statusCode: statusCode, statusDescription: statusDescription, headers: headers || {} };
}

async function handler(event) {
    var request = event.request;
    if (CONFIG.allowCidrs.length > 0 && !ipIn(event.viewer && event.viewer.ip, CONFIG.allowCidrs)) {
        return refuse(403, 'Forbidden');
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
    for (var i = 0; i < CONFIG.foldPrefixes.length; i++) {
        if (request.uri.indexOf(CONFIG.foldPrefixes[i]) === 0) {
            // ASCII only, as the indexer folds (percent escapes stay escapes).
            request.uri = request.uri.replace(/[A-Z]+/g, function (s) {
                return s.toLowerCase();
            });
            break;
        }
    }
    return request;
}
