//! A recursive-descent parser for packetdrill scripts (the grammar of packetdrill's
//! `parser.y`, re-expressed): options, an optional init command, events, an optional
//! cleanup command. Errors carry the line and column of the offending token.

use std::fmt;

use crate::ast::{
    Action, Direction, Event, Expr, OptSpec, Packet, PacketBody, Script, Syscall, TcpSpec, When,
};
use crate::lexer::{lex, Pos, Tok, Token};

/// A syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Where it was found.
    pub pos: Pos,
    /// What was expected or is wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pos, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Parses a script.
///
/// # Errors
/// [`ParseError`] at the first token that does not fit the grammar (or a lexical error).
pub fn parse(src: &str) -> Result<Script, ParseError> {
    let tokens = lex(src).map_err(|e| ParseError {
        pos: e.pos,
        message: e.message,
    })?;
    let lines: Vec<&str> = src.lines().collect();
    let mut p = Parser {
        toks: tokens,
        i: 0,
        lines,
    };
    let mut script = Script {
        directives: directives(src),
        ..Script::default()
    };
    while let Some(Tok::Opt(n, v)) = p.peek().cloned() {
        p.i += 1;
        script.options.push((n, v));
    }
    let mut first = true;
    while p.peek().is_some() {
        if let Some(Tok::Backquoted(cmd)) = p.peek().cloned() {
            // Init (before the first event) or cleanup (after the last) command: no time.
            let pos = p.pos();
            p.i += 1;
            script.events.push(Event {
                pos,
                text: p.line_text(pos),
                when: if first {
                    When::Absolute(0)
                } else {
                    When::Relative(0)
                },
                action: Action::Command(cmd),
            });
            continue;
        }
        first = false;
        let ev = p.event()?;
        script.events.push(ev);
    }
    Ok(script)
}

/// `// pktest: key=value key2` comments: runner settings a script asks for.
fn directives(src: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in src.lines() {
        let Some(rest) = line.trim().strip_prefix("//") else {
            continue;
        };
        let Some(rest) = rest.trim().strip_prefix("pktest:") else {
            continue;
        };
        for word in rest.split_whitespace() {
            match word.split_once('=') {
                Some((k, v)) => out.push((k.to_string(), v.to_string())),
                None => out.push((word.to_string(), String::new())),
            }
        }
    }
    out
}

struct Parser<'a> {
    toks: Vec<Token>,
    i: usize,
    lines: Vec<&'a str>,
}

