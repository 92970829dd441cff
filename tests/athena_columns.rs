//! The manifest's Athena columns (infra/modules/symdex/athena.tf, `manifest_columns`) read
//! what a manifest record writes: each column's Presto type (the `latest` view's) is its Hive
//! type (the Glue table's) spelt Presto's way, and a record with its nested fields all set
//! (`pdb_sources`, `dwarf_package`, `split_dwarf`) fits the types of its columns: every key
//! of its JSON objects a field of the struct (the JSON SerDe drops the others unread), every
//! value of the type declared.

use std::collections::BTreeMap;

use serde_json::Value;
use symdex_shared::identity::{DwarfPackage, DwoId, SplitDwarf};
use symdex_shared::manifest::Record;
use symdex_shared::pdb_sources::{Checksum, ChecksumAlgorithm, Document, PdbSources, SrcSrv};
use symdex_shared::sourcelink::SourceLinkMap;

/// A Hive column type, parsed.
#[derive(Debug, PartialEq)]
enum Hive {
    Primitive(String),
    Array(Box<Hive>),
    Map(Box<Hive>, Box<Hive>),
    Struct(Vec<(String, Hive)>),
}

/// Parses a Hive type at the start of `text`; returns it and the rest.
fn parse(text: &str) -> (Hive, &str) {
    let end = text.find(['<', ',', '>']).unwrap_or(text.len());
    let (name, rest) = (&text[..end], &text[end..]);
    let Some(mut rest) = rest.strip_prefix('<') else {
        return (Hive::Primitive(name.to_string()), rest);
    };
    let hive = match name {
        "array" => {
            let (item, after) = parse(rest);
            rest = after;
            Hive::Array(Box::new(item))
        }
        "map" => {
            let (key, after) = parse(rest);
            let (value, after) = parse(after.strip_prefix(',').unwrap());
            rest = after;
            Hive::Map(Box::new(key), Box::new(value))
        }
        "struct" => {
            let mut fields = Vec::new();
            loop {
                let colon = rest.find(':').unwrap();
                let (field, after) = parse(&rest[colon + 1..]);
                fields.push((rest[..colon].to_string(), field));
                rest = after;
                match rest.strip_prefix(',') {
                    Some(more) => rest = more,
                    None => break,
                }
            }
            Hive::Struct(fields)
        }
        other => panic!("unknown Hive type {other}"),
    };
    (hive, rest.strip_prefix('>').expect("a closing >"))
}

/// The Presto spelling of a Hive type, as the view's column types are written.
fn presto(hive: &Hive) -> String {
    match hive {
        Hive::Primitive(p) => match p.as_str() {
            "string" => "varchar".into(),
            "int" => "integer".into(),
            other => other.into(),
        },
        Hive::Array(item) => format!("array({})", presto(item)),
        Hive::Map(k, v) => format!("map({}, {})", presto(k), presto(v)),
        Hive::Struct(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, t)| format!("{name} {}", presto(t)))
                .collect();
            format!("row({})", fields.join(", "))
        }
    }
}

/// Whether `value` fits `hive` (null fits anything: a field left out).
fn fits(value: &Value, hive: &Hive, at: &str) {
    match (value, hive) {
        (Value::Null, _) => {}
        (Value::String(_), Hive::Primitive(p)) => assert_eq!(p, "string", "{at}"),
        (Value::Bool(_), Hive::Primitive(p)) => assert_eq!(p, "boolean", "{at}"),
        (Value::Number(n), Hive::Primitive(p)) => {
            assert!(n.is_u64() || n.is_i64(), "{at}: {n}");
            assert!(p == "int" || p == "bigint", "{at}: {p}");
        }
        (Value::Array(items), Hive::Array(item)) => {
            assert!(!items.is_empty(), "{at}: give the sample an item");
            for v in items {
                fits(v, item, &format!("{at}[]"));
            }
        }
        (Value::Object(map), Hive::Map(key, value)) => {
            assert_eq!(**key, Hive::Primitive("string".into()), "{at}");
            for (k, v) in map {
                fits(v, value, &format!("{at}.{k}"));
            }
        }
        (Value::Object(map), Hive::Struct(fields)) => {
            for (k, v) in map {
                let field = fields.iter().find(|(name, _)| name == k);
                let (_, t) = field.unwrap_or_else(|| panic!("{at}.{k}: no such field"));
                fits(v, t, &format!("{at}.{k}"));
            }
        }
        (value, hive) => panic!("{at}: {value} is not a {hive:?}"),
    }
}

/// `manifest_columns` of athena.tf: each column's Hive and Presto types.
fn columns() -> BTreeMap<String, (String, String)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/infra/modules/symdex/athena.tf"
    );
    let tf = std::fs::read_to_string(path).unwrap();
    let start = tf.find("manifest_columns = {").unwrap();
    let block = &tf[start..start + tf[start..].find("\n  }\n").unwrap()];
    let quoted = |line: &str, field: &str| -> String {
        let at = line.find(&format!("{field} = \"")).unwrap() + field.len() + 4;
        line[at..at + line[at..].find('"').unwrap()].to_string()
    };
    block
        .lines()
        .skip(1)
        .filter(|line| line.contains("hive = "))
        .map(|line| {
            let name = line.split('=').next().unwrap().trim().to_string();
            (name, (quoted(line, "hive"), quoted(line, "presto")))
        })
        .collect()
}

fn full_sources() -> PdbSources {
    let map: SourceLinkMap = r#"{"documents":{"C:\\b\\*":"https://s.example/src/app/1/*"}}"#
        .parse()
        .unwrap();
    PdbSources {
        documents: vec![Document {
            path: r"C:\b\a.cpp".into(),
            checksum: Some(Checksum {
                algorithm: ChecksumAlgorithm::Sha256,
                digest: "ab".repeat(32),
            }),
            srcsrv_url: Some("https://s.example/src/app/1/a.cpp".into()),
        }],
        source_link: Some(map),
        srcsrv: Some(SrcSrv {
            size: u32::MAX,
            target: Some("https://s.example/src/app/1/%var2%".into()),
            commands: true,
        }),
        unread: vec!["module 3: cut short".into()],
        srcsrv_unchecked: true,
    }
}

#[test]
fn the_view_spells_each_table_type_and_a_full_record_fits_them() {
    let columns = columns();
    assert!(columns.contains_key("pdb_sources"), "{columns:?}");
    let mut parsed = BTreeMap::new();
    for (name, (hive, want)) in &columns {
        let (t, rest) = parse(hive);
        assert_eq!(rest, "", "{name}: {hive}");
        assert_eq!(&presto(&t), want, "{name}");
        parsed.insert(name.clone(), t);
    }
    let record = Record {
        dwarf_package: Some(DwarfPackage {
            index_version: 5,
            dwo_ids: vec![DwoId(1)],
        }),
        split_dwarf: Some(SplitDwarf {
            dwo_ids: vec![DwoId(2)],
            unread: vec!["why".into()],
        }),
        pdb_sources: Some(full_sources()),
        ..Record::default()
    };
    let json = serde_json::to_value(&record).unwrap();
    for name in ["pdb_sources", "dwarf_package", "split_dwarf"] {
        let value = &json[name];
        assert!(value.is_object(), "{name}: {json}");
        fits(value, &parsed[name], name);
    }
    for (name, value) in json.as_object().unwrap() {
        if let Some(t) = parsed.get(name) {
            fits(value, t, name);
        }
    }
}
