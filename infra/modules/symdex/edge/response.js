// symdex at the edge, on the way out: a CloudFront Function (cloudfront-js-2.0,
// viewer-response) on every cache behaviour.
//
// - Aliases: with SYMDEX_ALIASES=redirect an artifact is stored once, and its other keys are
//   zero-byte objects carrying `x-amz-website-redirect-location` (what the S3 website endpoint
//   answers with a 301). The REST origin behind CloudFront returns them as they are, so this
//   function answers the same 301 to the key holding the bytes; debuginfod clients (curl),
//   SymSrv, Microsoft.SymbolStore and symbolicator follow redirects.
//   Only a path of this same site is honoured (see SAME_SITE), and only where the serving
//   bucket can have answered (CONFIG.redirects): an upstream's answer can carry the header as
//   well, and a viewer-response event does not say which origin answered (nor can any header
//   say it: an upstream can send every header S3 sends). So the module deploys this source
//   once per kind of behaviour, with its CONFIG line replaced (cdn.tf):
//   - the serving bucket's behaviours, and an upstream's whose path holds keys of the
//     bucket's layouts (symbols/ in front of msdl, the default behaviour in front of a
//     debuginfod server): redirects honoured, same-site only, for the deployment's own
//     aliases there. What an upstream gains there is a redirect to another path of this
//     distribution, read under the same access control: nothing it could not do by answering
//     that path's bytes itself.
//   - an upstream's behaviour whose path holds no layout's keys: every answer there is the
//     upstream's (the bucket has nothing to answer with), and no redirect is honoured.
//   A redirect that is not honoured is answered 502: the answer claims to be an alias, so its
//   (zero-byte) body is not the file the key names.
//   CONFIG.maxAge is how long viewers may keep the 301: a day for the bucket's aliases
//   (immutable), no longer than the edge keeps an upstream's answer on an upstream's path.
// - debuginfod's response headers: `X-Debuginfod-Size` (the whole file's size, also on a
//   ranged GET: the client's progress) and `X-Debuginfod-File`. A static bucket can carry
//   them only as user metadata, which the indexer writes on every `buildid/` object and S3
//   returns as `x-amz-meta-debuginfod-*`: they get the names debuginfod servers use, the same
//   headers `symdex serve` sends.
// - Compressed answers (access.js says how a request gets one): the stored copy carries its
//   Content-Encoding and the raw size as `debuginfod-size`, so both pass as they are (the
//   size renamed like any other's). On the behaviour that negotiates (CONFIG.vary) every
//   answer of a key says `Vary: Accept-Encoding`, so that caches after the edge keep one
//   answer per encoding too.
// - CORS (CONFIG.cors): the allowed origin and the headers a page may read, on every answer.
// - symdex's own content identity, and the raw object's named by a copy, are not shown to
//   viewers.

// Replaced by the Terraform module (cdn.tf), on every behaviour; the tests load the file with
// their own.
var CONFIG = { redirects: true, maxAge: 86400, vary: false, cors: null };

var EXPOSE = 'X-Debuginfod-Size, X-Debuginfod-File, X-Debuginfod-Archive, Content-Encoding';

// One '/' followed by neither '/' nor '\': clients read `//evil.example/a.pdb` and
// `/\evil.example` (WHATWG URL parsing treats '\' as '/') as another host.
var SAME_SITE = /^\/[^\/\\]/;
// URL parsers drop tabs and newlines anywhere (`/<TAB>/evil.example` is `//evil.example`), and
// no key holds a control character (KEYS.md, key hygiene).
var CONTROL = /[\x00-\x1f\x7f]/;

var RENAMED = {
    'x-amz-meta-debuginfod-size': 'x-debuginfod-size',
    'x-amz-meta-debuginfod-file': 'x-debuginfod-file',
};
var INTERNAL = [
    'x-amz-meta-symdex-content-etag',
    'x-amz-meta-symdex-content-size',
    'x-amz-meta-symdex-raw-etag',
    'x-amz-meta-symdex-raw-size',
];

function vary(headers, name) {
    headers.vary = { value: headers.vary ? headers.vary.value + ', ' + name : name };
}

// The CORS headers of an answer to `request`, added to `headers`.
function cors(request, headers) {
    var origins = CONFIG.cors.origins;
    var origin = request.headers.origin;
    var allowed = origins.indexOf('*') >= 0 ? '*' : origin && origins.indexOf(origin.value.toLowerCase()) >= 0 ? origin.value : null;
    if (allowed) {
        headers['access-control-allow-origin'] = { value: allowed };
        headers['access-control-expose-headers'] = { value: EXPOSE };
    }
    if (allowed !== '*') vary(headers, 'Origin');
    return headers;
}

function handler(event) {
    var response = event.response;
    var headers = response.headers;
    var redirect = headers['x-amz-website-redirect-location'];
    if (redirect) {
        var target = redirect.value;
        // The target's key, as a path of this same distribution.
        var answer = CONFIG.redirects && SAME_SITE.test(target) && !CONTROL.test(target) ? {
            statusCode: 301,
            statusDescription: 'Moved Permanently',
            headers: {
                location: { value: target },
                'cache-control': { value: 'max-age=' + CONFIG.maxAge },
            },
        } : {
            statusCode: 502,
            statusDescription: 'Bad Gateway',
            headers: { 'cache-control': { value: 'no-store' } },
        };
        // A browser follows the redirect only if it may read it.
        if (CONFIG.cors) cors(event.request, answer.headers);
        return answer;
    }
    for (var from in RENAMED) {
        if (headers[from]) {
            headers[RENAMED[from]] = { value: headers[from].value };
            delete headers[from];
        }
    }
    for (var i = 0; i < INTERNAL.length; i++) {
        delete headers[INTERNAL[i]];
    }
    var status = response.statusCode;
    if (CONFIG.vary && (status === 200 || status === 206 || status === 304)) vary(headers, 'Accept-Encoding');
    if (CONFIG.cors) cors(event.request, headers);
    return response;
}
