//! A small eBPF assembler: typed instruction builders, forward/backward labels, and
//! map references by file descriptor, so the steering program is written in Rust and
//! loaded with `bpf(2)` without clang or libbpf.
//!
//! Encoding reference: Documentation/bpf/standardization/instruction-set.rst (RFC 9669).
//! Each instruction is 8 bytes: opcode, `src << 4 | dst`, a signed 16-bit offset and a
//! signed 32-bit immediate; `lddw` (64-bit immediate) takes two slots.

use std::fmt;

use crate::sys::bpf::BpfInsn;

/// An eBPF register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reg {
    /// Return value, helper results.
    R0 = 0,
    /// First argument (the context at entry).
    R1,
    /// Second argument.
    R2,
    /// Third argument.
    R3,
    /// Fourth argument.
    R4,
    /// Fifth argument.
    R5,
    /// Callee-saved.
    R6,
    /// Callee-saved.
    R7,
    /// Callee-saved.
    R8,
    /// Callee-saved.
    R9,
    /// Read-only frame pointer.
    R10,
}

/// Memory access width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// 1 byte.
    B,
    /// 2 bytes.
    H,
    /// 4 bytes.
    W,
    /// 8 bytes.
    Dw,
}

impl Size {
    fn bits(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::H => 0x08,
            Size::B => 0x10,
            Size::Dw => 0x18,
        }
    }
}

/// 64-bit ALU operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alu {
    /// `dst += src`.
    Add = 0x00,
    /// `dst -= src`.
    Sub = 0x10,
    /// `dst |= src`.
    Or = 0x40,
    /// `dst &= src`.
    And = 0x50,
    /// `dst <<= src`.
    Lsh = 0x60,
    /// `dst >>= src` (logical).
    Rsh = 0x70,
    /// `dst ^= src`.
    Xor = 0xa0,
    /// `dst = src`.
    Mov = 0xb0,
}

/// Conditional jump tests (unsigned unless noted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// `==`.
    Eq = 0x10,
    /// `>`.
    Gt = 0x20,
    /// `>=`.
    Ge = 0x30,
    /// `dst & src != 0`.
    Set = 0x40,
    /// `!=`.
    Ne = 0x50,
    /// `<`.
    Lt = 0xa0,
    /// `<=`.
    Le = 0xb0,
}

const CLASS_LD: u8 = 0x00;
const CLASS_LDX: u8 = 0x01;
const CLASS_ST: u8 = 0x02;
const CLASS_STX: u8 = 0x03;
const CLASS_JMP: u8 = 0x05;
const CLASS_ALU64: u8 = 0x07;
const MODE_IMM: u8 = 0x00;
const MODE_MEM: u8 = 0x60;
const MODE_ATOMIC: u8 = 0xc0;
/// `BPF_ADD` in an atomic instruction's immediate (no fetch).
const ATOMIC_ADD: i32 = 0x00;
const SRC_K: u8 = 0x00;
const SRC_X: u8 = 0x08;
const OP_JA: u8 = 0x00;
const OP_CALL: u8 = 0x80;
const OP_EXIT: u8 = 0x90;
/// `src_reg` value marking an `lddw` immediate as a map file descriptor.
pub const BPF_PSEUDO_MAP_FD: u8 = 1;

/// A jump target, bound to an instruction position with [`Asm::bind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(usize);

/// Why a program could not be assembled (a bug in the program generator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsmError {
    /// A jump refers to a label that was never bound.
    UnboundLabel(usize),
    /// A jump is further than a 16-bit offset reaches.
    JumpTooFar(usize),
}

impl fmt::Display for AsmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AsmError::UnboundLabel(l) => write!(f, "label {l} is never bound"),
            AsmError::JumpTooFar(at) => write!(f, "jump at instruction {at} is out of range"),
        }
    }
}

impl std::error::Error for AsmError {}

/// An instruction stream under construction.
#[derive(Debug, Default)]
pub struct Asm {
    insns: Vec<BpfInsn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
}

