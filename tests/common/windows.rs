//! A native Windows build made on Linux, for the Source Link and srcsrv tests: C++ files
//! compiled by `clang-19 --target=x86_64-pc-windows-msvc -g -gcodeview`, linked by
//! `lld-link-19 /debug` with named streams (`/pdbstream:<name>=<file>`).

use std::process::Command;

use super::Workdir;

/// Whether the Windows toolchain is there; absent, the test says so and passes, except in CI
/// (`scripts/setup.sh` installs it there).
pub fn have_toolchain() -> bool {
    let found = ["clang-19", "lld-link-19", "llvm-pdbutil-19"]
        .iter()
        .all(|tool| Command::new(tool).arg("--version").output().is_ok());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "clang-19, lld-link-19 and llvm-pdbutil-19 are needed (scripts/setup.sh)"
        );
        eprintln!(
            "skipped: clang-19, lld-link-19 or llvm-pdbutil-19 is missing (scripts/setup.sh)"
        );
    }
    found
}

/// Compiles `src/a.cpp` and `src/sub/c.cpp` (both including `src/sub/b.h`) for Windows, and
/// returns the root the compiler records their paths under.
pub fn compile(w: &Workdir) -> String {
    std::fs::create_dir_all(w.path("src/sub")).unwrap();
    std::fs::write(
        w.path("src/sub/b.h"),
        "inline int helper(int x) { return x * 3; }\n",
    )
    .unwrap();
    std::fs::write(
        w.path("src/a.cpp"),
        "#include \"sub/b.h\"\nint other();\nint main() { return helper(2) + other(); }\n",
    )
    .unwrap();
    std::fs::write(
        w.path("src/sub/c.cpp"),
        "#include \"b.h\"\nint other() { return helper(5); }\n",
    )
    .unwrap();
    for (src, obj) in [("src/a.cpp", "a.obj"), ("src/sub/c.cpp", "c.obj")] {
        w.run(
            "clang-19",
            &[
                "--target=x86_64-pc-windows-msvc",
                "-g",
                "-gcodeview",
                "-c",
                src,
                "-o",
                obj,
            ],
        );
    }
    w.path("src").to_string_lossy().into_owned()
}

/// Links `app.exe` + `<pdb>` from the objects with the given named streams.
pub fn link(w: &Workdir, pdb: &str, streams: &[(&str, &str)]) {
    let mut args = vec![
        "/debug".to_string(),
        "/entry:main".into(),
        "/subsystem:console".into(),
        "/nodefaultlib".into(),
        "a.obj".into(),
        "c.obj".into(),
        "/out:app.exe".into(),
        format!("/pdb:{pdb}"),
    ];
    for (name, file) in streams {
        args.push(format!("/pdbstream:{name}={file}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    w.run("lld-link-19", &args);
}
