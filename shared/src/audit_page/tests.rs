//! The page's packing and escaping: what reaches the browser reads back as the manifest
//! wrote it, and no uploader-chosen text can end the data's element.

use std::collections::BTreeMap;

use crate::layouts::grammar::is_valid_key;
use crate::layouts::Layout;
use crate::manifest::{Action, Record};
use crate::pipeline::default_prefixes;
use crate::storage::STATE_PREFIX;
use crate::upload_meta::UploadMeta;
use serde_json::{json, Value};

use crate::audit_page::columns::Columns;
use crate::audit_page::data::PageData;
use crate::audit_page::holders::Holders;
use crate::audit_page::holdings::{layout_of, Holdings};
use crate::audit_page::page::{embed_json, render};
use crate::audit_page::strings::Strings;
use crate::audit_page::{DEPLOYED_KEY, DEPLOYED_PREFIX};

const HOSTILE: &str = "</script><script>alert(1)</script><!-- \u{2028}\u{2029} & \x1b]0;x\x07";

fn record(name: &str, build: &str, keys: &[&str]) -> Record {
    Record {
        time: "2026-11-20T10:00:00Z".into(),
        action: Some(Action::Indexed),
        upload: format!("file:/in/{name}"),
        ingest_key: format!("/in/{name}"),
        name: Some(name.into()),
        meta: UploadMeta {
            build: Some(build.into()),
            product: Some("app".into()),
            ..UploadMeta::default()
        },
        published: keys.iter().map(|k| k.to_string()).collect(),
        ..Record::default()
    }
}

#[test]
fn embedded_json_has_no_markup_and_reads_back_the_same() {
    let value = serde_json::json!({ "name": HOSTILE, "n": [1, 2] });
    let embedded = embed_json(&serde_json::to_string(&value).unwrap());
    for bad in ['<', '>', '&', '\u{2028}', '\u{2029}'] {
        assert!(!embedded.contains(bad), "{bad:?} left in {embedded}");
    }
    let back: serde_json::Value = serde_json::from_str(&embedded).unwrap();
    assert_eq!(back, value);
}

#[test]
fn records_pack_by_column_with_each_text_once() {
    let mut strings = Strings::default();
    let mut columns = Columns::default();
    let a = record("a.pdb", "b1", &["symbols/a.pdb/ID1/a.pdb"]);
    let b = record(HOSTILE, "b1", &["symbols/a.pdb/ID2/a.pdb"]);
    columns.push(&a, &mut strings);
    columns.push(&b, &mut strings);
    assert_eq!(columns.len(), 2);
    assert_eq!(
        columns.build[0], columns.build[1],
        "one build, written once"
    );
    assert_eq!(strings.get(columns.name[1]), HOSTILE);
    assert_eq!(strings.get(columns.day[0]), "2026-11-20");
    assert_eq!(strings.get(columns.clock[0]), "T10:00:00Z");
    assert_eq!(
        strings.get(columns.version[0]),
        "",
        "absent is the empty string"
    );
    let key: Vec<&str> = columns.published[1][0]
        .iter()
        .map(|&part| strings.get(part))
        .collect();
    assert_eq!(key.join("/"), "symbols/a.pdb/ID2/a.pdb");
    // Shared parts ("symbols", "a.pdb") are written once for both keys.
    assert_eq!(columns.published[0][0][0], columns.published[1][0][0]);
}

#[test]
fn the_page_holds_its_data_once_and_no_markup_from_it() {
    let mut strings = Strings::default();
    let mut columns = Columns::default();
    columns.push(&record(HOSTILE, HOSTILE, &[]), &mut strings);
    let data = PageData {
        store: HOSTILE.into(),
        generated: "2026-11-20T10:00:00Z".into(),
        records: 1,
        strings,
        columns,
        missing: Vec::new(),
        holdings: Holdings::default(),
    };
    let page = render(&data).unwrap();
    assert!(
        !page.contains("alert(1)</script>"),
        "hostile text raw in the page"
    );
    assert!(!page.contains("{{DATA}}") && !page.contains("/*{{JS}}*/"));
    // The browser itself refuses any fetch, whatever a later change of the script tries.
    assert!(page.contains("content=\"default-src 'none';"), "no CSP");
    let open = r#"<script type="application/json" id="audit-data">"#;
    assert_eq!(page.matches(open).count(), 1);
    let start = page.find(open).unwrap() + open.len();
    let end = start + page[start..].find("</script>").unwrap();
    let back: serde_json::Value = serde_json::from_str(&page[start..end]).unwrap();
    assert_eq!(back["store"], HOSTILE);
    assert_eq!(back["records"], 1);
    assert_eq!(
        back["strings"][back["columns"]["name"][0].as_u64().unwrap() as usize],
        HOSTILE
    );
}

#[test]
fn keys_are_counted_under_the_layouts_whose_grammar_they_fit() {
    let prefixes: BTreeMap<_, _> = default_prefixes();
    let build_id = "031b290d8df581a60d1b3c9eaf486146dbfd25a9";
    assert_eq!(
        layout_of(&format!("buildid/{build_id}/debuginfo"), &prefixes),
        "debuginfod"
    );
    assert_eq!(
        layout_of(
            "symbols/foo.pdb/497B72F6390A44FC878E5A2D63B6CC4B1/foo.sym",
            &prefixes
        ),
        "breakpad"
    );
    assert_eq!(layout_of("sentry/x/y", &prefixes), "other: sentry/");
    assert_eq!(layout_of("loose", &prefixes), "other");
}

