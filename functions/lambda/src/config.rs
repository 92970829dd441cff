//! Configuration by environment variables (documented in docs/lambda.md).

use std::collections::BTreeMap;

use symdex_shared::audit_page::DEPLOYED_PREFIX;
use symdex_shared::encoded::Encodings;
use symdex_shared::pipeline::{default_prefixes, Config};
use symdex_shared::storage::s3::DEFAULT_MULTIPART_THRESHOLD;
use symdex_shared::storage::STATE_PREFIX;
use symdex_shared::Layout;

#[derive(Debug, Clone)]
pub struct LambdaConfig {
    /// How far an archive may expand: SYMDEX_ARCHIVE_MAX_ENTRY_SIZE, _MAX_EXPANDED, _MAX_RATIO,
    /// _MAX_ENTRIES (defaults as the CLI's).
    pub archive_limits: symdex_shared::archive::Limits,
    /// SYMDEX_SERVING_BUCKET (required): where keys, references and the manifest go.
    pub serving_bucket: String,
    /// SYMDEX_INGEST_BUCKET (the module sets it): the only bucket whose events are indexed or
    /// removed; an event naming another is recorded as rejected and acknowledged. Unset: any
    /// bucket but the serving bucket.
    pub ingest_bucket: Option<String>,
    /// The pipeline: SYMDEX_LAYOUTS (comma list, default all), SYMDEX_MANIFEST_PREFIX
    /// (default `_manifest`), SYMDEX_PREFIX_<LAYOUT> (e.g. SYMDEX_PREFIX_UNIFIED=sentry/),
    /// SYMDEX_OVERWRITE (`true` replaces differing content instead of recording a conflict,
    /// where only uploads of the upload's own product hold it: refs/overwrites.rs; refused
    /// without SYMDEX_PRODUCT_PREFIXES, `refuse_unguarded_overwrite`),
    /// SYMDEX_SOURCE_JOINS (`false`: debug files and sources are not joined),
    /// SYMDEX_COMPRESS (compressed copies' encodings: `zstd`, `gzip`, both, or `none`).
    pub pipeline: Config,
    /// SYMDEX_MULTIPART_THRESHOLD: bytes from which copies use UploadPartCopy (default 5 GiB).
    pub multipart_threshold: u64,
    /// SYMDEX_SOURCE_EXTENSIONS: ingest keys with these extensions are keyed as sources.
    pub source_extensions: Vec<String>,
    /// SYMDEX_SOURCE_PREFIX: ingest keys under this prefix are keyed as sources.
    pub source_prefix: Option<String>,
    /// SYMDEX_CONCURRENCY: messages of one SQS batch processed at once (default 4).
    pub concurrency: usize,
    /// SYMDEX_PRODUCT_PREFIXES=true: an upload's first key segment is its product (CI roles
    /// may only write under their own, the module's `ci_upload_policies`); a `product`
    /// metadata value naming another is rejected.
    pub product_prefixes: bool,
    /// SYMDEX_SWEEP_MAX_UPLOADS: upload records the sweeper examines per run (default 2000).
    pub sweep_max_uploads: usize,
    /// SYMDEX_SWEEP_DELETE_INGEST (default true): the sweeper deletes the ingest object of
    /// each upload it expires (that version, or that content when unversioned).
    pub sweep_delete_ingest: bool,
    /// SYMDEX_ALIASES=redirect: an artifact's keys after the first are zero-byte redirects to
    /// it (one stored copy; needs the CDN's viewer-response function or the S3 website
    /// endpoint in front). `copy` (default): every key a full copy, for the REST endpoint.
    pub redirect_aliases: bool,
    /// SYMDEX_CONDITIONAL_COPY (default true): the buckets honour CopyObject's conditions,
    /// `If-None-Match` and `x-amz-copy-source-if-match`, as Amazon S3 does. `false` for
    /// S3-compatible servers that copy over an existing object anyway (moto_server): then a
    /// fresh key's first copy is made under a reference record's lease, and the ingest
    /// object's liveness is asked by a HEAD rather than answered by that copy (made from the
    /// current object only where the source condition holds): three requests more.
    pub conditional_copies: bool,
    /// Memory the archive decoders of the messages in flight may take at once (archive
    /// memory.rs: a walk over it waits for the decoders before it): SYMDEX_DECODER_MEMORY_MB,
    /// by default half the function's memory (AWS_LAMBDA_FUNCTION_MEMORY_SIZE, which Lambda
    /// sets); unbounded where neither is set (each decoder then only within its own limit).
    pub decoder_memory: Option<&'static symdex_shared::archive::DecoderMemory>,
    /// SYMDEX_AUDIT_PAGE (default false): after each sweep, the sweeper writes the audit page
    /// (`symdex audit`'s) to the serving bucket at `_symdex/audit/index.html`, for the edge to
    /// show to the module's audit grant alone (audit_page.rs).
    pub audit_page: bool,
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Where the configuration is read from: a variable's value by its name.
type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A number, `default` when unset.
fn number(lookup: Lookup<'_>, name: &str, default: u64) -> Result<u64, String> {
    match lookup(name) {
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{name}={v:?} is not a number")),
        None => Ok(default),
    }
}

/// A flag, `default` when unset or empty. A value that says neither is refused (the function
/// fails to start, saying why): read as false, `True` turned off what defaults on
/// (conditional copies, source joins).
fn flag(lookup: Lookup<'_>, name: &str, default: bool) -> Result<bool, String> {
    let Some(value) = lookup(name) else {
        return Ok(default);
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "" => Ok(default),
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "{name}={value:?}: expected true or false (or 1/0, yes/no, on/off)"
        )),
    }
}

