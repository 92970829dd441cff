// symdex's debuginfod response headers at the edge: a CloudFront Function (cloudfront-js-2.0,
// viewer-response) on the serving bucket's behaviour.
//
// debuginfod clients read `X-Debuginfod-Size` (the whole file's size, also on a ranged GET:
// their progress bar) and `X-Debuginfod-File`. A static bucket can carry them only as user
// metadata, which the indexer writes on every `buildid/` object and S3 returns as
// `x-amz-meta-debuginfod-*`: this function gives them the names debuginfod servers use, the
// same headers `symdex serve` sends. symdex's own content identity is not shown to viewers.
var RENAMED = {
    'x-amz-meta-debuginfod-size': 'x-debuginfod-size',
    'x-amz-meta-debuginfod-file': 'x-debuginfod-file',
};

function handler(event) {
    var response = event.response;
    var headers = response.headers;
    for (var from in RENAMED) {
        if (headers[from]) {
            headers[RENAMED[from]] = { value: headers[from].value };
            delete headers[from];
        }
    }
    delete headers['x-amz-meta-symdex-content-etag'];
    return response;
}
