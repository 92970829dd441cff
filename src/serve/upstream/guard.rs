//! The name resolver of every upstream request: an upstream's own host resolves as it does,
//! and any other host (one it redirected to) may not resolve to a loopback, private,
//! link-local or otherwise internal address unless the upstream itself is on one. Checked on
//! the addresses connected to, so a name that resolves to a public address when looked up
//! and to `169.254.169.254` when connected (DNS rebinding) is caught too.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};

use http::Uri;
use ureq::config::Config;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

use super::origin::Origin;

#[derive(Debug)]
pub struct Guard {
    /// The upstream's own origin.
    own: Origin,
    /// The upstream's own addresses include an internal one (it is a server on the operator's
    /// network, and may send us to others there). Learnt when its name is resolved, which
    /// every download does before any redirect.
    internal_upstream: AtomicBool,
}

impl Guard {
    pub fn new(own: Origin) -> Guard {
        Guard {
            own,
            internal_upstream: AtomicBool::new(false),
        }
    }
}

impl Resolver for Guard {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let addrs = DefaultResolver::default().resolve(uri, config, timeout)?;
        let origin = Origin::of(&uri.to_string());
        let (host, port) = origin
            .as_ref()
            .map_or(("", 0), |o| (o.host.as_str(), o.port));
        if host == self.own.host && port == self.own.port {
            if addrs.iter().any(|a| internal(a.ip())) {
                self.internal_upstream.store(true, Ordering::Relaxed);
            }
            return Ok(addrs);
        }
        // A proxy from the environment is the operator's, wherever it is.
        let proxy = config
            .proxy()
            .is_some_and(|p| p.host().eq_ignore_ascii_case(host) && p.port() == port);
        if proxy || self.internal_upstream.load(Ordering::Relaxed) {
            return Ok(addrs);
        }
        let mut kept = self.empty();
        for addr in addrs.iter().filter(|a| !internal(a.ip())) {
            kept.push(*addr);
        }
        if kept.is_empty() {
            let why = format!(
                "{host} resolves to a loopback, private or link-local address, and the \
                 upstream is on none: refused"
            );
            return Err(ureq::Error::Other(why.into()));
        }
        Ok(kept)
    }
}

/// Whether `ip` is an address of this machine or its networks rather than the internet's:
/// loopback, private, link-local (cloud metadata endpoints), unique-local, carrier-grade NAT,
/// unspecified, broadcast, multicast or reserved; IPv4 inside IPv6 judged as IPv4.
pub fn internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let embedded =
                Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
            let mapped_or_compatible = s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0);
            let nat64 = s[0] == 0x64 && s[1] == 0xff9b;
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || ((mapped_or_compatible || nat64) && internal_v4(embedded))
        }
    }
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || o[0] == 0
        || o[0] >= 240
        || (o[0] == 100 && (o[1] & 0xc0) == 64)
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
        || (o[0] == 198 && (o[1] & 0xfe) == 18)
}

#[cfg(test)]
mod tests {
    use super::internal;

    #[test]
    fn internal_addresses() {
        for ip in [
            "127.0.0.2",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::1", "::ffff:8.8.8.8"] {
            assert!(!internal(ip.parse().unwrap()), "{ip}");
        }
    }
}
