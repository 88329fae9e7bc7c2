//! The `bpf(2)` system call, without libbpf: map creation and updates, program loading
//! with the verifier log captured into the error, and XDP attachment through a BPF link.
//!
//! Crash safety: an XDP program attached through `BPF_LINK_CREATE` stays attached only
//! while a file descriptor refers to the link (we never pin it). The kernel closes every
//! descriptor when a process dies, however it dies, so the program detaches on exit, on
//! panic and on `kill -9` alike.
//!
//! The attribute structures are the prefixes of `union bpf_attr` each command reads
//! (`<linux/bpf.h>`); the kernel treats missing trailing bytes as zero.

use std::fmt;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::{Error, Result};

/// `BPF_MAP_CREATE`.
const BPF_MAP_CREATE: i32 = 0;
/// `BPF_MAP_LOOKUP_ELEM`.
const BPF_MAP_LOOKUP_ELEM: i32 = 1;
/// `BPF_MAP_UPDATE_ELEM`.
const BPF_MAP_UPDATE_ELEM: i32 = 2;
/// `BPF_MAP_DELETE_ELEM`.
const BPF_MAP_DELETE_ELEM: i32 = 3;
/// `BPF_PROG_LOAD`.
const BPF_PROG_LOAD: i32 = 5;
/// `BPF_PROG_TEST_RUN`.
const BPF_PROG_TEST_RUN: i32 = 10;
/// `BPF_OBJ_GET_INFO_BY_FD`.
const BPF_OBJ_GET_INFO_BY_FD: i32 = 15;
/// `BPF_LINK_CREATE`.
const BPF_LINK_CREATE: i32 = 28;

