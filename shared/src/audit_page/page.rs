//! The page itself: one HTML file with its style, its script and its data inside, so that it
//! opens from disk and fetches nothing. The template, style and script are files beside
//! this one (template.html, page.css, page.js), compiled in.

use crate::audit_page::data::PageData;

const TEMPLATE: &str = include_str!("template.html");
const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// Where the template takes each part (markers no data passes through: the data goes in
/// last, by position, and is never searched).
const CSS_MARK: &str = "/*{{CSS}}*/";
const JS_MARK: &str = "/*{{JS}}*/";
const DATA_MARK: &str = "{{DATA}}";

/// The page for `data`.
pub fn render(data: &PageData) -> serde_json::Result<String> {
    let json = embed_json(&serde_json::to_string(data)?);
    let shell = TEMPLATE.replacen(CSS_MARK, CSS, 1).replacen(JS_MARK, JS, 1);
    // The template is ours and holds the data marker once (a unit test says so).
    let (before, after) = shell.split_once(DATA_MARK).unwrap_or((shell.as_str(), ""));
    let mut page = String::with_capacity(before.len() + json.len() + after.len());
    page.push_str(before);
    page.push_str(&json);
    page.push_str(after);
    Ok(page)
}

/// JSON made safe inside `<script type="application/json">`: names, builds and reasons are
/// the uploaders' and may hold `</script>` or `<!--`, which would end or bend the element.
/// `<`, `>` and `&` become JSON escapes (they occur only inside JSON strings, so the value
/// read back is the same), as do U+2028 and U+2029 (line terminators to older JavaScript).
pub fn embed_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + json.len() / 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}
