//! `docs/cli.md` is the reference of every command and flag, rendered from `symdex --help` of
//! each command (the clap definitions in `src/`): this test fails when the two differ.
//! `SYMDEX_BLESS=1 cargo test --test cli_docs` (or `make docs`) writes it anew.

use std::process::Command;

/// `symdex ARGS... --help`, as a user sees it.
fn help(command: &[&str]) -> String {
    let mut symdex = Command::new(env!("CARGO_BIN_EXE_symdex"));
    // Flags read from the environment print its value in their help: none of the caller's.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("SYMDEX_") {
            symdex.env_remove(name);
        }
    }
    let out = symdex
        .args(command)
        .arg("--help")
        .env_remove("COLUMNS")
        .output()
        .expect("run symdex");
    assert!(out.status.success(), "symdex {command:?} --help failed");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The subcommands a help text lists under `Commands:` (`help` left out).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every command's help, depth first, as Markdown.
fn render() -> String {
    let mut out = String::from(
        "# symdex command reference\n\n\
         Every command and flag, as `symdex COMMAND --help` prints it. Generated from the clap \
         definitions in `src/` by `make docs`; a test (`tests/cli_docs.rs`) fails when this file \
         is stale. The README's tour shows the commands in use.\n",
    );
    let mut stack: Vec<Vec<String>> = vec![vec![]];
    while let Some(path) = stack.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        let title = if path.is_empty() {
            "symdex".to_string()
        } else {
            format!("symdex {}", path.join(" "))
        };
        out.push_str(&format!(
            "\n## `{title}`\n\n```text\n{}\n```\n",
            text.trim_end()
        ));
        for sub in subcommands(&text).into_iter().rev() {
            let mut next = path.clone();
            next.push(sub);
            stack.push(next);
        }
    }
    out
}

#[test]
fn docs_cli_md_is_symdex_help_of_every_command() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let rendered = render();
    for command in [
        "index",
        "serve",
        "check",
        "manifest query",
        "verify",
        "keys",
    ] {
        assert!(
            rendered.contains(&format!("## `symdex {command}`")),
            "{command} is missing from the rendered reference"
        );
    }
    if std::env::var_os("SYMDEX_BLESS").is_some() {
        std::fs::write(&path, &rendered).expect("write docs/cli.md");
        return;
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == rendered,
        "docs/cli.md is stale: run `make docs` (SYMDEX_BLESS=1 cargo test --test cli_docs) \
         and commit it. First difference at line {}",
        written
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| written.lines().count().min(rendered.lines().count()))
            + 1
    );
}

/// The repository's GitHub Action (`.github/actions/push/action.yml`) runs `symdex push` with
/// flags that command has: a renamed flag fails here, not in a user's CI.
#[test]
fn the_push_action_uses_only_flags_push_has() {
    let action = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".github/actions/push/action.yml"),
    )
    .expect("the action");
    let push = help(&["push"]);
    let flags: Vec<&str> = action
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .filter(|w| !["--locked", "--git", "--rev"].contains(w))
        .collect();
    assert!(flags.contains(&"--wait"), "{flags:?}");
    for flag in flags {
        assert!(push.contains(flag), "symdex push has no {flag}");
    }
}