/// `BPF_PROG_TYPE_XDP`.
pub const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` attach type.
pub const BPF_XDP: u32 = 37;
/// Program load flag: the XDP program understands multi-buffer frames.
pub const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// XDP attach flag: generic (skb) mode, works on every device.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// XDP attach flag: native (driver) mode.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// `BPF_ANY` update flag: create or replace.
pub const BPF_ANY: u64 = 0;

/// Kinds of maps the steering program uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MapType {
    /// `BPF_MAP_TYPE_HASH`.
    Hash = 1,
    /// `BPF_MAP_TYPE_ARRAY`.
    Array = 2,
    /// `BPF_MAP_TYPE_PERCPU_ARRAY`.
    PercpuArray = 6,
    /// `BPF_MAP_TYPE_LRU_HASH`: a full map evicts its least recently used entry.
    LruHash = 9,
    /// `BPF_MAP_TYPE_XSKMAP`.
    Xskmap = 17,
}

/// `struct bpf_insn`: one eBPF instruction, as the kernel reads it.
///
/// `regs` packs `dst_reg` in its low nibble and `src_reg` in its high nibble (the C
/// bitfield layout on little-endian machines, the only ones ulnet supports).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BpfInsn {
    /// Opcode.
    pub code: u8,
    /// `src << 4 | dst`.
    pub regs: u8,
    /// Signed offset.
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}
const _: () = assert!(size_of::<BpfInsn>() == 8);
#[cfg(target_endian = "big")]
compile_error!("the eBPF encoder assumes a little-endian host");

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
    map_ifindex: u32,
}
const _: () = assert!(size_of::<MapCreateAttr>() == 48);

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}
const _: () = assert!(size_of::<MapElemAttr>() == 32);

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}
const _: () = assert!(size_of::<ProgLoadAttr>() == 72);

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    _rest: [u64; 4],
}
const _: () = assert!(size_of::<LinkCreateAttr>() == 48);

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}
const _: () = assert!(size_of::<TestRunAttr>() == 80);

#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The first fields of `struct bpf_prog_info` (the kernel fills what fits).
#[repr(C)]
#[derive(Default)]
struct ProgInfoPrefix {
    prog_type: u32,
    id: u32,
}

/// Copies `name` into a kernel object name: at most 15 bytes of `[A-Za-z0-9_.]`.
fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (d, b) in out.iter_mut().take(15).zip(name.bytes()) {
        *d = if b.is_ascii_alphanumeric() || b == b'.' {
            b
        } else {
            b'_'
        };
    }
    out
}

fn bpf<T>(op: &'static str, cmd: i32, attr: &mut T) -> Result<i64> {
    // SAFETY: `attr` is a valid, initialised bpf_attr prefix of the size passed; any
    // pointers inside it were set by the caller to buffers that outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<u8>(),
            size_of::<T>() as u32,
        )
    };
    if r < 0 {
        let e = Error::last_os_error(op);
        return Err(match e.source.raw_os_error() {
            Some(libc::EPERM) => e.with_hint("bpf(2) needs root or CAP_BPF+CAP_NET_ADMIN"),
            _ => e,
        });
    }
    Ok(r)
}

fn fd_result(op: &'static str, r: i64) -> Result<OwnedFd> {
    let fd = RawFd::try_from(r)
        .map_err(|_| Error::new(op, io::Error::from_raw_os_error(libc::EBADF)))?;
    // SAFETY: the kernel returned a fresh descriptor for the new object; nothing else
    // owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A BPF map, closed (and freed once no program uses it) on drop.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    key_size: u32,
    value_size: u32,
}

impl Map {
    /// Creates a map.
    ///
    /// # Errors
    /// `bpf(BPF_MAP_CREATE)`: `EPERM` (with a hint), `EINVAL` for sizes the map type
    /// refuses, `ENOMEM`.
    pub fn create(
        kind: MapType,
        name: &str,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    ) -> Result<Self> {
        let mut attr = MapCreateAttr {
            map_type: kind as u32,
            key_size,
            value_size,
            max_entries,
            map_name: object_name(name),
            ..Default::default()
        };
        let r = bpf("bpf(BPF_MAP_CREATE)", BPF_MAP_CREATE, &mut attr)?;
        Ok(Map {
            fd: fd_result("bpf(BPF_MAP_CREATE)", r)?,
            key_size,
            value_size,
        })
    }

    fn check(&self, op: &'static str, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let bad = key.len() != self.key_size as usize
            || value.is_some_and(|v| v.len() != self.value_size as usize);
        if bad {
            return Err(Error::new(op, io::Error::from_raw_os_error(libc::EINVAL)));
        }
        Ok(())
    }

    /// Sets `key` to `value` (create or replace).
    ///
    /// # Errors
    /// `bpf(BPF_MAP_UPDATE_ELEM)`: `EINVAL` for wrong key/value sizes, `E2BIG` when a
    /// hash map is full, `EOPNOTSUPP`/`EINVAL` for an XSKMAP value that is not a bound
    /// AF_XDP socket.
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        const OP: &str = "bpf(BPF_MAP_UPDATE_ELEM)";
        self.check(OP, key, Some(value))?;
        let mut attr = MapElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value: value.as_ptr() as u64,
            flags: BPF_ANY,
            ..Default::default()
        };
        bpf(OP, BPF_MAP_UPDATE_ELEM, &mut attr)?;
        Ok(())
    }

    /// Reads `key` into `value`; `Ok(false)` when the key is absent.
    ///
    /// # Errors
    /// `bpf(BPF_MAP_LOOKUP_ELEM)` for wrong sizes or other failures.
    pub fn lookup(&self, key: &[u8], value: &mut [u8]) -> Result<bool> {
        const OP: &str = "bpf(BPF_MAP_LOOKUP_ELEM)";
        self.check(OP, key, Some(value))?;
        let mut attr = MapElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value: value.as_mut_ptr() as u64,
            ..Default::default()
        };
        match bpf(OP, BPF_MAP_LOOKUP_ELEM, &mut attr) {
            Ok(_) => Ok(true),
            Err(e) if e.source.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Removes `key`; `Ok(false)` when it was absent.
    ///
    /// # Errors
    /// `bpf(BPF_MAP_DELETE_ELEM)`.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        const OP: &str = "bpf(BPF_MAP_DELETE_ELEM)";
        self.check(OP, key, None)?;
        let mut attr = MapElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            ..Default::default()
        };
        match bpf(OP, BPF_MAP_DELETE_ELEM, &mut attr) {
            Ok(_) => Ok(true),
            Err(e) if e.source.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl AsFd for Map {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Map {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The verifier refused a program: the errno and the verifier's log, which says why.
#[derive(Debug)]
pub struct VerifierError {
    /// The errno of `BPF_PROG_LOAD` (usually `EACCES` or `EINVAL`).
    pub errno: i32,
    /// The verifier log (possibly truncated to its last lines).
    pub log: String,
}

impl fmt::Display for VerifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}; verifier log:\n{}",
            io::Error::from_raw_os_error(self.errno),
            self.log
        )
    }
}

impl std::error::Error for VerifierError {}

/// Size of the verifier log buffer (the kernel wants at least 128 bytes).
const LOG_SIZE: usize = 256 * 1024;

/// A loaded BPF program, unloaded when its last reference (this fd, a link) closes.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
}

impl Program {
    /// Loads an XDP program. `frags` sets `BPF_F_XDP_HAS_FRAGS` (the program accepts
    /// multi-buffer frames, which jumbo MTUs need). On failure the load is repeated with
    /// the verifier log enabled and the log becomes part of the error.
    ///
    /// # Errors
    /// `bpf(BPF_PROG_LOAD)`: `EPERM` (with a hint), `EACCES`/`EINVAL` with the verifier
    /// log as the source ([`VerifierError`]).
    pub fn load_xdp(
        name: &str,
        insns: &[BpfInsn],
        license: &std::ffi::CStr,
        frags: bool,
    ) -> Result<Self> {
        const OP: &str = "bpf(BPF_PROG_LOAD)";
        let mut attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: u32::try_from(insns.len())
                .map_err(|_| Error::new(OP, io::Error::from_raw_os_error(libc::E2BIG)))?,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            prog_flags: if frags { BPF_F_XDP_HAS_FRAGS } else { 0 },
            prog_name: object_name(name),
            expected_attach_type: BPF_XDP,
            ..Default::default()
        };
        match bpf(OP, BPF_PROG_LOAD, &mut attr) {
            Ok(r) => {
                return Ok(Program {
                    fd: fd_result(OP, r)?,
                })
            }
            Err(e) if e.source.raw_os_error() == Some(libc::EPERM) => return Err(e),
            Err(_) => {}
        }
        // Retry with the log: loading without it first keeps the common path cheap.
        let mut log = vec![0u8; LOG_SIZE];
        attr.log_level = 1;
        attr.log_size = LOG_SIZE as u32;
        attr.log_buf = log.as_mut_ptr() as u64;
        match bpf(OP, BPF_PROG_LOAD, &mut attr) {
            Ok(r) => Ok(Program {
                fd: fd_result(OP, r)?,
            }),
            Err(e) => {
                let errno = e.source.raw_os_error().unwrap_or(libc::EINVAL);
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                // The cause is at the end of the log; keep the last 40 lines.
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                let source = io::Error::new(
                    io::Error::from_raw_os_error(errno).kind(),
                    VerifierError { errno, log: tail },
                );
                Err(Error::new(OP, source)
                    .with_hint("the kernel's verifier refused the steering program"))
            }
        }
    }

    /// The kernel's id for this program (as `ip link` and `bpftool` show it).
    ///
    /// # Errors
    /// `bpf(BPF_OBJ_GET_INFO_BY_FD)`.
    pub fn id(&self) -> Result<u32> {
        let mut info = ProgInfoPrefix::default();
        let mut attr = InfoAttr {
            bpf_fd: self.fd.as_raw_fd() as u32,
            info_len: size_of::<ProgInfoPrefix>() as u32,
            info: (&mut info as *mut ProgInfoPrefix) as u64,
        };
        bpf(
            "bpf(BPF_OBJ_GET_INFO_BY_FD)",
            BPF_OBJ_GET_INFO_BY_FD,
            &mut attr,
        )?;
        Ok(info.id)
    }

    /// Runs the program once on `frame` in the kernel (`BPF_PROG_TEST_RUN`, no device
    /// involved) and returns its XDP verdict. Redirects to an XSKMAP report
    /// `XDP_REDIRECT` (4) without delivering anything.
    ///
    /// # Errors
    /// `bpf(BPF_PROG_TEST_RUN)`.
    pub fn test_run(&self, frame: &[u8]) -> Result<u32> {
        self.test_run_repeat(frame, 1).map(|(v, _)| v)
    }

    /// Runs the program on `frame` `repeat` times in the kernel; returns the verdict and
    /// the kernel's mean time per run in nanoseconds (what the program itself costs a
    /// frame, without the system call).
    ///
    /// # Errors
    /// As [`test_run`](Self::test_run).
    pub fn test_run_repeat(&self, frame: &[u8], repeat: u32) -> Result<(u32, u32)> {
        let mut out = vec![0u8; frame.len() + 256];
        let mut attr = TestRunAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            data_size_in: frame.len() as u32,
            data_size_out: out.len() as u32,
            data_in: frame.as_ptr() as u64,
            data_out: out.as_mut_ptr() as u64,
            repeat,
            ..Default::default()
        };
        bpf("bpf(BPF_PROG_TEST_RUN)", BPF_PROG_TEST_RUN, &mut attr)?;
        Ok((attr.retval, attr.duration))
    }
}

impl AsFd for Program {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// An XDP program attached to an interface through a BPF link. Dropping it (or the
/// process dying) detaches the program.
#[derive(Debug)]
pub struct XdpLink {
    fd: OwnedFd,
}

impl XdpLink {
    /// Attaches `prog` to interface `ifindex` with `XDP_FLAGS_*` mode `flags`.
    ///
    /// # Errors
    /// `bpf(BPF_LINK_CREATE)` with the raw OS error: `EBUSY` when another XDP program is
    /// attached, `ERANGE` when the MTU is too large for a program without frags,
    /// `EOPNOTSUPP` when the mode is unsupported. The caller adds advice.
    pub fn attach(prog: &Program, ifindex: u32, flags: u32) -> Result<Self> {
        const OP: &str = "bpf(BPF_LINK_CREATE)";
        let mut attr = LinkCreateAttr {
            prog_fd: prog.fd.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags,
            ..Default::default()
        };
        let r = bpf(OP, BPF_LINK_CREATE, &mut attr)?;
        Ok(XdpLink {
            fd: fd_result(OP, r)?,
        })
    }
}

impl AsFd for XdpLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(code: u8, regs: u8, off: i16, imm: i32) -> BpfInsn {
        BpfInsn {
            code,
            regs,
            off,
            imm,
        }
    }

    #[test]
    fn object_names_are_sanitised() {
        assert_eq!(&object_name("ulnet-steer")[..12], b"ulnet_steer\0");
        assert_eq!(object_name("a_very_long_name_indeed")[15], 0);
    }

    #[test]
    fn hash_map_roundtrip() {
        let m = Map::create(MapType::Hash, "t", 4, 1, 8).expect("bpf map (needs root or CAP_BPF)");
        let mut v = [0u8];
        assert!(!m.lookup(&[1, 2, 3, 4], &mut v).unwrap());
        m.update(&[1, 2, 3, 4], &[7]).unwrap();
        assert!(m.lookup(&[1, 2, 3, 4], &mut v).unwrap());
        assert_eq!(v, [7]);
        assert!(m.delete(&[1, 2, 3, 4]).unwrap());
        assert!(!m.delete(&[1, 2, 3, 4]).unwrap());
        assert_eq!(
            m.update(&[1, 2, 3], &[7])
                .unwrap_err()
                .source
                .raw_os_error(),
            Some(libc::EINVAL)
        );
    }

    #[test]
    fn loads_and_runs_a_trivial_program() {
        // r0 = XDP_PASS; exit
        let prog = [insn(0xb7, 0, 0, 2), insn(0x95, 0, 0, 0)];
        let p = Program::load_xdp("t", &prog, c"GPL", false).unwrap();
        assert!(p.id().unwrap() > 0);
        assert_eq!(p.test_run(&[0u8; 64]).unwrap(), 2);
    }

    #[test]
    fn verifier_log_is_in_the_error() {
        // exit without setting r0: "R0 !read_ok".
        let prog = [insn(0x95, 0, 0, 0)];
        let e = Program::load_xdp("t", &prog, c"GPL", false).unwrap_err();
        let text = format!("{e}");
        assert!(text.contains("R0"), "{text}");
        assert!(text.contains("verifier"), "{text}");
    }
}
