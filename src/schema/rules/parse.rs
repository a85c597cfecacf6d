//! Reading a rule's text: tokens with their positions, then the expression they form.

use super::{Cmp, Expr, Kind, Lit, Operand, Root, RuleError, fail};
use crate::schema::format;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    At(String),
    Str(String),
    Num(String),
    Op(&'static str),
    LParen,
    RParen,
    Comma,
    Dot,
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, RuleError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let name_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let tok = match c {
            _ if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b',' => Tok::Comma,
            b'.' => Tok::Dot,
            b'\'' | b'"' => {
                let end = text[i + 1..].find(c as char).ok_or_else(|| RuleError {
                    at: start,
                    message: "a text is never closed".into(),
                })?;
                i += end + 2;
                out.push((
                    Tok::Str(text[start + 1..start + 1 + end].to_string()),
                    start,
                ));
                continue;
            }
            b'@' => {
                i += 1;
                while i < b.len() && name_char(b[i]) {
                    i += 1;
                }
                out.push((Tok::At(text[start + 1..i].to_string()), start));
                continue;
            }
            _ if c.is_ascii_digit()
                || (c == b'-' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) =>
            {
                i += 1;
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                    i += 1;
                }
                out.push((Tok::Num(text[start..i].to_string()), start));
                continue;
            }
            _ if name_char(c) => {
                while i < b.len() && name_char(b[i]) {
                    i += 1;
                }
                out.push((Tok::Name(text[start..i].to_string()), start));
                continue;
            }
            _ => {
                let op = ["&&", "||", "!=", "<=", ">=", "=", "<", ">", "~", "!"]
                    .into_iter()
                    .find(|op| text[i..].starts_with(op));
                match op {
                    Some(op) => {
                        i += op.len();
                        out.push((Tok::Op(op), start));
                        continue;
                    }
                    None => return fail(start, format!("unexpected `{}`", c as char)),
                }
            }
        };
        i += 1;
        out.push((tok, start));
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn at(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |(_, a)| *a)
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, RuleError> {
        let mut left = self.and()?;
        while self.eat(&Tok::Op("||")) {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, RuleError> {
        let mut left = self.unary()?;
        while self.eat(&Tok::Op("&&")) {
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, RuleError> {
        if self.eat(&Tok::Op("!")) {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat(&Tok::LParen) {
            let inner = self.or()?;
            if !self.eat(&Tok::RParen) {
                return fail(self.at(), "a `(` is never closed");
            }
            return Ok(inner);
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, RuleError> {
        let left = self.operand()?;
        if matches!(self.peek(), Some(Tok::Name(n)) if n == "in") {
            self.pos += 1;
            return Ok(Expr::In {
                left,
                list: self.list()?,
            });
        }
        let op = match self.peek() {
            Some(Tok::Op("=")) => Cmp::Eq,
            Some(Tok::Op("!=")) => Cmp::Ne,
            Some(Tok::Op("<")) => Cmp::Lt,
            Some(Tok::Op("<=")) => Cmp::Le,
            Some(Tok::Op(">")) => Cmp::Gt,
            Some(Tok::Op(">=")) => Cmp::Ge,
            Some(Tok::Op("~")) => Cmp::Contains,
            _ => {
                return fail(
                    self.at(),
                    "expected a comparison (`=`, `!=`, `<`, `<=`, `>`, `>=`, `~` or `in`)",
                );
            }
        };
        self.pos += 1;
        let right = self.operand()?;
        Ok(Expr::Compare { op, left, right })
    }

    fn list(&mut self) -> Result<Vec<Operand>, RuleError> {
        if !self.eat(&Tok::LParen) {
            return fail(
                self.at(),
                "`in` takes a list in parentheses: `in ('a', 'b')`",
            );
        }
        let mut items = vec![self.operand()?];
        while self.eat(&Tok::Comma) {
            items.push(self.operand()?);
        }
        if !self.eat(&Tok::RParen) {
            return fail(self.at(), "the list of `in` is never closed");
        }
        Ok(items)
    }

    fn operand(&mut self) -> Result<Operand, RuleError> {
        let at = self.at();
        let Some((tok, _)) = self.toks.get(self.pos).cloned() else {
            return fail(at, "the rule ends where a value was expected");
        };
        self.pos += 1;
        let (root, first) = match tok {
            Tok::Str(s) => return Ok(Operand::Lit(Lit::Str(s))),
            Tok::Num(n) => return Ok(Operand::Lit(Lit::Num(n))),
            Tok::Name(n) if n == "true" || n == "false" => {
                return Ok(Operand::Lit(Lit::Bool(n == "true")));
            }
            Tok::Name(n) if n == "null" => return Ok(Operand::Lit(Lit::Null)),
            Tok::Name(n) => (Root::Row, Some(n)),
            Tok::At(a) if a == "caller" => (Root::Caller, None),
            Tok::At(a) if a == "new" => (Root::New, None),
            Tok::At(a) => {
                return fail(
                    at,
                    format::with_hint(
                        format!("unknown `@{a}`: use `@caller` or `@new`"),
                        &a,
                        ["caller", "new"],
                    ),
                );
            }
            _ => return fail(at, "expected a field, `@caller.`, `@new.` or a value"),
        };
        let mut names: Vec<String> = first.into_iter().collect();
        while names.is_empty() || self.peek() == Some(&Tok::Dot) {
            if (!names.is_empty() || root != Root::Row) && !self.eat(&Tok::Dot) {
                return fail(self.at(), "expected `.` and a field name");
            }
            match self.toks.get(self.pos) {
                Some((Tok::Name(n), _)) => {
                    names.push(n.clone());
                    self.pos += 1;
                }
                _ => return fail(self.at(), "expected a field name after `.`"),
            }
        }
        Ok(Operand::Path {
            root,
            names,
            at,
            steps: Vec::new(),
            kind: Kind::Null,
        })
    }
}

/// Parses a rule's value: `public`, a list of roles, or an expression (not yet checked).
pub fn parse(text: &str) -> Result<Expr, RuleError> {
    let toks = lex(text)?;
    if toks.is_empty() {
        return fail(0, "the rule is empty");
    }
    let mut p = Parser {
        toks,
        pos: 0,
        end: text.len(),
    };
    let e = p.or()?;
    if p.pos < p.toks.len() {
        return fail(
            p.at(),
            "unexpected text after the rule (join rules with `&&` or `||`)",
        );
    }
    Ok(e)
}
