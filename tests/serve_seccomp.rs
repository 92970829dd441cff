//! `serve` where a seccomp profile refuses `openat2` with `EPERM` (Docker's before 20.10, some
//! CI runners' still): the checked fallback opens the store's files, as where the kernel has
//! no `openat2` (`ENOSYS`), and still follows no symbolic link. The profile is installed by a
//! python wrapper (prctl through ctypes) before it runs symdex.

mod common;

use common::{get, Server, Workdir};

/// `python3 -c SECCOMP PROGRAM ARGS...`: runs PROGRAM with `openat2` (system call 437 on every
/// Linux architecture) failing with `EPERM`.
const SECCOMP: &str = r#"
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
# ld [nr]; nr == 437 ? return ERRNO(EPERM) : return ALLOW
insns = [(0x20, 0, 0, 0), (0x15, 0, 1, 437), (0x06, 0, 0, 0x00050001), (0x06, 0, 0, 0x7FFF0000)]
prog = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *i) for i in insns))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fprog = Fprog(len(insns), ctypes.cast(prog, ctypes.c_void_p))
u = ctypes.c_ulong
# PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP with SECCOMP_MODE_FILTER.
if libc.prctl(38, u(1), u(0), u(0), u(0)) != 0 or libc.prctl(22, u(2), ctypes.byref(fprog), u(0), u(0)) != 0:
    sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[1], sys.argv[1:])
"#;

#[test]
fn an_openat2_refused_with_eperm_takes_the_checked_fallback() {
    let w = Workdir::new();
    let store = w.path("store");
    std::fs::create_dir_all(store.join("buildid/ab")).unwrap();
    std::fs::write(store.join("buildid/ab/debuginfo"), "debug bytes").unwrap();
    std::fs::write(w.path("outside"), "not the store's").unwrap();
    std::os::unix::fs::symlink(w.path("outside"), store.join("buildid/ab/executable")).unwrap();
    let server = Server::start_wrapped(&store, &["python3", "-c", SECCOMP]);
    let (status, _, body) = get(&server.addr, "/buildid/ab/debuginfo").unwrap();
    assert_eq!((status, body.as_slice()), (200, &b"debug bytes"[..]));
    assert_eq!(get(&server.addr, "/buildid/ab/executable").unwrap().0, 404);
}