/// SYMDEX_LAYOUTS and SYMDEX_PREFIX_<LAYOUT>.
fn layouts_and_prefixes(
    lookup: Lookup<'_>,
) -> Result<(Vec<Layout>, BTreeMap<Layout, String>), String> {
    let layouts =
        match lookup("SYMDEX_LAYOUTS").filter(|s| !s.trim().is_empty() && s.trim() != "all") {
            Some(value) => list(&value)
                .iter()
                .map(|l| l.parse())
                .collect::<Result<Vec<Layout>, _>>()?,
            None => Layout::ALL.to_vec(),
        };
    let mut prefixes: BTreeMap<Layout, String> = default_prefixes();
    for layout in Layout::ALL {
        let var = format!("SYMDEX_PREFIX_{}", layout.as_str().to_ascii_uppercase());
        if let Some(mut prefix) = lookup(&var) {
            prefix = prefix.trim_start_matches('/').to_string();
            if !prefix.is_empty() && !prefix.ends_with('/') {
                prefix.push('/');
            }
            prefixes.insert(layout, prefix);
        }
    }
    Ok((layouts, prefixes))
}

/// The pipeline's settings (see [`LambdaConfig::pipeline`]).
fn pipeline(lookup: Lookup<'_>) -> Result<Config, String> {
    let (layouts, prefixes) = layouts_and_prefixes(lookup)?;
    let manifest_prefix = lookup("SYMDEX_MANIFEST_PREFIX")
        .map(|p| p.trim_matches('/').to_string())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "_manifest".to_string());
    // A lease must outlast the function's timeout (15 minutes at most) plus clock skew.
    let lease = symdex_shared::refs::LeasePolicy {
        duration: std::time::Duration::from_secs(number(lookup, "SYMDEX_LEASE_SECONDS", 960)?),
        ..Default::default()
    };
    // SYMDEX_RETENTION: channel -> retention (retention.rs), stamped on new uploads.
    let retention = match lookup("SYMDEX_RETENTION") {
        Some(policy) => policy
            .parse()
            .map_err(|e| format!("SYMDEX_RETENTION: {e}"))?,
        None => Default::default(),
    };
    refuse_private_prefixes(&prefixes, &manifest_prefix)?;
    Ok(Config {
        layouts,
        prefixes,
        overwrite: flag(lookup, "SYMDEX_OVERWRITE", false)?,
        // SYMDEX_RECHECK: a redelivery checks every key again (see Config::recheck).
        recheck: flag(lookup, "SYMDEX_RECHECK", false)?,
        manifest_prefix,
        gzip_manifest: true,
        lease,
        retention,
        // SYMDEX_FOLD_CASE: the CDN lowercases requests for the SymSrv family.
        fold_case: flag(lookup, "SYMDEX_FOLD_CASE", false)?,
        // SYMDEX_SOURCE_JOINS=false: nobody uploads sources (Config::source_joins).
        source_joins: flag(lookup, "SYMDEX_SOURCE_JOINS", true)?,
        // SYMDEX_REFUSE_SRCSRV_COMMANDS: reject PDBs whose srcsrv stream runs commands.
        refuse_srcsrv_commands: flag(lookup, "SYMDEX_REFUSE_SRCSRV_COMMANDS", false)?,
        // SYMDEX_COMPRESS: the encodings of compressed copies (`zstd`, `gzip`, `zstd,gzip`);
        // unset or `none`, no copies (the module sets `zstd` by default).
        compress: match lookup("SYMDEX_COMPRESS") {
            Some(value) => value.parse().map_err(|e| format!("SYMDEX_COMPRESS: {e}"))?,
            None => Encodings::none(),
        },
        handed: Default::default(),
    })
}