type PResult<T> = Result<T, ParseError>;

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.i).map(|t| &t.tok)
    }

    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.i + k).map(|t| &t.tok)
    }

    fn pos(&self) -> Pos {
        match self.toks.get(self.i) {
            Some(t) => t.pos,
            None => self.toks.last().map_or(Pos { line: 1, col: 1 }, |t| Pos {
                line: t.pos.line,
                col: t.pos.col + 1,
            }),
        }
    }

    fn line_text(&self, pos: Pos) -> String {
        self.lines
            .get(pos.line as usize - 1)
            .map_or(String::new(), |l| l.trim().to_string())
    }

    fn err<T>(&self, message: impl Into<String>) -> PResult<T> {
        Err(ParseError {
            pos: self.pos(),
            message: message.into(),
        })
    }

    fn found(&self) -> String {
        match self.peek() {
            Some(t) => format!("'{t}'"),
            None => "end of script".into(),
        }
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.i).map(|t| t.tok.clone());
        if t.is_some() {
            self.i += 1;
        }
        t
    }

    fn is_punct(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(x)) if x == w)
    }

    fn expect_punct(&mut self, c: char, what: &str) -> PResult<()> {
        if self.is_punct(c) {
            self.i += 1;
            Ok(())
        } else {
            self.err(format!("expected '{c}' {what}, found {}", self.found()))
        }
    }

    fn int(&mut self, what: &str) -> PResult<i64> {
        match self.peek() {
            Some(Tok::Int(v)) | Some(Tok::Hex(v)) => {
                let v = *v;
                self.i += 1;
                Ok(v)
            }
            _ => self.err(format!(
                "expected {what} (an integer), found {}",
                self.found()
            )),
        }
    }

    fn ranged(&mut self, what: &str, max: i64) -> PResult<i64> {
        let pos = self.pos();
        let v = self.int(what)?;
        if !(0..=max).contains(&v) {
            return Err(ParseError {
                pos,
                message: format!("{what} {v} out of range 0..={max}"),
            });
        }
        Ok(v)
    }

    fn time(&mut self) -> PResult<u64> {
        let pos = self.pos();
        match self.next() {
            Some(Tok::Int(v)) if v >= 0 => Ok((v as u64).saturating_mul(1_000_000)),
            Some(Tok::Float(s)) if !s.starts_with('-') => Ok(secs_to_usecs(&s)),
            Some(Tok::Int(_)) | Some(Tok::Float(_)) => Err(ParseError {
                pos,
                message: "negative time".into(),
            }),
            _ => {
                self.i = self.i.saturating_sub(1);
                Err(ParseError {
                    pos,
                    message: format!(
                        "expected an event time (0.100, +0.1 or *), found {}",
                        self.found()
                    ),
                })
            }
        }
    }

    fn event(&mut self) -> PResult<Event> {
        let pos = self.pos();
        let when = if self.is_punct('*') {
            self.i += 1;
            When::Any
        } else if self.is_punct('+') {
            self.i += 1;
            let a = self.time()?;
            if self.is_punct('~') {
                self.i += 1;
                self.expect_punct('+', "in a relative time range (+a~+b)")?;
                let b = self.time()?;
                When::RelativeRange(a, b)
            } else {
                When::Relative(a)
            }
        } else {
            let a = self.time()?;
            if self.is_punct('~') {
                self.i += 1;
                When::AbsoluteRange(a, self.time()?)
            } else {
                When::Absolute(a)
            }
        };
        if let When::AbsoluteRange(a, b) | When::RelativeRange(a, b) = when {
            if b < a {
                return Err(ParseError {
                    pos,
                    message: "time range is backwards".into(),
                });
            }
        }
        let action = match self.peek().cloned() {
            Some(Tok::Punct('<')) => Action::Packet(self.packet(Direction::Inbound)?),
            Some(Tok::Punct('>')) => Action::Packet(self.packet(Direction::Outbound)?),
            Some(Tok::Backquoted(c)) => {
                self.i += 1;
                Action::Command(c)
            }
            Some(Tok::Code(c)) => {
                self.i += 1;
                Action::Code(c)
            }
            Some(Tok::Ellipsis) | Some(Tok::Word(_)) => Action::Syscall(self.syscall()?),
            _ => {
                return self.err(format!(
                "expected a packet (< or >), a system call, a `command` or %{{ code }}%, found {}",
                self.found()
            ))
            }
        };
        let outbound = matches!(&action, Action::Packet(p) if p.dir == Direction::Outbound);
        if !outbound && matches!(when, When::Any) {
            return Err(ParseError {
                pos,
                message: "event time * can only be used with outbound packets".into(),
            });
        }
        if !outbound && matches!(when, When::AbsoluteRange(..) | When::RelativeRange(..)) {
            return Err(ParseError {
                pos,
                message: "event time range can only be used with outbound packets".into(),
            });
        }
        Ok(Event {
            pos,
            text: self.line_text(pos),
            when,
            action,
        })
    }

    /// Skips a bracketed group `( ... )` / `[ ... ]` starting at the current token.
    fn skip_group(&mut self, open: char, close: char) -> PResult<()> {
        let pos = self.pos();
        let mut depth = 0;
        loop {
            match self.next() {
                Some(Tok::Punct(c)) if c == open => depth += 1,
                Some(Tok::Punct(c)) if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                Some(_) => {}
                None => {
                    return Err(ParseError {
                        pos,
                        message: format!("unclosed '{open}'"),
                    })
                }
            }
        }
    }

    fn packet(&mut self, dir: Direction) -> PResult<Packet> {
        self.i += 1;
        if let Some(Tok::Word(w)) = self.peek() {
            if matches!(w.as_str(), "ipv4" | "ipv6" | "gre" | "GREv0" | "mpls") {
                return self.err(format!(
                    "encapsulated packets ({w} ...:) are not supported by this runner"
                ));
            }
        }
        // IP info: [ect0], (tos 0x..), [ttl 64] — the runner models no IP header fields.
        if self.is_punct('(') {
            self.skip_group('(', ')')?;
        } else if self.is_punct('[') {
            self.skip_group('[', ']')?;
        }
        let ports = self.opt_ports()?;
        if self.is_word("udp") {
            self.i += 1;
            let ports = ports.or(self.opt_ports()?);
            self.expect_punct('(', "before the UDP payload length")?;
            let len = self.ranged("UDP payload length", 65535)? as u16;
            self.expect_punct(')', "after the UDP payload length")?;
            return Ok(Packet {
                dir,
                ports,
                body: PacketBody::Udp { len },
            });
        }
        if self.is_word("icmp") {
            self.i += 1;
            return Ok(Packet {
                dir,
                ports,
                body: self.icmp()?,
            });
        }
        let tcp = self.tcp(dir)?;
        Ok(Packet {
            dir,
            ports,
            body: PacketBody::Tcp(tcp),
        })
    }

    fn opt_ports(&mut self) -> PResult<Option<(u16, u16)>> {
        if matches!(self.peek(), Some(Tok::Int(_))) && self.peek_at(1) == Some(&Tok::Punct('>')) {
            let a = self.ranged("source port", 65535)? as u16;
            self.i += 1;
            let b = self.ranged("destination port", 65535)? as u16;
            return Ok(Some((a, b)));
        }
        Ok(None)
    }

    fn icmp(&mut self) -> PResult<PacketBody> {
        let kind = match self.next() {
            Some(Tok::Word(w)) => w,
            _ => {
                self.i = self.i.saturating_sub(1);
                return self.err(format!("expected an ICMP type, found {}", self.found()));
            }
        };
        let mut code = None;
        if let Some(Tok::Word(w)) = self.peek() {
            if w != "mtu" && w != "id" {
                code = Some(w.clone());
                self.i += 1;
            }
        }
        let mut mtu = None;
        if self.is_word("mtu") {
            self.i += 1;
            mtu = Some(self.ranged("ICMP mtu", u32::MAX.into())? as u32);
        }
        if self.is_word("id") {
            self.i += 1;
            self.int("ICMP echo id")?;
        }
        let mut echoed_seq = None;
        if self.is_punct('[') {
            self.i += 1;
            if self.is_word("udp") || self.is_word("raw") {
                self.i += 1;
                self.skip_group('(', ')')?;
            } else {
                let (seq, _) = self.seq()?;
                echoed_seq = Some(seq);
            }
            self.expect_punct(']', "after the echoed header")?;
        }
        Ok(PacketBody::Icmp {
            kind,
            code,
            mtu,
            echoed_seq,
        })
    }

    fn seq(&mut self) -> PResult<(u32, u16)> {
        let pos = self.pos();
        let a = self.ranged("start sequence number", u32::MAX.into())?;
        self.expect_punct(':', "in the sequence range start:end(len)")?;
        let b = self.ranged("end sequence number", u32::MAX.into())?;
        self.expect_punct('(', "before the payload length")?;
        let len = self.ranged("payload length", 65535)?;
        self.expect_punct(')', "after the payload length")?;
        if b != a + len {
            return Err(ParseError {
                pos,
                message: format!(
                    "inconsistent TCP sequence numbers and payload size: {a}:{b}({len})"
                ),
            });
        }
        Ok((a as u32, len as u16))
    }

    fn tcp(&mut self, dir: Direction) -> PResult<TcpSpec> {
        let flags = match self.peek().cloned() {
            Some(Tok::Word(w)) => {
                self.i += 1;
                let mut f = w;
                if self.is_punct('.') {
                    self.i += 1;
                    f.push('.');
                }
                f
            }
            Some(Tok::Punct('.')) => {
                self.i += 1;
                ".".into()
            }
            Some(Tok::Punct('-')) => {
                self.i += 1;
                String::new()
            }
            _ => {
                return self.err(format!(
                    "expected TCP flags (S, S., ., P., F., R, ...), found {}",
                    self.found()
                ))
            }
        };
        if let Some(bad) = flags.chars().find(|c| !"FSRP.EWAU".contains(*c)) {
            return self.err(format!("unknown TCP flag '{bad}' in '{flags}'"));
        }
        let (seq, len) = self.seq()?;
        let mut spec = TcpSpec {
            flags,
            seq,
            len,
            ack: None,
            win: None,
            urg: 0,
            options: Some(Vec::new()),
        };
        if self.is_word("ack") {
            self.i += 1;
            spec.ack = Some(self.ranged("ack number", u32::MAX.into())? as u32);
        }
        if self.is_word("win") {
            self.i += 1;
            spec.win = Some(self.ranged("window", 65535)? as u16);
        } else if dir == Direction::Inbound {
            return self.err("window must be specified for inbound packets (win N)");
        }
        if self.is_word("urg") {
            self.i += 1;
            spec.urg = self.ranged("urgent pointer", 65535)? as u16;
        }
        if self.is_punct('<') {
            self.i += 1;
            if self.peek() == Some(&Tok::Ellipsis) {
                self.i += 1;
                if dir == Direction::Inbound {
                    return self
                        .err("<...> for TCP options can only be used with outbound packets");
                }
                spec.options = None;
            } else {
                spec.options = Some(self.tcp_options()?);
            }
            self.expect_punct('>', "to close the TCP option list")?;
        }
        if self.is_punct('{') {
            // Fuzzing parameters: not modelled.
            self.skip_group('{', '}')?;
        }
        Ok(spec)
    }

    fn tcp_options(&mut self) -> PResult<Vec<OptSpec>> {
        let mut out = Vec::new();
        loop {
            let pos = self.pos();
            let word = match self.next() {
                Some(Tok::Word(w)) => w,
                _ => {
                    self.i = self.i.saturating_sub(1);
                    return self.err(format!("expected a TCP option, found {}", self.found()));
                }
            };
            let opt = match word.as_str() {
                "nop" => OptSpec::Nop,
                "eol" => OptSpec::Eol,
                "mss" => OptSpec::Mss(self.ranged("mss", 65535)? as u16),
                "wscale" => OptSpec::Wscale(self.ranged("window scale", 255)? as u8),
                "sackOK" => OptSpec::SackOk,
                "sack" => {
                    let mut blocks = Vec::new();
                    while matches!(self.peek(), Some(Tok::Int(_))) {
                        let a = self.ranged("SACK left edge", u32::MAX.into())? as u32;
                        self.expect_punct(':', "in a SACK block a:b")?;
                        let b = self.ranged("SACK right edge", u32::MAX.into())? as u32;
                        blocks.push((a, b));
                    }
                    if blocks.is_empty() {
                        return self.err("expected SACK blocks (a:b ...)");
                    }
                    OptSpec::Sack(blocks)
                }
                "TS" => {
                    if !self.is_word("val") {
                        return self.err("expected 'val' after TS");
                    }
                    self.i += 1;
                    let v = self.ranged("TS val", u32::MAX.into())? as u32;
                    if !self.is_word("ecr") {
                        return self.err("expected 'ecr' after TS val");
                    }
                    self.i += 1;
                    let e = self.ranged("TS ecr", u32::MAX.into())? as u32;
                    OptSpec::Ts(v, e)
                }
                "md5" | "FO" | "FOEXP" => {
                    if matches!(self.peek(), Some(Tok::Word(_)) | Some(Tok::Int(_))) {
                        self.i += 1;
                    }
                    OptSpec::Other(word)
                }
                _ => {
                    return Err(ParseError {
                        pos,
                        message: format!("unknown TCP option '{word}'"),
                    })
                }
            };
            out.push(opt);
            if self.is_punct(',') {
                self.i += 1;
            } else {
                return Ok(out);
            }
        }
    }

    fn syscall(&mut self) -> PResult<Syscall> {
        let mut end = None;
        if self.peek() == Some(&Tok::Ellipsis) {
            self.i += 1;
            end = Some(self.time()?);
        }
        let name = match self.next() {
            Some(Tok::Word(w)) => w,
            _ => {
                self.i = self.i.saturating_sub(1);
                return self.err(format!(
                    "expected a system call name, found {}",
                    self.found()
                ));
            }
        };
        self.expect_punct('(', "after the system call name")?;
        let args = if self.is_punct(')') {
            Vec::new()
        } else {
            self.expr_list(')')?
        };
        self.expect_punct(')', "to close the argument list")?;
        self.expect_punct('=', "before the expected return value")?;
        let result = self.expr()?;
        let mut errno = None;
        if let Some(Tok::Word(w)) = self.peek().cloned() {
            self.i += 1;
            errno = Some(w);
        }
        if self.is_punct('(') {
            self.skip_group('(', ')')?;
        }
        Ok(Syscall {
            end,
            name,
            args,
            result,
            errno,
        })
    }

    fn expr_list(&mut self, close: char) -> PResult<Vec<Expr>> {
        let mut v = vec![self.expr()?];
        while self.is_punct(',') {
            self.i += 1;
            v.push(self.expr()?);
        }
        if !self.is_punct(close) {
            return self.err(format!("expected ',' or '{close}', found {}", self.found()));
        }
        Ok(v)
    }

    fn expr(&mut self) -> PResult<Expr> {
        let mut e = self.primary()?;
        while self.is_punct('|') {
            self.i += 1;
            let r = self.primary()?;
            e = Expr::Or(Box::new(e), Box::new(r));
        }
        Ok(e)
    }

    fn primary(&mut self) -> PResult<Expr> {
        match self.peek().cloned() {
            Some(Tok::Ellipsis) => {
                self.i += 1;
                Ok(Expr::Ellipsis)
            }
            Some(Tok::Int(v)) | Some(Tok::Hex(v)) => {
                self.i += 1;
                Ok(Expr::Int(v))
            }
            Some(Tok::Str(s)) => {
                self.i += 1;
                let mut s = s;
                while let Some(Tok::Str(more)) = self.peek().cloned() {
                    self.i += 1;
                    s.push_str(&more);
                }
                if self.peek() == Some(&Tok::Ellipsis) {
                    self.i += 1;
                }
                Ok(Expr::Str(s))
            }
            Some(Tok::Word(w)) => {
                self.i += 1;
                if self.is_punct('=') {
                    self.i += 1;
                    return Ok(Expr::Field(w, Box::new(self.expr()?)));
                }
                if self.is_punct('(') {
                    if w == "sizeof" {
                        self.skip_group('(', ')')?;
                        return Ok(Expr::Call(w, Vec::new()));
                    }
                    self.i += 1;
                    let args = if self.is_punct(')') {
                        Vec::new()
                    } else {
                        self.expr_list(')')?
                    };
                    self.i += 1;
                    return Ok(Expr::Call(w, args));
                }
                Ok(Expr::Word(w))
            }
            Some(Tok::Punct('[')) => {
                self.i += 1;
                let items = if self.is_punct(']') {
                    Vec::new()
                } else {
                    self.expr_list(']')?
                };
                self.i += 1;
                Ok(Expr::Array(items))
            }
            Some(Tok::Punct('{')) => {
                self.i += 1;
                let items = if self.is_punct('}') {
                    Vec::new()
                } else {
                    self.expr_list('}')?
                };
                self.i += 1;
                Ok(Expr::Struct(items))
            }
            _ => self.err(format!("expected an expression, found {}", self.found())),
        }
    }
}