fn insn(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> BpfInsn {
    BpfInsn {
        code,
        regs: (src as u8) << 4 | dst as u8,
        off,
        imm,
    }
}

impl Asm {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    /// Instructions so far (slots, counting `lddw` as two).
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Whether nothing has been emitted.
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// A new, unbound label.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Binds `label` to the next instruction.
    ///
    /// # Panics
    /// If the label is already bound (a generator bug).
    pub fn bind(&mut self, label: Label) {
        assert!(
            self.labels[label.0].is_none(),
            "label {} bound twice",
            label.0
        );
        self.labels[label.0] = Some(self.insns.len());
    }

    fn push(&mut self, i: BpfInsn) -> &mut Self {
        self.insns.push(i);
        self
    }

    fn jump(&mut self, i: BpfInsn, target: Label) -> &mut Self {
        self.fixups.push((self.insns.len(), target));
        self.push(i)
    }

    /// `dst = imm` (64-bit, sign-extended).
    pub fn mov_imm(&mut self, dst: Reg, imm: i32) -> &mut Self {
        self.alu_imm(Alu::Mov, dst, imm)
    }

    /// `dst = src`.
    pub fn mov(&mut self, dst: Reg, src: Reg) -> &mut Self {
        self.alu(Alu::Mov, dst, src)
    }

    /// `dst op= imm` (64-bit).
    pub fn alu_imm(&mut self, op: Alu, dst: Reg, imm: i32) -> &mut Self {
        self.push(insn(CLASS_ALU64 | SRC_K | op as u8, dst, Reg::R0, 0, imm))
    }

    /// `dst op= src` (64-bit).
    pub fn alu(&mut self, op: Alu, dst: Reg, src: Reg) -> &mut Self {
        self.push(insn(CLASS_ALU64 | SRC_X | op as u8, dst, src, 0, 0))
    }

    /// `dst = *(size *)(src + off)`.
    pub fn ldx(&mut self, size: Size, dst: Reg, src: Reg, off: i16) -> &mut Self {
        self.push(insn(CLASS_LDX | MODE_MEM | size.bits(), dst, src, off, 0))
    }

    /// `*(size *)(dst + off) = src`.
    pub fn stx(&mut self, size: Size, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.push(insn(CLASS_STX | MODE_MEM | size.bits(), dst, src, off, 0))
    }

    /// `*(size *)(dst + off) += src`, atomically (`BPF_ATOMIC` with `BPF_ADD`; the old
    /// `BPF_XADD` encoding). Only word and double-word sizes exist.
    pub fn atomic_add(&mut self, size: Size, dst: Reg, off: i16, src: Reg) -> &mut Self {
        self.push(insn(
            CLASS_STX | MODE_ATOMIC | size.bits(),
            dst,
            src,
            off,
            ATOMIC_ADD,
        ))
    }

    /// `*(size *)(dst + off) = imm`.
    pub fn st_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) -> &mut Self {
        self.push(insn(
            CLASS_ST | MODE_MEM | size.bits(),
            dst,
            Reg::R0,
            off,
            imm,
        ))
    }

    /// `dst = imm64` (two slots).
    pub fn ld_imm64(&mut self, dst: Reg, imm: u64) -> &mut Self {
        self.push(insn(
            CLASS_LD | MODE_IMM | Size::Dw.bits(),
            dst,
            Reg::R0,
            0,
            imm as u32 as i32,
        ));
        self.push(insn(0, Reg::R0, Reg::R0, 0, (imm >> 32) as u32 as i32))
    }

    /// `dst = &map` for the map open as `fd` (the kernel swaps the fd for the map
    /// pointer at load time).
    pub fn ld_map_fd(&mut self, dst: Reg, fd: i32) -> &mut Self {
        let mut first = insn(CLASS_LD | MODE_IMM | Size::Dw.bits(), dst, Reg::R0, 0, fd);
        first.regs |= BPF_PSEUDO_MAP_FD << 4;
        self.push(first);
        self.push(insn(0, Reg::R0, Reg::R0, 0, 0))
    }

    /// `if dst cond imm goto target`.
    pub fn jmp_imm(&mut self, cond: Cond, dst: Reg, imm: i32, target: Label) -> &mut Self {
        self.jump(
            insn(CLASS_JMP | SRC_K | cond as u8, dst, Reg::R0, 0, imm),
            target,
        )
    }

    /// `if dst cond src goto target`.
    pub fn jmp(&mut self, cond: Cond, dst: Reg, src: Reg, target: Label) -> &mut Self {
        self.jump(insn(CLASS_JMP | SRC_X | cond as u8, dst, src, 0, 0), target)
    }

    /// `goto target`.
    pub fn ja(&mut self, target: Label) -> &mut Self {
        self.jump(insn(CLASS_JMP | OP_JA, Reg::R0, Reg::R0, 0, 0), target)
    }

    /// Calls kernel helper number `helper`.
    pub fn call(&mut self, helper: i32) -> &mut Self {
        self.push(insn(CLASS_JMP | OP_CALL, Reg::R0, Reg::R0, 0, helper))
    }

    /// Returns `r0`.
    pub fn exit(&mut self) -> &mut Self {
        self.push(insn(CLASS_JMP | OP_EXIT, Reg::R0, Reg::R0, 0, 0))
    }

    /// Resolves labels and returns the instructions.
    ///
    /// # Errors
    /// [`AsmError`] for an unbound label or an out-of-range jump.
    pub fn finish(mut self) -> Result<Vec<BpfInsn>, AsmError> {
        for &(at, Label(l)) in &self.fixups {
            let target = self.labels[l].ok_or(AsmError::UnboundLabel(l))?;
            // Offsets count from the instruction after the jump.
            let off = target as i64 - (at as i64 + 1);
            self.insns[at].off = i16::try_from(off).map_err(|_| AsmError::JumpTooFar(at))?;
        }
        Ok(self.insns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(i: &[BpfInsn]) -> Vec<[u8; 8]> {
        i.iter()
            .map(|i| {
                let mut b = [0u8; 8];
                b[0] = i.code;
                b[1] = i.regs;
                b[2..4].copy_from_slice(&i.off.to_le_bytes());
                b[4..8].copy_from_slice(&i.imm.to_le_bytes());
                b
            })
            .collect()
    }

    // Golden encodings as `llvm-objdump -d` prints them for the same instructions.
    #[test]
    fn golden_encodings() {
        let mut a = Asm::new();
        a.mov_imm(Reg::R0, 2) // b7 00 00 00 02 00 00 00  r0 = 2
            .ldx(Size::W, Reg::R2, Reg::R1, 0) // 61 12 00 00 00 00 00 00  r2 = *(u32 *)(r1 + 0)
            .ldx(Size::W, Reg::R3, Reg::R1, 4) // 61 13 04 00 00 00 00 00
            .ldx(Size::H, Reg::R4, Reg::R2, 12) // 69 24 0c 00 00 00 00 00
            .ldx(Size::B, Reg::R5, Reg::R2, 23) // 71 25 17 00 00 00 00 00
            .stx(Size::W, Reg::R10, -4, Reg::R1) // 63 1a fc ff 00 00 00 00
            .st_imm(Size::W, Reg::R10, -8, 0) // 62 0a f8 ff 00 00 00 00
            .mov(Reg::R6, Reg::R1) // bf 16 00 00 00 00 00 00
            .alu_imm(Alu::Add, Reg::R2, -4) // 07 02 00 00 fc ff ff ff
            .alu_imm(Alu::And, Reg::R1, 0xf) // 57 01 00 00 0f 00 00 00
            .alu_imm(Alu::Lsh, Reg::R1, 2) // 67 01 00 00 02 00 00 00
            .alu_imm(Alu::Rsh, Reg::R1, 4) // 77 01 00 00 04 00 00 00
            .alu(Alu::Add, Reg::R3, Reg::R9) // 0f 93 00 00 00 00 00 00
            .call(51) // 85 00 00 00 33 00 00 00
            .exit(); // 95 00 00 00 00 00 00 00
        let got = bytes(&a.finish().unwrap());
        let want: [[u8; 8]; 15] = [
            [0xb7, 0x00, 0, 0, 2, 0, 0, 0],
            [0x61, 0x12, 0, 0, 0, 0, 0, 0],
            [0x61, 0x13, 4, 0, 0, 0, 0, 0],
            [0x69, 0x24, 12, 0, 0, 0, 0, 0],
            [0x71, 0x25, 23, 0, 0, 0, 0, 0],
            [0x63, 0x1a, 0xfc, 0xff, 0, 0, 0, 0],
            [0x62, 0x0a, 0xf8, 0xff, 0, 0, 0, 0],
            [0xbf, 0x16, 0, 0, 0, 0, 0, 0],
            [0x07, 0x02, 0, 0, 0xfc, 0xff, 0xff, 0xff],
            [0x57, 0x01, 0, 0, 0x0f, 0, 0, 0],
            [0x67, 0x01, 0, 0, 2, 0, 0, 0],
            [0x77, 0x01, 0, 0, 4, 0, 0, 0],
            [0x0f, 0x93, 0, 0, 0, 0, 0, 0],
            [0x85, 0x00, 0, 0, 0x33, 0, 0, 0],
            [0x95, 0x00, 0, 0, 0, 0, 0, 0],
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn map_fd_load_takes_two_slots() {
        let mut a = Asm::new();
        a.ld_map_fd(Reg::R1, 5);
        let got = bytes(&a.finish().unwrap());
        // 18 11 00 00 05 00 00 00 / 00 ...: lddw r1, map fd 5 (src = BPF_PSEUDO_MAP_FD)
        assert_eq!(got, [[0x18, 0x11, 0, 0, 5, 0, 0, 0], [0; 8]]);
        let mut a = Asm::new();
        a.ld_imm64(Reg::R2, 0x1122_3344_5566_7788);
        let got = bytes(&a.finish().unwrap());
        assert_eq!(
            got,
            [
                [0x18, 0x02, 0, 0, 0x88, 0x77, 0x66, 0x55],
                [0, 0, 0, 0, 0x44, 0x33, 0x22, 0x11]
            ]
        );
    }

    #[test]
    fn jumps_resolve_forward_and_backward() {
        let mut a = Asm::new();
        let top = a.label();
        let out = a.label();
        a.bind(top);
        a.jmp_imm(Cond::Eq, Reg::R1, 0x0008, out) // 15 01 +2 ; 08 00 00 00
            .jmp(Cond::Gt, Reg::R4, Reg::R3, out) // 2d 34 +1
            .ja(top); // 05 00 -3
        a.bind(out);
        a.exit();
        let got = bytes(&a.finish().unwrap());
        assert_eq!(got[0], [0x15, 0x01, 2, 0, 8, 0, 0, 0]);
        assert_eq!(got[1], [0x2d, 0x34, 1, 0, 0, 0, 0, 0]);
        assert_eq!(got[2], [0x05, 0x00, 0xfd, 0xff, 0, 0, 0, 0]);
    }

    #[test]
    fn unbound_label_is_an_error() {
        let mut a = Asm::new();
        let l = a.label();
        a.ja(l);
        assert_eq!(a.finish(), Err(AsmError::UnboundLabel(0)));
    }

    #[test]
    fn too_far_jump_is_an_error() {
        let mut a = Asm::new();
        let l = a.label();
        a.ja(l);
        for _ in 0..40_000 {
            a.mov_imm(Reg::R0, 0);
        }
        a.bind(l);
        a.exit();
        assert_eq!(a.finish(), Err(AsmError::JumpTooFar(0)));
    }
}