/// A layout's prefix under symdex's own records (`_symdex/`: references, the sweeper's state,
/// the audit page) or the manifest is refused, as the Terraform module refuses it: keys
/// published there would never be served, and could land on a record or on the audit page
/// (shown to the audit grant alone). Likewise a manifest under the audit page's folder.
fn refuse_private_prefixes(
    prefixes: &BTreeMap<Layout, String>,
    manifest_prefix: &str,
) -> Result<(), String> {
    let private = [format!("{STATE_PREFIX}/"), format!("{manifest_prefix}/")];
    for (layout, prefix) in prefixes {
        if let Some(under) = private.iter().find(|p| prefix.starts_with(p.as_str())) {
            let var = format!("SYMDEX_PREFIX_{}", layout.as_str().to_ascii_uppercase());
            return Err(format!(
                "{var}={prefix:?}: a layout's prefix may not lie under the private {under}"
            ));
        }
    }
    if format!("{manifest_prefix}/").starts_with(DEPLOYED_PREFIX) {
        return Err(format!(
            "SYMDEX_MANIFEST_PREFIX={manifest_prefix:?}: under the audit page's {DEPLOYED_PREFIX}"
        ));
    }
    Ok(())
}

/// SYMDEX_OVERWRITE replaces only bytes of the upload's own product (refs/overwrites.rs),
/// and the product is what the upload says: only SYMDEX_PRODUCT_PREFIXES makes it the ingest
/// prefix the uploader's role may write under (a `product` claiming another is rejected).
/// Without it, one product's CI could claim another's product and overwrite its bytes: the
/// pair is refused at start, not left to each operator to get right.
fn refuse_unguarded_overwrite(overwrite: bool, product_prefixes: bool) -> Result<(), String> {
    if overwrite && !product_prefixes {
        return Err(
            "SYMDEX_OVERWRITE=true needs SYMDEX_PRODUCT_PREFIXES=true: an overwrite \
                    replaces only its own product's bytes, and without product prefixes an \
                    upload's product is whatever its metadata claims (another product's, \
                    whose bytes it would then overwrite)"
                .to_string(),
        );
    }
    Ok(())
}

/// SYMDEX_ARCHIVE_MAX_ENTRY_SIZE, _MAX_EXPANDED, _MAX_RATIO, _MAX_ENTRIES.
fn archive_limits(lookup: Lookup<'_>) -> Result<symdex_shared::archive::Limits, String> {
    let defaults = symdex_shared::archive::Limits::default();
    Ok(symdex_shared::archive::Limits {
        max_entry_size: number(
            lookup,
            "SYMDEX_ARCHIVE_MAX_ENTRY_SIZE",
            defaults.max_entry_size,
        )?,
        max_expanded: number(lookup, "SYMDEX_ARCHIVE_MAX_EXPANDED", defaults.max_expanded)?,
        max_ratio: number(lookup, "SYMDEX_ARCHIVE_MAX_RATIO", defaults.max_ratio)?,
        max_entries: number(lookup, "SYMDEX_ARCHIVE_MAX_ENTRIES", defaults.max_entries)?,
    })
}