#[test]
fn conflicts_name_their_holders_and_keys_stay_their_publishers() {
    let mut holders = Holders::default();
    let published = record("a.debug", "b1", &["k/1", "k/2"]);
    let conflict = Record {
        conflicts: vec!["k/1".into(), "k/unknown".into()],
        ..record("b.debug", "b2", &[])
    };
    let found = Record {
        unchanged: vec!["k/2".into()],
        ..record("c.debug", "b3", &[])
    };
    let removal = Record {
        removed: vec!["k/1".into()],
        ..record("a.debug", "b1", &[])
    };
    assert_eq!(holders.see(0, &published), Vec::<u32>::new());
    assert_eq!(holders.see(1, &conflict), vec![0], "k/1 is record 0's");
    assert_eq!(holders.see(2, &found), Vec::<u32>::new());
    assert_eq!(holders.see(3, &removal), Vec::<u32>::new());
    let live: Vec<(&str, u32)> = holders.live().collect();
    assert_eq!(live, [("k/2", 0)], "k/1 removed; k/2 stays its publisher's");
}

/// A column as the page's script expands it (page.js `unpack`).
fn unpacked(column: &Value, rows: usize, blank: Value) -> Value {
    if column.is_array() {
        return column.clone();
    }
    if let Some(runs) = column["runs"].as_array() {
        let mut out = Vec::new();
        for pair in runs.chunks(2) {
            let count = pair[1].as_u64().unwrap() as usize;
            out.extend(std::iter::repeat_n(pair[0].clone(), count));
        }
        return Value::Array(out);
    }
    assert_eq!(column["len"], rows);
    let mut out = vec![blank; rows];
    let values = column["values"].as_array().unwrap();
    for (k, row) in column["rows"].as_array().unwrap().iter().enumerate() {
        out[row.as_u64().unwrap() as usize] = values[k].clone();
    }
    Value::Array(out)
}

#[test]
fn packed_columns_expand_to_the_columns() {
    let mut strings = Strings::default();
    let mut columns = Columns::default();
    for i in 0..300 {
        let mut r = record(&format!("f{i}.debug"), &format!("b{}", i / 100), &[]);
        if i % 50 == 0 {
            r.conflicts = vec![format!("k/{i}")];
            r.held_by_products = vec!["other".into()];
        }
        columns.push(&r, &mut strings);
    }
    let packed = serde_json::to_value(&columns).unwrap();
    assert!(packed["build"]["runs"].is_array(), "three builds in runs");
    assert!(packed["name"].is_array(), "unique names plain");
    assert!(
        packed["conflicts"]["rows"].is_array(),
        "few conflicts sparse"
    );
    for (name, expected, blank) in [
        (
            "build",
            serde_json::to_value(&columns.build).unwrap(),
            json!(null),
        ),
        (
            "name",
            serde_json::to_value(&columns.name).unwrap(),
            json!(null),
        ),
        (
            "version",
            serde_json::to_value(&columns.version).unwrap(),
            json!(null),
        ),
        (
            "conflicts",
            serde_json::to_value(&columns.conflicts).unwrap(),
            json!([]),
        ),
        (
            "held_by_products",
            serde_json::to_value(&columns.held_by_products).unwrap(),
            json!([]),
        ),
        (
            "sources",
            serde_json::to_value(&columns.sources).unwrap(),
            json!([0, 0, 0]),
        ),
    ] {
        assert_eq!(unpacked(&packed[name], 300, blank), expected, "{name}");
    }
}

/// The script never hands text to an HTML parser, nor code to a compiler: data reaches the
/// page as text nodes only (the browser test checks what that shows).
#[test]
fn the_script_writes_no_markup() {
    let script = include_str!("page.js");
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "setTimeout('",
    ] {
        assert!(!script.contains(sink), "page.js uses {sink}");
    }
}

/// The page a deployment writes lives among symdex's own records, where no symbol key can
/// be: no layout's default prefix is there, and with a layout at the root a key's first two
/// parts are a file name and an id (hex), which `audit` is not.
#[test]
fn the_deployed_page_is_private_and_no_layout_key() {
    assert!(DEPLOYED_KEY.starts_with(DEPLOYED_PREFIX));
    assert!(DEPLOYED_PREFIX.starts_with(&format!("{STATE_PREFIX}/")));
    assert!(crate::audit::is_bookkeeping(DEPLOYED_KEY, "_manifest"));
    let under_the_page = [
        DEPLOYED_KEY,
        "_symdex/audit/_symdex",
        "_symdex/audit/audit",
        "_symdex/audit/index.html.sym",
        "_symdex/audit/debuginfo",
    ];
    for layout in Layout::ALL {
        assert!(!default_prefixes()[&layout].starts_with(&format!("{STATE_PREFIX}/")));
        for key in under_the_page {
            assert!(!is_valid_key(layout, key), "{key} is a {layout} key");
        }
    }
}
