//! Names of files that hold credentials (THREATS.md, invariant 2): never published as a
//! source unless an uploader flags them as sources.

/// Why a file named `path` is never a source without a flag: the shape of secret it looks
/// like, or `None`. Judged on the base name, ASCII-case-insensitively (the names are chosen
/// by the tools writing them, not by people: `.env.production`, `id_rsa.pub`, `server.key`).
pub fn secret_shaped(path: &str) -> Option<&'static str> {
    let name = path
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(path)
        .to_ascii_lowercase();
    /// Exact names and name stems (`stem` or `stem.anything`).
    const STEMS: &[(&str, &str)] = &[
        (".env", "environment file"),
        (".npmrc", "package registry credentials"),
        (".pypirc", "package registry credentials"),
        (".netrc", "network credentials"),
        ("_netrc", "network credentials"),
        (".git-credentials", "git credentials"),
        (".dockercfg", "registry credentials"),
        (".htpasswd", "password file"),
        ("credentials", "credentials file"),
        ("secrets", "secrets file"),
        ("id_rsa", "SSH key"),
        ("id_dsa", "SSH key"),
        ("id_ecdsa", "SSH key"),
        ("id_ed25519", "SSH key"),
    ];
    /// Endings of key and certificate stores.
    const ENDINGS: &[(&str, &str)] = &[
        (".pem", "key or certificate"),
        (".key", "private key"),
        (".p12", "key store"),
        (".pfx", "key store"),
        (".jks", "key store"),
        (".keystore", "key store"),
        (".kdbx", "password database"),
        (".ppk", "SSH key"),
        (".env", "environment file"),
        (".tfvars", "Terraform variables"),
        (".tfstate", "Terraform state"),
    ];
    for (stem, what) in STEMS {
        let rest = name.strip_prefix(stem);
        if rest.is_some_and(|r| r.is_empty() || r.starts_with(['.', '-', '_'])) {
            return Some(what);
        }
    }
    ENDINGS
        .iter()
        .find(|(ending, _)| name.ends_with(ending))
        .map(|(_, what)| *what)
}

#[cfg(test)]
mod tests {
    use super::secret_shaped;

    #[test]
    fn credential_files_are_secret_shaped_and_sources_are_not() {
        for name in [
            ".env",
            "app/.env.production",
            "C:\\b\\.ENV",
            "app/config/secrets.env",
            "secrets.json",
            "deploy/id_rsa",
            "id_ed25519.pub",
            "tls/server.pem",
            "server.key",
            ".npmrc",
            ".netrc",
            "aws/credentials",
            "credentials.json",
            "prod.tfvars",
            "signing.pfx",
        ] {
            assert!(secret_shaped(name).is_some(), "{name}");
        }
        for name in [
            "src/main.c",
            "environment.c",
            "keys.rs",
            "src/key.h",
            "secretsanta.c",
            "credential_store.cc",
            "monkey.c",
            "include/openssl/pem.h",
        ] {
            assert_eq!(secret_shaped(name), None, "{name}");
        }
    }
}