/// SYMDEX_DECODER_MEMORY_MB, or half of AWS_LAMBDA_FUNCTION_MEMORY_SIZE: one budget for the
/// process's walks, for as long as it lives.
fn decoder_memory(
    lookup: Lookup<'_>,
) -> Result<Option<&'static symdex_shared::archive::DecoderMemory>, String> {
    let decoder_memory_mb = match lookup("SYMDEX_DECODER_MEMORY_MB") {
        Some(_) => Some(number(lookup, "SYMDEX_DECODER_MEMORY_MB", 0)?),
        None => lookup("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
            .and_then(|mb| mb.trim().parse::<u64>().ok())
            .map(|mb| mb / 2),
    };
    Ok(decoder_memory_mb.map(|mb| {
        let memory = symdex_shared::archive::DecoderMemory::new(mb.max(1) << 20);
        &*Box::leak(Box::new(memory))
    }))
}

impl LambdaConfig {
    /// Why an event naming `bucket` is not this function's to act on (the serving bucket,
    /// whose private records a direct invoke could otherwise have indexed, or a bucket other
    /// than the ingest bucket); `None`: it is.
    pub fn foreign_bucket(&self, bucket: &str) -> Option<String> {
        if bucket == self.serving_bucket {
            return Some(format!(
                "an event for the serving bucket {bucket}, not an ingest bucket"
            ));
        }
        match &self.ingest_bucket {
            Some(ingest) if ingest != bucket => Some(format!(
                "an event for the bucket {bucket}, not the ingest bucket {ingest}"
            )),
            _ => None,
        }
    }

