//! Uploader-chosen text (archive entry names, build metadata) through `manifest query`: the
//! table escapes control characters, CSV keeps formulas out of spreadsheets, JSON is exact.

mod common;

use common::{ok, symdex, Workdir};

const HOSTILE_ENTRY: &str = "evil\x1b]0;PWNED\x07\x1b[2J\r.sym";
const BUILD: &str = "=HYPERLINK(\"http://x\")";
const PRODUCT: &str = "@SUM(1)";
const VERSION: &str = "-2+3";

#[test]
fn manifest_query_escapes_control_characters_and_neutralises_formulas() {
    let w = Workdir::new();
    // A zip whose one entry is named with ESC, BEL and CR (Python's zipfile writes any name).
    let script = format!(
        "import zipfile\nwith zipfile.ZipFile('hostile.zip', 'w') as z:\n    z.writestr({}, 'not an artifact')\n",
        serde_json::to_string(HOSTILE_ENTRY).unwrap()
    );
    std::fs::write(w.path("make.py"), script).unwrap();
    w.run("python3", &["make.py"]);
    let store = w.path("store");
    ok(symdex()
        .args(["index", "--store"])
        .arg(&store)
        .args([
            &format!("--build={BUILD}"),
            &format!("--product={PRODUCT}"),
            &format!("--version={VERSION}"),
        ])
        .arg(w.path("hostile.zip"))
        .output()
        .unwrap());
    let query = |format: &str| {
        ok(symdex()
            .args(["manifest", "query", "--format", format])
            .arg(&store)
            .output()
            .unwrap())
    };

    let table = query("table");
    for raw in ['\x1b', '\x07', '\r'] {
        assert!(!table.contains(raw), "raw {raw:?} in the table: {table:?}");
    }
    assert!(
        table.contains(r"evil\x1b]0;PWNED\x07\x1b[2J\r.sym"),
        "{table}"
    );

    let csv = query("csv");
    let row = csv.lines().nth(1).expect("a record");
    assert!(row.contains(",\"'=HYPERLINK(\"\"http://x\"\")\","), "{row}");
    assert!(row.contains(",'@SUM(1),"), "{row}");
    assert!(row.contains(",'-2+3,"), "{row}");
    for field in row.split(',') {
        assert!(!field.starts_with(['=', '+', '-', '@']), "{field} in {row}");
    }

    let json = query("json");
    let record: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(record["entry"], HOSTILE_ENTRY);
    assert_eq!(record["build"], BUILD);
    assert_eq!(record["product"], PRODUCT);
    assert_eq!(record["version"], VERSION);
}
