//! The tokens of packetdrill's script language, with the line and column each starts at.
//!
//! The language is free-form (newlines are whitespace); `//` and `/* */` comments vanish
//! here. Numbers follow packetdrill's lexer: `[-]?[0-9]*.[0-9]+` is a float, `[-]?[0-9]+`
//! an integer, `0x..` hex, four dotted numbers an IPv4 address; a run of letters, digits
//! and `_` that is not a number is a word. `--name[=value]` options keep their raw value.

use std::fmt;

/// Where a token starts in the script (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Pos {
    /// Line number.
    pub line: u32,
    /// Column number (in characters).
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A decimal number with a fraction, kept as written (times are parsed exactly).
    Float(String),
    /// A decimal integer.
    Int(i64),
    /// A `0x` integer.
    Hex(i64),
    /// A word: names, symbols, flags.
    Word(String),
    /// A double-quoted string (quotes removed, escapes kept).
    Str(String),
    /// A back-quoted shell command.
    Backquoted(String),
    /// A `%{ ... }%` code block (trimmed).
    Code(String),
    /// `...`.
    Ellipsis,
    /// `--name` or `--name=value`.
    Opt(String, Option<String>),
    /// Four dotted decimal numbers.
    Ipv4(String),
    /// Any other single character.
    Punct(char),
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Float(s) | Tok::Word(s) | Tok::Ipv4(s) => f.write_str(s),
            Tok::Int(i) => write!(f, "{i}"),
            Tok::Hex(i) => write!(f, "{i:#x}"),
            Tok::Str(s) => write!(f, "\"{s}\""),
            Tok::Backquoted(s) => write!(f, "`{s}`"),
            Tok::Code(_) => f.write_str("%{...}%"),
            Tok::Ellipsis => f.write_str("..."),
            Tok::Opt(n, None) => write!(f, "--{n}"),
            Tok::Opt(n, Some(v)) => write!(f, "--{n}={v}"),
            Tok::Punct(c) => write!(f, "{c}"),
        }
    }
}

/// A token and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Its position.
    pub pos: Pos,
}

/// A lexical error: an unterminated string, comment or code block, or a number too large.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    /// Where the offending token starts.
    pub pos: Pos,
    /// What is wrong.
    pub message: String,
}

struct Cursor<'a> {
    chars: Vec<char>,
    i: usize,
    line: u32,
    col: u32,
    _src: &'a str,
}