    pub fn from_env() -> Result<Self, String> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup` (the environment, or a map in tests), in
    /// steps of a few variables each, as docs/lambda.md's table lists them.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let lookup: Lookup<'_> = &lookup;
        let serving_bucket = lookup("SYMDEX_SERVING_BUCKET")
            .filter(|b| !b.is_empty())
            .ok_or("SYMDEX_SERVING_BUCKET is not set")?;
        let multipart_threshold = match lookup("SYMDEX_MULTIPART_THRESHOLD") {
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| format!("SYMDEX_MULTIPART_THRESHOLD={v:?} is not a number"))?,
            None => DEFAULT_MULTIPART_THRESHOLD,
        };
        let pipeline = pipeline(lookup)?;
        let product_prefixes = flag(lookup, "SYMDEX_PRODUCT_PREFIXES", false)?;
        refuse_unguarded_overwrite(pipeline.overwrite, product_prefixes)?;
        Ok(LambdaConfig {
            archive_limits: archive_limits(lookup)?,
            decoder_memory: decoder_memory(lookup)?,
            serving_bucket,
            ingest_bucket: lookup("SYMDEX_INGEST_BUCKET").filter(|b| !b.is_empty()),
            concurrency: number(lookup, "SYMDEX_CONCURRENCY", 4)?.clamp(1, 64) as usize,
            pipeline,
            product_prefixes,
            sweep_max_uploads: number(lookup, "SYMDEX_SWEEP_MAX_UPLOADS", 2000)?.clamp(1, 100_000)
                as usize,
            sweep_delete_ingest: flag(lookup, "SYMDEX_SWEEP_DELETE_INGEST", true)?,
            multipart_threshold,
            source_extensions: lookup("SYMDEX_SOURCE_EXTENSIONS")
                .map(|v| list(&v))
                .unwrap_or_default(),
            source_prefix: lookup("SYMDEX_SOURCE_PREFIX").filter(|p| !p.is_empty()),
            conditional_copies: flag(lookup, "SYMDEX_CONDITIONAL_COPY", true)?,
            audit_page: flag(lookup, "SYMDEX_AUDIT_PAGE", false)?,
            redirect_aliases: match lookup("SYMDEX_ALIASES").as_deref().map(str::trim) {
                None | Some("" | "copy") => false,
                Some("redirect") => true,
                Some(other) => {
                    return Err(format!(
                        "SYMDEX_ALIASES={other:?}: expected copy or redirect"
                    ))
                }
            },
        })
    }

    /// Whether an ingest key is keyed as a source file.
    pub fn is_source(&self, key: &str) -> bool {
        let ext = key.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
        self.source_prefix
            .as_deref()
            .is_some_and(|p| key.starts_with(p))
            || self
                .source_extensions
                .iter()
                .any(|e| e.eq_ignore_ascii_case(ext))
    }
}

#[cfg(test)]
mod tests {
    use super::DEFAULT_MULTIPART_THRESHOLD;
    use crate::LambdaConfig;
    use std::collections::HashMap;
    use symdex_shared::Layout;

    fn config(vars: &[(&str, &str)]) -> Result<LambdaConfig, String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        LambdaConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_and_overrides() {
        assert!(config(&[]).is_err());
        let c = config(&[("SYMDEX_SERVING_BUCKET", "serve")]).unwrap();
        assert_eq!(c.pipeline.layouts, Layout::ALL.to_vec());
        assert_eq!(c.pipeline.manifest_prefix, "_manifest");
        assert_eq!(c.multipart_threshold, DEFAULT_MULTIPART_THRESHOLD);
        assert!(c.pipeline.gzip_manifest);
        assert!(!c.pipeline.fold_case);
        let folded = config(&[("SYMDEX_SERVING_BUCKET", "s"), ("SYMDEX_FOLD_CASE", "true")]);
        assert!(folded.unwrap().pipeline.fold_case);
        assert!(!c.redirect_aliases);
        let redirect = config(&[
            ("SYMDEX_SERVING_BUCKET", "s"),
            ("SYMDEX_ALIASES", "redirect"),
        ]);
        assert!(redirect.unwrap().redirect_aliases);
        assert!(config(&[("SYMDEX_SERVING_BUCKET", "s"), ("SYMDEX_ALIASES", "links")]).is_err());
        // Flags: either case, the usual words; anything else refused, never read as false.
        assert!(c.pipeline.source_joins && c.conditional_copies);
        assert!(!c.pipeline.refuse_srcsrv_commands, "off by default");
        let refusing = config(&[
            ("SYMDEX_SERVING_BUCKET", "s"),
            ("SYMDEX_REFUSE_SRCSRV_COMMANDS", "true"),
        ]);
        assert!(refusing.unwrap().pipeline.refuse_srcsrv_commands);
        let flag = |value: &str| {
            config(&[
                ("SYMDEX_SERVING_BUCKET", "s"),
                ("SYMDEX_SOURCE_JOINS", value),
            ])
            .map(|c| c.pipeline.source_joins)
        };
        for (value, read) in [("True", true), ("on", true), ("1", true), ("FALSE", false)] {
            assert_eq!(flag(value), Ok(read), "{value}");
        }
        assert_eq!(flag("off"), Ok(false));
        assert_eq!(flag(" "), Ok(true), "empty: the default");
        let refused = flag("ture").unwrap_err();
        assert!(refused.contains("SYMDEX_SOURCE_JOINS"), "{refused}");
        // The decoders' shared budget: half the function's memory, or as set; none outside
        // Lambda.
        assert!(c.decoder_memory.is_none());
        let budget = |vars: &[(&str, &str)]| {
            let mut vars = vars.to_vec();
            vars.push(("SYMDEX_SERVING_BUCKET", "s"));
            config(&vars).map(|c| c.decoder_memory.map(|m| m.budget()))
        };
        let mib = |n: u64| Ok(Some(n << 20));
        assert_eq!(
            budget(&[("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")]),
            mib(256)
        );
        let both = [
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512"),
            ("SYMDEX_DECODER_MEMORY_MB", "400"),
        ];
        assert_eq!(budget(&both), mib(400));
        assert!(budget(&[("SYMDEX_DECODER_MEMORY_MB", "lots")]).is_err());
        let c = config(&[
            ("SYMDEX_SERVING_BUCKET", "serve"),
            ("SYMDEX_LAYOUTS", "ssqp, debuginfod"),
            ("SYMDEX_MANIFEST_PREFIX", "/audit/"),
            ("SYMDEX_PREFIX_UNIFIED", "sentry"),
            ("SYMDEX_MULTIPART_THRESHOLD", "1048576"),
            ("SYMDEX_SOURCE_EXTENSIONS", "c,cs"),
        ])
        .unwrap();
        assert_eq!(c.pipeline.layouts, [Layout::Ssqp, Layout::Debuginfod]);
        assert_eq!(c.pipeline.manifest_prefix, "audit");
        assert_eq!(c.pipeline.prefixes[&Layout::Unified], "sentry/");
        assert_eq!(c.multipart_threshold, 1 << 20);
        assert!(c.is_source("src/a.CS") && !c.is_source("bin/a.dll"));
        assert!(config(&[("SYMDEX_SERVING_BUCKET", "s"), ("SYMDEX_LAYOUTS", "bogus")]).is_err());
        assert!(config(&[("SYMDEX_SERVING_BUCKET", "s"), ("SYMDEX_RETENTION", "try")]).is_err());
        let c = config(&[
            ("SYMDEX_SERVING_BUCKET", "s"),
            ("SYMDEX_RETENTION", "pr=3d"),
            ("SYMDEX_PRODUCT_PREFIXES", "true"),
        ])
        .unwrap();
        assert_eq!(c.pipeline.retention.to_string(), "pr=3d");
        assert!(c.product_prefixes && c.sweep_delete_ingest);
        assert!(!c.audit_page);
        assert!(
            !config(&[("SYMDEX_SERVING_BUCKET", "s")])
                .unwrap()
                .product_prefixes
        );
    }

    /// SYMDEX_OVERWRITE trusts the upload's product: without SYMDEX_PRODUCT_PREFIXES (the
    /// uploader's role decides it) the function refuses to start.
    #[test]
    fn an_overwrite_without_product_prefixes_is_refused() {
        let overwrite = |prefixes: Option<&str>| {
            let mut vars = vec![("SYMDEX_SERVING_BUCKET", "s"), ("SYMDEX_OVERWRITE", "true")];
            vars.extend(prefixes.map(|p| ("SYMDEX_PRODUCT_PREFIXES", p)));
            config(&vars).map(|c| (c.pipeline.overwrite, c.product_prefixes))
        };
        for prefixes in [None, Some("false")] {
            let refused = overwrite(prefixes).unwrap_err();
            assert!(
                refused.contains("SYMDEX_OVERWRITE") && refused.contains("SYMDEX_PRODUCT_PREFIXES"),
                "{refused}"
            );
        }
        assert_eq!(overwrite(Some("true")), Ok((true, true)));
        let plain = config(&[
            ("SYMDEX_SERVING_BUCKET", "s"),
            ("SYMDEX_OVERWRITE", "false"),
        ]);
        assert!(!plain.unwrap().pipeline.overwrite);
    }

    #[test]
    fn the_audit_page_and_private_prefixes() {
        let on = config(&[("SYMDEX_SERVING_BUCKET", "s"), ("SYMDEX_AUDIT_PAGE", "1")]);
        assert!(on.unwrap().audit_page);
        // A layout can never publish among symdex's records or on the audit page.
        for (var, value) in [
            ("SYMDEX_PREFIX_SSQP", "_symdex/"),
            ("SYMDEX_PREFIX_UNIFIED", "/_symdex/audit"),
            ("SYMDEX_PREFIX_BREAKPAD", "_manifest/x"),
            ("SYMDEX_MANIFEST_PREFIX", "_symdex/audit/m"),
        ] {
            let refused = config(&[("SYMDEX_SERVING_BUCKET", "s"), (var, value)]).unwrap_err();
            assert!(refused.contains(var), "{refused}");
        }
        for (var, value) in [
            ("SYMDEX_PREFIX_SSQP", ""),
            ("SYMDEX_PREFIX_SSQP", "_symdex2/"),
            ("SYMDEX_PREFIX_UNIFIED", "_manifests/"),
        ] {
            assert!(config(&[("SYMDEX_SERVING_BUCKET", "s"), (var, value)]).is_ok());
        }
    }
}