/// `"0.100"` → 100000 µs, exactly (no float rounding).
fn secs_to_usecs(s: &str) -> u64 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let int: u64 = int.parse().unwrap_or(0);
    let mut us = 0u64;
    for (k, d) in frac.chars().take(6).enumerate() {
        us += u64::from(d.to_digit(10).unwrap_or(0)) * 10u64.pow(5 - k as u32);
    }
    int.saturating_mul(1_000_000).saturating_add(us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_passive_open() {
        let s = parse(
            "--tolerance_usecs=5000\n\
             0   socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n\
             +0  setsockopt(3, SOL_SOCKET, SO_REUSEADDR, [1], 4) = 0\n\
             +0  bind(3, ..., ...) = 0\n\
             +0  listen(3, 1) = 0\n\
             +0  < S 0:0(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>\n\
             +0  > S. 0:0(0) ack 1 <...>\n\
             +.1 < . 1:1(0) ack 1 win 257\n\
             +0  accept(3, ..., ...) = 4\n\
             +0...0.2 read(4, ..., 1000) = -1 EAGAIN (Resource temporarily unavailable)\n\
             * > F. 1:1(0) ack 1\n",
        )
        .unwrap();
        assert_eq!(
            s.options,
            vec![("tolerance_usecs".into(), Some("5000".into()))]
        );
        assert_eq!(s.events.len(), 10);
        let Action::Packet(p) = &s.events[4].action else {
            panic!()
        };
        let PacketBody::Tcp(t) = &p.body else {
            panic!()
        };
        assert_eq!(t.flags, "S");
        assert_eq!(t.win, Some(32792));
        assert_eq!(
            t.options.as_ref().unwrap()[..2],
            [OptSpec::Mss(1000), OptSpec::SackOk]
        );
        let Action::Packet(p) = &s.events[5].action else {
            panic!()
        };
        let PacketBody::Tcp(t) = &p.body else {
            panic!()
        };
        assert_eq!(
            (t.flags.as_str(), t.ack, t.options.is_none()),
            ("S.", Some(1), true)
        );
        assert_eq!(s.events[6].when, When::Relative(100_000));
        let Action::Syscall(c) = &s.events[8].action else {
            panic!()
        };
        assert_eq!((c.end, c.errno.as_deref()), (Some(200_000), Some("EAGAIN")));
        assert_eq!(s.events[9].when, When::Any);
        assert_eq!(s.events[2].text, "+0  bind(3, ..., ...) = 0");
    }

    #[test]
    fn expressions() {
        let s = parse(
            "0 poll([{fd=4, events=POLLIN|POLLOUT, revents=POLLOUT}], 1, 0) = 1\n\
             0 getsockopt(4, SOL_TCP, TCP_INFO, {tcpi_state=TCP_ESTABLISHED}, [sizeof(struct tcp_info)]) = 0\n\
             0 bind(3, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr(\"192.0.2.1\")}, 16) = 0\n",
        )
        .unwrap();
        let Action::Syscall(c) = &s.events[0].action else {
            panic!()
        };
        let Expr::Array(v) = &c.args[0] else { panic!() };
        assert!(matches!(v[0].field("events"), Some(Expr::Or(..))));
        let Action::Syscall(c) = &s.events[2].action else {
            panic!()
        };
        assert_eq!(
            c.args[1].field("sin_port"),
            Some(&Expr::Call("htons".into(), vec![Expr::Int(8080)]))
        );
    }

    #[test]
    fn errors_point_at_the_token() {
        let e = parse("0 < S 0:0(0)\n").unwrap_err();
        assert!(e.message.contains("window must be specified"), "{e}");
        let e = parse("0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n+0 > S 0:5(0) <mss 1>\n")
            .unwrap_err();
        assert_eq!(e.pos, Pos { line: 2, col: 8 });
        let e = parse("0 > S 0:0(0) <bogus 1>\n").unwrap_err();
        assert_eq!((e.pos.line, e.pos.col), (1, 15));
        let e = parse("0 < * x\n").unwrap_err();
        assert_eq!(e.pos, Pos { line: 1, col: 5 });
        assert!(parse("* read(3, ..., 1) = 1\n").is_err());
        assert!(parse("0.2~0.1 > . 1:1(0) ack 1\n").is_err());
    }

    #[test]
    fn time_is_exact() {
        assert_eq!(secs_to_usecs("0.1"), 100_000);
        assert_eq!(secs_to_usecs(".000001"), 1);
        assert_eq!(secs_to_usecs("2.5"), 2_500_000);
    }

    #[test]
    fn skipped_lines_and_directives() {
        let s = parse(
            "// pktest: profile=linux lenient\n`sysctl -q x=1`\n0 `echo hi`\n+0 %{ assert 1 }%\n",
        )
        .unwrap();
        assert_eq!(s.directives[0], ("profile".into(), "linux".into()));
        assert_eq!(s.directives[1], ("lenient".into(), String::new()));
        assert!(matches!(s.events[0].action, Action::Command(_)));
        assert!(matches!(s.events[2].action, Action::Code(_)));
    }
}
