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
        (".envrc", "environment file"),
        (".npmrc", "package registry credentials"),
        (".yarnrc", "package registry credentials"),
        (".pgpass", "database password file"),
        (".my.cnf", "database credentials"),
        (".vault-token", "Vault token"),
        (".s3cfg", "cloud credentials"),
        (".boto", "cloud credentials"),
        ("kubeconfig", "cluster credentials"),
        ("ssh_host_", "SSH host key"),
        ("authkey_", "signing key"),
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
        (".p8", "private key"),
        (".asc", "key or signature"),
        (".gpg", "encrypted or key file"),
    ];
    for (stem, what) in STEMS {
        let rest = name.strip_prefix(stem);
        // A stem ending in `_` is a prefix (`ssh_host_rsa_key`, `AuthKey_ABC.p8`).
        let prefix = stem.ends_with('_');
        if rest.is_some_and(|r| prefix || r.is_empty() || r.starts_with(['.', '-', '_'])) {
            return Some(what);
        }
    }
    /// Kept in the name, not only at its end (`terraform.tfstate.backup`).
    const INNER: &[(&str, &str)] = &[(".tfstate", "Terraform state")];
    let inner = INNER.iter().find(|(part, _)| name.contains(part));
    inner
        .or_else(|| ENDINGS.iter().find(|(ending, _)| name.ends_with(ending)))
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
            "cfg/.envrc",
            "terraform.tfstate.backup",
            ".pgpass",
            ".vault-token",
            ".s3cfg",
            "etc/ssh/ssh_host_ed25519_key",
            "AuthKey_ABC123.p8",
            "kubeconfig",
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
