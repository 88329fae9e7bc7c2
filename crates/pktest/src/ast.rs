//! What a parsed script says: options, then events, each a time and an action (a packet,
//! a system call, a shell command or a code block). Sequence numbers stay in script space
//! (relative to the ISNs); the interpreter maps them.

use crate::lexer::Pos;

/// A whole script.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// `--name[=value]` options at the top, in order.
    pub options: Vec<(String, Option<String>)>,
    /// `// pktest: key=value ...` directives found in comments.
    pub directives: Vec<(String, String)>,
    /// The events, in order.
    pub events: Vec<Event>,
}

/// When an event happens, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// `0.100`: microseconds since the script started.
    Absolute(u64),
    /// `+0.100`: microseconds after the previous event.
    Relative(u64),
    /// `*`: any time (outbound packets only).
    Any,
    /// `0.1~0.2`.
    AbsoluteRange(u64, u64),
    /// `+0.1~+0.2`.
    RelativeRange(u64, u64),
}

/// One line of the script.
#[derive(Debug, Clone)]
pub struct Event {
    /// Where the event's time starts.
    pub pos: Pos,
    /// The event's source text (its first line, trimmed), for reports.
    pub text: String,
    /// Its time.
    pub when: When,
    /// What happens.
    pub action: Action,
}

/// What an event does.
#[derive(Debug, Clone)]
pub enum Action {
    /// A packet the script injects (`<`) or expects (`>`).
    Packet(Packet),
    /// A system call and its expected result.
    Syscall(Syscall),
    /// A back-quoted shell command.
    Command(String),
    /// A `%{ }%` code block.
    Code(String),
}

/// Packet direction, from the stack's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Direction {
    /// `<`: into the stack.
    Inbound,
    /// `>`: out of the stack.
    Outbound,
}

/// A packet line.
#[derive(Debug, Clone)]
pub struct Packet {
    /// Direction.
    pub dir: Direction,
    /// Explicit `src>dst` ports, if given.
    pub ports: Option<(u16, u16)>,
    /// The transport part.
    pub body: PacketBody,
}

/// The transport part of a packet line.
#[derive(Debug, Clone)]
pub enum PacketBody {
    /// A TCP segment.
    Tcp(TcpSpec),
    /// `udp (LEN)`.
    Udp {
        /// Payload length.
        len: u16,
    },
    /// `icmp TYPE [CODE] [mtu N] [id N] [[echoed]]`.
    Icmp {
        /// Type word (e.g. `unreachable`).
        kind: String,
        /// Code word (e.g. `frag_needed`).
        code: Option<String>,
        /// `mtu N`.
        mtu: Option<u32>,
        /// Sequence number of the echoed TCP header, script space.
        echoed_seq: Option<u32>,
    },
}

/// A TCP segment as a script writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpSpec {
    /// Flag letters as written (`S.`, `P.`, `.`, `F.`, `R`, ...).
    pub flags: String,
    /// Start of the sequence range.
    pub seq: u32,
    /// Payload length.
    pub len: u16,
    /// `ack N`, if written.
    pub ack: Option<u32>,
    /// `win N`, if written (outbound: unchecked when absent).
    pub win: Option<u16>,
    /// `urg N`.
    pub urg: u16,
    /// Options; `None` for `<...>` (any options).
    pub options: Option<Vec<OptSpec>>,
}

/// One TCP option in a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptSpec {
    /// `nop`.
    Nop,
    /// `eol`.
    Eol,
    /// `mss N`.
    Mss(u16),
    /// `wscale N`.
    Wscale(u8),
    /// `sackOK`.
    SackOk,
    /// `sack a:b c:d ...`.
    Sack(Vec<(u32, u32)>),
    /// `TS val V ecr E`.
    Ts(u32, u32),
    /// An option this runner does not model (`md5`, `FO`, `FOEXP`), kept by name.
    Other(String),
}

/// A system call line.
#[derive(Debug, Clone)]
pub struct Syscall {
    /// `...END` for blocking calls: the end time, in the same mode as the start.
    pub end: Option<u64>,
    /// Function name.
    pub name: String,
    /// Arguments.
    pub args: Vec<Expr>,
    /// Expected return value.
    pub result: Expr,
    /// Expected errno name (`EAGAIN`), when the result is -1.
    pub errno: Option<String>,
}

/// An expression in a system call.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `...`: anything.
    Ellipsis,
    /// An integer.
    Int(i64),
    /// A symbol (`SOCK_STREAM`, `POLLIN`).
    Word(String),
    /// A string.
    Str(String),
    /// `a | b`.
    Or(Box<Expr>, Box<Expr>),
    /// `name = value` (struct fields).
    Field(String, Box<Expr>),
    /// `[a, b]`: arrays and pointers to values.
    Array(Vec<Expr>),
    /// `{a, b}`: structs.
    Struct(Vec<Expr>),
    /// `f(a, b)`: `htons(8080)`, `inet_addr("...")`, `sizeof(...)`.
    Call(String, Vec<Expr>),
}

impl Expr {
    /// The struct field `name`, if this is a struct that has it.
    pub fn field(&self, name: &str) -> Option<&Expr> {
        match self {
            Expr::Struct(items) => items.iter().find_map(|e| match e {
                Expr::Field(n, v) if n == name => Some(&**v),
                _ => None,
            }),
            _ => None,
        }
    }
}