impl Cursor<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.get(self.i).copied()?;
        self.i += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }

    fn starts_with(&self, s: &str) -> bool {
        s.chars().enumerate().all(|(k, c)| self.peek(k) == Some(c))
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek(0) {
            if !f(c) {
                break;
            }
            s.push(c);
            self.bump();
        }
        s
    }

    /// Consumes up to and including `end`; returns the text before it.
    fn until(&mut self, end: &str, start: Pos, what: &str) -> Result<String, LexError> {
        let mut s = String::new();
        loop {
            if self.starts_with(end) {
                for _ in 0..end.chars().count() {
                    self.bump();
                }
                return Ok(s);
            }
            match self.bump() {
                Some(c) => s.push(c),
                None => {
                    return Err(LexError {
                        pos: start,
                        message: format!("unterminated {what}"),
                    })
                }
            }
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Splits a script into tokens.
///
/// # Errors
/// [`LexError`] for unterminated strings, comments and code blocks, and integers that do
/// not fit in 64 bits.
pub fn lex(src: &str) -> Result<Vec<Token>, LexError> {
    let mut c = Cursor {
        chars: src.chars().collect(),
        i: 0,
        line: 1,
        col: 1,
        _src: src,
    };
    let mut out = Vec::new();
    while let Some(ch) = c.peek(0) {
        let pos = c.pos();
        if ch.is_whitespace() {
            c.bump();
            continue;
        }
        if c.starts_with("//") {
            c.take_while(|x| x != '\n');
            continue;
        }
        if c.starts_with("/*") {
            c.bump();
            c.bump();
            c.until("*/", pos, "comment")?;
            continue;
        }
        if c.starts_with("%{") {
            c.bump();
            c.bump();
            let body = c.until("}%", pos, "code block %{ ... }%")?;
            out.push(Token {
                tok: Tok::Code(body.trim().to_string()),
                pos,
            });
            continue;
        }
        if c.starts_with("...") {
            for _ in 0..3 {
                c.bump();
            }
            out.push(Token {
                tok: Tok::Ellipsis,
                pos,
            });
            continue;
        }
        if c.starts_with("--") && c.peek(2).is_some_and(is_word_char) {
            c.bump();
            c.bump();
            let name = c.take_while(is_word_char);
            let value = if c.peek(0) == Some('=') {
                c.bump();
                let v = if c.peek(0) == Some('"') {
                    c.bump();
                    c.until("\"", pos, "string")?
                } else {
                    c.take_while(|x| !x.is_whitespace())
                };
                Some(v)
            } else {
                None
            };
            out.push(Token {
                tok: Tok::Opt(name, value),
                pos,
            });
            continue;
        }
        if ch == '"' || ch == '`' {
            c.bump();
            let mut s = String::new();
            loop {
                match c.bump() {
                    None => {
                        return Err(LexError {
                            pos,
                            message: "unterminated string".into(),
                        })
                    }
                    Some('\\') => {
                        s.push('\\');
                        if let Some(n) = c.bump() {
                            s.push(n);
                        }
                    }
                    Some(x) if x == ch => break,
                    Some(x) => s.push(x),
                }
            }
            out.push(Token {
                tok: if ch == '"' {
                    Tok::Str(s)
                } else {
                    Tok::Backquoted(s)
                },
                pos,
            });
            continue;
        }
        let neg = ch == '-' && c.peek(1).is_some_and(|d| d.is_ascii_digit() || d == '.');
        let neg_float_ok = !neg || c.peek(1).is_some_and(|d| d.is_ascii_digit()) || {
            c.peek(1) == Some('.') && c.peek(2).is_some_and(|d| d.is_ascii_digit())
        };
        let starts_number = ch.is_ascii_digit()
            || (ch == '.' && c.peek(1).is_some_and(|d| d.is_ascii_digit()))
            || (neg && neg_float_ok);
        if starts_number {
            out.push(Token {
                tok: lex_number(&mut c, pos)?,
                pos,
            });
            continue;
        }
        if is_word_char(ch) {
            let w = c.take_while(is_word_char);
            out.push(Token {
                tok: Tok::Word(w),
                pos,
            });
            continue;
        }
        c.bump();
        out.push(Token {
            tok: Tok::Punct(ch),
            pos,
        });
    }
    Ok(out)
}

fn lex_number(c: &mut Cursor<'_>, pos: Pos) -> Result<Tok, LexError> {
    let mut text = String::new();
    if c.peek(0) == Some('-') {
        text.push('-');
        c.bump();
    }
    if c.starts_with("0x") || c.starts_with("0X") {
        c.bump();
        c.bump();
        let digits = c.take_while(|x| x.is_ascii_hexdigit());
        let v = i64::from_str_radix(&digits, 16).map_err(|_| LexError {
            pos,
            message: format!("bad hex number 0x{digits}"),
        })?;
        return Ok(Tok::Hex(if text.is_empty() { v } else { -v }));
    }
    // An IPv4 address: four dotted groups of digits.
    if text.is_empty() {
        let mut k = 0;
        let mut groups = 0;
        loop {
            let start = k;
            while c.peek(k).is_some_and(|d| d.is_ascii_digit()) {
                k += 1;
            }
            if k == start {
                break;
            }
            groups += 1;
            if groups == 4 || c.peek(k) != Some('.') {
                break;
            }
            k += 1;
        }
        if groups == 4 && !c.peek(k).is_some_and(is_word_char) {
            let mut s = String::new();
            for _ in 0..k {
                s.extend(c.bump());
            }
            return Ok(Tok::Ipv4(s));
        }
    }
    let int = c.take_while(|x| x.is_ascii_digit());
    text.push_str(&int);
    if c.peek(0) == Some('.') && c.peek(1).is_some_and(|d| d.is_ascii_digit()) {
        c.bump();
        let frac = c.take_while(|x| x.is_ascii_digit());
        text.push('.');
        text.push_str(&frac);
        return Ok(Tok::Float(text));
    }
    if c.peek(0)
        .is_some_and(|x| x.is_ascii_alphabetic() || x == '_')
        && text == int
    {
        // Words may start with digits (hex blobs, names); packetdrill prefers the longer match.
        let rest = c.take_while(is_word_char);
        return Ok(Tok::Word(format!("{int}{rest}")));
    }
    text.parse::<i64>().map(Tok::Int).map_err(|_| LexError {
        pos,
        message: format!("integer {text} out of range"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        lex(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn packet_line() {
        let t = toks("+.1 < S. 0:0(0) ack 1 win 65535 <mss 1460,TS val 100 ecr 0> // c\n");
        assert_eq!(t[0], Tok::Punct('+'));
        assert_eq!(t[1], Tok::Float(".1".into()));
        assert_eq!(t[2], Tok::Punct('<'));
        assert_eq!(t[3], Tok::Word("S".into()));
        assert_eq!(t[4], Tok::Punct('.'));
        assert_eq!(t[5], Tok::Int(0));
        assert_eq!(t[6], Tok::Punct(':'));
        assert!(t.contains(&Tok::Word("ecr".into())));
        assert_eq!(t.last(), Some(&Tok::Punct('>')));
    }

    #[test]
    fn numbers_addresses_options_and_blocks() {
        let t = toks("--tolerance_usecs=10000 --ip_version=ipv4 0.1...0.2 -1 0x800 192.0.2.1 `ls` %{ x }% /* a\n b */ \"s\"");
        assert_eq!(
            t[0],
            Tok::Opt("tolerance_usecs".into(), Some("10000".into()))
        );
        assert_eq!(t[2], Tok::Float("0.1".into()));
        assert_eq!(t[3], Tok::Ellipsis);
        assert_eq!(t[4], Tok::Float("0.2".into()));
        assert_eq!(t[5], Tok::Int(-1));
        assert_eq!(t[6], Tok::Hex(0x800));
        assert_eq!(t[7], Tok::Ipv4("192.0.2.1".into()));
        assert_eq!(t[8], Tok::Backquoted("ls".into()));
        assert_eq!(t[9], Tok::Code("x".into()));
        assert_eq!(t[10], Tok::Str("s".into()));
    }

    #[test]
    fn positions_and_errors() {
        let t = lex("0 a\n  b").unwrap();
        assert_eq!(t[2].pos, Pos { line: 2, col: 3 });
        let e = lex("\n %{ never closed").unwrap_err();
        assert_eq!(e.pos, Pos { line: 2, col: 2 });
        assert!(lex("99999999999999999999").is_err());
    }
}
