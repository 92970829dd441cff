//! CPU architectures, by the names Sentry gives them (`x86`, `x86_64`, `arm64`, ...): what
//! symbolicator, `sentry-cli` and the manifest print. Each format maps its own machine codes
//! onto these (`formats::pe::arch_name`, `formats::elf::arch_name`, ...).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! arches {
    ($($variant:ident => $name:literal,)*) => {
        /// A CPU architecture (Sentry's names); `Unknown` where an artifact names none symdex
        /// knows, `Any` for sources.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub enum Arch {
            $($variant,)*
            /// Source files: for every architecture.
            Any,
            #[default]
            Unknown,
        }

        impl Arch {
            /// Every architecture, in declaration order.
            pub const ALL: &'static [Arch] = &[$(Arch::$variant,)* Arch::Any, Arch::Unknown];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Arch::$variant => $name,)*
                    Arch::Any => "any",
                    Arch::Unknown => "unknown",
                }
            }
        }
    };
}

arches! {
    X86 => "x86",
    X86_64 => "x86_64",
    X86_64h => "x86_64h",
    Arm => "arm",
    Armv6 => "armv6",
    Armv7 => "armv7",
    Armv7f => "armv7f",
    Armv7s => "armv7s",
    Armv7k => "armv7k",
    Armv7m => "armv7m",
    Armv7em => "armv7em",
    Arm64 => "arm64",
    Arm64e => "arm64e",
    Arm64_32 => "arm64_32",
    Ppc => "ppc",
    Ppc64 => "ppc64",
    Ia64 => "ia64",
    Mips => "mips",
    Mips64 => "mips64",
    S390x => "s390x",
    Riscv32 => "riscv32",
    Riscv64 => "riscv64",
    Wasm32 => "wasm32",
}

impl Arch {
    /// The architecture a Sentry name names (exactly, as `as_str` writes it); `Unknown` for
    /// any other text (names from inside files and JSON stay untrusted).
    pub fn from_name(name: &str) -> Arch {
        Arch::ALL
            .iter()
            .copied()
            .find(|arch| arch.as_str() == name)
            .unwrap_or(Arch::Unknown)
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Arch {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for Arch {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Arch {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Arch::from_name(&name))
    }
}

#[cfg(test)]
mod tests {
    use crate::Arch;

    #[test]
    fn names_read_back_as_written() {
        for &arch in Arch::ALL {
            assert_eq!(Arch::from_name(arch.as_str()), arch);
            let json = serde_json::to_string(&arch).unwrap();
            assert_eq!(json, format!("\"{arch}\""));
            assert_eq!(serde_json::from_str::<Arch>(&json).unwrap(), arch);
        }
        assert_eq!(Arch::from_name("x86-64"), Arch::Unknown);
        assert_eq!(Arch::from_name("X86"), Arch::Unknown);
    }
}
