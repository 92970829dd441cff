// symdex at the edge, on the way out: a CloudFront Function (cloudfront-js-2.0,
// viewer-response) on the serving bucket's behaviour.
//
// - Aliases: with SYMDEX_ALIASES=redirect an artifact is stored once, and its other keys are
//   zero-byte objects carrying `x-amz-website-redirect-location` (what the S3 website endpoint
//   answers with a 301). The REST origin behind CloudFront returns them as they are, so this
//   function answers the same 301 to the key holding the bytes; debuginfod clients (curl),
//   SymSrv, Microsoft.SymbolStore and symbolicator follow redirects.
// - debuginfod's response headers: `X-Debuginfod-Size` (the whole file's size, also on a
//   ranged GET: the client's progress) and `X-Debuginfod-File`. A static bucket can carry
//   them only as user metadata, which the indexer writes on every `buildid/` object and S3
//   returns as `x-amz-meta-debuginfod-*`: they get the names debuginfod servers use, the same
//   headers `symdex serve` sends.
// - symdex's own content identity is not shown to viewers.
var RENAMED = {
    'x-amz-meta-debuginfod-size': 'x-debuginfod-size',
    'x-amz-meta-debuginfod-file': 'x-debuginfod-file',
};
var INTERNAL = ['x-amz-meta-symdex-content-etag', 'x-amz-meta-symdex-content-size'];

function handler(event) {
    var response = event.response;
    var headers = response.headers;
    var redirect = headers['x-amz-website-redirect-location'];
    if (redirect && redirect.value.charAt(0) === '/') {
        // The target's key, as a path of this same distribution.
        return {
            statusCode: 301,
            statusDescription: 'Moved Permanently',
            headers: {
                location: { value: redirect.value },
                'cache-control': { value: 'max-age=86400' },
            },
        };
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
    return response;
}
