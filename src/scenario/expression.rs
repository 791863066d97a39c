//! Matrix-entry expressions over the scenario's `[params]`.
//!
//! The language is the one of the scenario format (README): numbers (also `1e-3`), `+ - * / ^` (power),
//! parentheses, unary minus, `sqrt`, `sin`, `cos`, `exp`, the constant `pi`, and param names.
//! It is evaluated with `exmex`, but with an operator set restricted to exactly that language:
//! exmex's default set would read `e` and `E` as Euler's number (so a param called `e` would be
//! silently ignored, and `1e-3` would mean `1 * 2.718 - 3`). Any other name is an unknown param.
//!
//! Before exmex sees an expression, a small recursive-descent check (`Syntax`) parses it with the
//! usual grammar, for two reasons: clear messages ("missing `)`", "unknown function `tan`"), and
//! to reject the forms where exmex's reading differs from the usual one. exmex binds unary minus
//! tighter than `^` and chains `^` to the left (`-2^2 = 4`, `2^3^2 = 64`), and applies functions
//! without parentheses; so `-a^b`, `a^b^c` and `sin x` are errors asking for parentheses. On every
//! accepted expression exmex and the usual reading agree.

use exmex::{BinOp, Express, FlatEx, MakeOperators, MatchLiteral, Operator};

/// The function and constant names of the expression language; they cannot be param names.
pub const RESERVED: [&str; 5] = ["pi", "sqrt", "sin", "cos", "exp"];

/// Exactly the operators of the scenario expression language.
#[derive(Clone, Debug)]
struct ScenarioOps;

impl MakeOperators<f64> for ScenarioOps {
    fn make<'a>() -> Vec<Operator<'a, f64>> {
        // Priorities as in exmex's FloatOpsFactory.
        vec![
            Operator::make_bin(
                "^",
                BinOp {
                    apply: f64::powf,
                    prio: 4,
                    is_commutative: false,
                },
            ),
            Operator::make_bin(
                "*",
                BinOp {
                    apply: |a, b| a * b,
                    prio: 2,
                    is_commutative: true,
                },
            ),
            Operator::make_bin(
                "/",
                BinOp {
                    apply: |a, b| a / b,
                    prio: 3,
                    is_commutative: false,
                },
            ),
            Operator::make_bin_unary(
                "+",
                BinOp {
                    apply: |a, b| a + b,
                    prio: 0,
                    is_commutative: true,
                },
                |a| a,
            ),
            Operator::make_bin_unary(
                "-",
                BinOp {
                    apply: |a, b| a - b,
                    prio: 1,
                    is_commutative: false,
                },
                |a| -a,
            ),
            Operator::make_unary("sqrt", f64::sqrt),
            Operator::make_unary("sin", f64::sin),
            Operator::make_unary("cos", f64::cos),
            Operator::make_unary("exp", f64::exp),
            Operator::make_constant("pi", std::f64::consts::PI),
        ]
    }
}

/// Decimal literals with an optional exponent: `2`, `0.5`, `.5`, `3.`, `1e-3`, `2.5E+4`.
#[derive(Clone, Debug)]
struct DecimalLiteral;

impl MatchLiteral for DecimalLiteral {
    fn is_literal(text: &str) -> Option<&str> {
        let bytes = text.as_bytes();
        let digits_from = |mut i: usize| {
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            i
        };
        let int_end = digits_from(0);
        let mut end = int_end;
        if bytes.get(end) == Some(&b'.') {
            let frac_end = digits_from(end + 1);
            if int_end == 0 && frac_end == end + 1 {
                return None; // a lone "."
            }
            end = frac_end;
        } else if int_end == 0 {
            return None;
        }
        if matches!(bytes.get(end), Some(b'e' | b'E')) {
            let mut i = end + 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let exp_end = digits_from(i);
            if exp_end > i {
                end = exp_end;
            }
        }
        text.get(..end)
    }
}

type Expr = FlatEx<f64, ScenarioOps, DecimalLiteral>;

/// Whether `name` may be a param: an identifier `[A-Za-z_][A-Za-z0-9_]*` that is not reserved.
pub fn check_param_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ident = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident {
        return Err(format!(
            "`{}` is not a valid param name (letters, digits and _, not starting with a digit)",
            name.escape_debug()
        ));
    }
    if RESERVED.contains(&name) {
        return Err(format!(
            "`{name}` cannot be a param name (reserved in expressions: {})",
            RESERVED.join(", ")
        ));
    }
    Ok(())
}

/// Evaluate an expression string with the given params; the error says what is wrong
/// (without the key, which the caller adds).
pub fn evaluate(text: &str, params: &[(String, f64)]) -> Result<f64, String> {
    let shown = text.escape_debug();
    if text.trim().is_empty() {
        return Err("empty expression".to_string());
    }
    if text.len() > MAX_LEN {
        return Err(format!("expression is longer than {MAX_LEN} characters"));
    }
    // Keep exmex to the characters of the language (no `{var}` names, commas or unicode).
    if let Some(bad) = text
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || " \t_.+-*/^()".contains(c)))
    {
        return Err(format!(
            "cannot parse expression `{shown}`: unexpected character `{}`",
            bad.escape_debug()
        ));
    }
    Syntax::check(text, params).map_err(|problem| match problem {
        Problem::UnknownParam(message) => message,
        Problem::Syntax(message) => format!("cannot parse expression `{shown}`: {message}"),
    })?;
    let expr = <Expr as Express<f64>>::parse(text)
        .map_err(|_| format!("cannot parse expression `{shown}`"))?;
    let mut values = Vec::with_capacity(expr.var_names().len());
    for name in expr.var_names() {
        match params.iter().find(|(p, _)| p == name) {
            Some((_, v)) => values.push(*v),
            None => return Err(unknown_param(name, params)),
        }
    }
    let value = expr
        .eval(&values)
        .map_err(|e| format!("cannot evaluate expression `{shown}`: {e}"))?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!(
            "expression `{shown}` gives {value} (division by zero or overflow)"
        ))
    }
}

/// Bounds that keep the checker's recursion (and exmex) far from the stack limit.
const MAX_DEPTH: usize = 64;
const MAX_LEN: usize = 10_000;

/// The functions of the language.
const FUNCTIONS: [&str; 4] = ["sqrt", "sin", "cos", "exp"];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Token<'a> {
    Number(&'a str),
    Name(&'a str),
    Op(char),
    Open,
    Close,
}

impl std::fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Number(s) | Token::Name(s) => write!(f, "`{s}`"),
            Token::Op(c) => write!(f, "`{c}`"),
            Token::Open => f.write_str("`(`"),
            Token::Close => f.write_str("`)`"),
        }
    }
}

/// What a sub-expression ended up being, for the ambiguity rules.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    Power,
    Other,
}

/// Why `Syntax::check` rejected an expression.
enum Problem {
    Syntax(String),
    UnknownParam(String),
}

impl From<String> for Problem {
    fn from(message: String) -> Self {
        Problem::Syntax(message)
    }
}

/// A validating parser with the usual grammar:
/// `expr = term (("+" | "-") term)*`, `term = unary (("*" | "/") unary)*`,
/// `unary = ("+" | "-") unary | power`, `power = atom ("^" unary)?`,
/// `atom = number | pi | param | function "(" expr ")" | "(" expr ")"`.
struct Syntax<'a, 'p> {
    tokens: Vec<Token<'a>>,
    pos: usize,
    /// Nesting depth of `unary` (every recursion passes through it), bounded by `MAX_DEPTH`.
    depth: usize,
    params: &'p [(String, f64)],
}

impl<'a, 'p> Syntax<'a, 'p> {
    fn check(text: &'a str, params: &'p [(String, f64)]) -> Result<(), Problem> {
        let mut parser = Syntax {
            tokens: tokenize(text).map_err(Problem::Syntax)?,
            pos: 0,
            depth: 0,
            params,
        };
        parser.expr()?;
        match parser.peek() {
            None => Ok(()),
            Some(Token::Close) => Err("unbalanced `)`".to_string().into()),
            Some(t) => Err(format!("expected an operator before {t}{}", parser.after()).into()),
        }
    }

    fn peek(&self) -> Option<Token<'a>> {
        self.tokens.get(self.pos).copied()
    }

    fn bump(&mut self) {
        self.pos += 1;
    }

    /// " (after `x`)" for the token before the current one.
    fn after(&self) -> String {
        match self.pos.checked_sub(1).and_then(|i| self.tokens.get(i)) {
            Some(t) => format!(" (after {t})"),
            None => String::new(),
        }
    }

    fn expr(&mut self) -> Result<(), Problem> {
        self.term()?;
        while let Some(Token::Op('+' | '-')) = self.peek() {
            self.bump();
            self.term()?;
        }
        Ok(())
    }

    fn term(&mut self) -> Result<(), Problem> {
        self.unary()?;
        while let Some(Token::Op('*' | '/')) = self.peek() {
            self.bump();
            self.unary()?;
        }
        Ok(())
    }

    fn unary(&mut self) -> Result<Shape, Problem> {
        if self.depth >= MAX_DEPTH {
            return Err(format!("nested more than {MAX_DEPTH} levels deep").into());
        }
        self.depth += 1;
        let shape = self.unary_inner();
        self.depth -= 1;
        shape
    }

    fn unary_inner(&mut self) -> Result<Shape, Problem> {
        if let Some(Token::Op(sign @ ('+' | '-'))) = self.peek() {
            self.bump();
            if self.unary()? == Shape::Power {
                return Err(
                    format!("`{sign}a^b` is ambiguous: write {sign}(a^b) or ({sign}a)^b").into(),
                );
            }
            return Ok(Shape::Other);
        }
        self.power()
    }

    fn power(&mut self) -> Result<Shape, Problem> {
        self.atom()?;
        if let Some(Token::Op('^')) = self.peek() {
            self.bump();
            if self.unary()? == Shape::Power {
                return Err("`a^b^c` is ambiguous: write (a^b)^c or a^(b^c)"
                    .to_string()
                    .into());
            }
            return Ok(Shape::Power);
        }
        Ok(Shape::Other)
    }

    fn atom(&mut self) -> Result<(), Problem> {
        let Some(token) = self.peek() else {
            return Err(
                format!("expected a number, param or `(` at the end{}", self.after()).into(),
            );
        };
        self.bump();
        match token {
            Token::Number(_) => Ok(()),
            Token::Name(name) if FUNCTIONS.contains(&name) => {
                if self.peek() != Some(Token::Open) {
                    return Err(format!("write {name}(...) with parentheses").into());
                }
                self.bump();
                self.parenthesised()
            }
            Token::Name(name) => {
                let known = name == "pi" || self.params.iter().any(|(p, _)| p == name);
                if self.peek() == Some(Token::Open) {
                    return Err(Problem::Syntax(if known {
                        format!("`{name}` is not a function (write {name}*(...))")
                    } else {
                        format!(
                            "unknown function `{name}` (functions are: {})",
                            FUNCTIONS.join(", ")
                        )
                    }));
                }
                if !known {
                    return Err(Problem::UnknownParam(unknown_param(name, self.params)));
                }
                Ok(())
            }
            Token::Open => self.parenthesised(),
            other => {
                self.pos -= 1;
                Err(format!(
                    "expected a number, param or `(` before {other}{}",
                    self.after()
                )
                .into())
            }
        }
    }

    /// The rest of `( expr )` after the opening parenthesis.
    fn parenthesised(&mut self) -> Result<(), Problem> {
        self.expr()?;
        if self.peek() == Some(Token::Close) {
            self.bump();
            Ok(())
        } else {
            Err("missing `)`".to_string().into())
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token<'_>>, String> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let len = if c == ' ' || c == '\t' {
            1
        } else if let Some(number) = DecimalLiteral::is_literal(rest) {
            tokens.push(Token::Number(number));
            number.len()
        } else if c.is_ascii_alphabetic() || c == '_' {
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            tokens.push(Token::Name(&rest[..len]));
            len
        } else {
            tokens.push(match c {
                '+' | '-' | '*' | '/' | '^' => Token::Op(c),
                '(' => Token::Open,
                ')' => Token::Close,
                other => return Err(format!("unexpected character `{}`", other.escape_debug())),
            });
            c.len_utf8()
        };
        rest = &rest[len..];
    }
    Ok(tokens)
}

fn unknown_param(name: &str, params: &[(String, f64)]) -> String {
    if params.is_empty() {
        format!("unknown param `{name}` (there is no [params] table)")
    } else {
        // At most MAX_LISTED names, so an error line stays one readable line.
        const MAX_LISTED: usize = 12;
        let names: Vec<&str> = params
            .iter()
            .take(MAX_LISTED)
            .map(|(p, _)| p.as_str())
            .collect();
        let more = match params.len().saturating_sub(MAX_LISTED) {
            0 => String::new(),
            k => format!(" and {k} more"),
        };
        format!(
            "unknown param `{name}` (params are: {}{more})",
            names.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    fn params() -> Vec<(String, f64)> {
        vec![("v11".into(), 0.2), ("v12".into(), 1.5), ("e".into(), 10.0)]
    }

    fn ev(text: &str) -> f64 {
        evaluate(text, &params()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn the_listed_language_works() {
        assert_eq!(ev("-v12"), -1.5);
        assert_eq!(ev("2^3"), 8.0);
        assert!((ev("sqrt(2)/2") - 0.5f64.sqrt()).abs() < 1e-15);
        assert!((ev("cos(pi/4)") - (PI / 4.0).cos()).abs() < 1e-15);
        assert!((ev("exp(1)") - std::f64::consts::E).abs() < 1e-15);
        assert!((ev("sin(pi)")).abs() < 1e-15);
        assert_eq!(ev("(v11 + v12) * 2"), 3.4);
        assert_eq!(ev("v11 - v12"), 0.2 - 1.5);
        assert_eq!(ev("1 - 2 - 3"), -4.0);
        assert_eq!(ev("8 / 2 / 2"), 2.0);
        assert_eq!(ev("2 * 3 + 4 * 5"), 26.0);
        assert_eq!(ev("-(v11)"), -0.2);
        assert_eq!(ev(" 0.5 "), 0.5);
        assert_eq!(ev("pi"), PI);
    }

    #[test]
    fn scientific_literals_and_e_as_a_param() {
        assert_eq!(ev("1e-3"), 1e-3);
        assert_eq!(ev("2.5E+2"), 250.0);
        assert_eq!(ev(".5"), 0.5);
        // `e` is a param here, not Euler's number.
        assert_eq!(ev("2*e"), 20.0);
    }

    #[test]
    fn unknown_names_are_unknown_params() {
        let err = evaluate("v13 + 1", &params()).unwrap_err();
        assert_eq!(err, "unknown param `v13` (params are: v11, v12, e)");
        let err = evaluate("PI", &[]).unwrap_err();
        assert!(err.contains("unknown param `PI`"), "{err}");
        assert!(err.contains("no [params]"), "{err}");
        let err = evaluate("E", &params()).unwrap_err();
        assert!(err.contains("unknown param `E`"), "{err}");
    }

    #[test]
    fn bad_expressions_are_errors_not_panics() {
        for text in [
            "", " ", "1 +", "(1", "1)", "*", "sqrt", "sqrt()", "{x}", "1,2", "π", "v11 v12", "((",
            "..", ".", "1..2", "1e", "-", "^^", "()", "2 ^", "tan(1)", "abs(-1)", "a\u{0}b",
        ] {
            assert!(evaluate(text, &params()).is_err(), "{text:?} should fail");
        }
    }

    #[test]
    fn parse_errors_are_clear() {
        let msg = |t: &str| evaluate(t, &params()).unwrap_err();
        assert!(msg("(1 + 2").ends_with("missing `)`"), "{}", msg("(1 + 2"));
        assert!(msg("1 + 2)").ends_with("unbalanced `)`"));
        assert!(
            msg("tan(1)").contains("unknown function `tan` (functions are: sqrt, sin, cos, exp)")
        );
        assert!(msg("v11(2)").contains("`v11` is not a function"));
        assert!(msg("sin 1").contains("write sin(...)"));
        assert!(msg("2 pi").contains("expected an operator before `pi` (after `2`)"));
        assert!(msg("1 +").contains("at the end (after `+`)"));
        assert!(msg("1 + * 2").contains("before `*` (after `+`)"));
        assert!(msg("1 # 2").contains("unexpected character `#`"));
        assert!(!msg("v11 +* 2").contains("Operator {"));
    }

    #[test]
    fn forms_read_differently_by_exmex_are_rejected() {
        // exmex would give -2^2 = 4 and 2^3^2 = 64.
        assert!(evaluate("-2^2", &[])
            .unwrap_err()
            .contains("write -(a^b) or (-a)^b"));
        assert!(evaluate("-v11^2", &params())
            .unwrap_err()
            .contains("ambiguous"));
        assert!(evaluate("2*-v11^2", &params())
            .unwrap_err()
            .contains("ambiguous"));
        assert!(evaluate("2^3^2", &[])
            .unwrap_err()
            .contains("write (a^b)^c or a^(b^c)"));
        // With parentheses both readings are available.
        assert_eq!(evaluate("-(2^2)", &[]), Ok(-4.0));
        assert_eq!(evaluate("(-2)^2", &[]), Ok(4.0));
        assert_eq!(evaluate("2^(3^2)", &[]), Ok(512.0));
        assert_eq!(evaluate("(2^3)^2", &[]), Ok(64.0));
        // Unambiguous neighbours stay allowed.
        assert_eq!(evaluate("2^-1", &[]), Ok(0.5));
        assert_eq!(evaluate("-2*3^2", &[]), Ok(-18.0));
        assert_eq!(evaluate("exp(1)^2", &[]), Ok(std::f64::consts::E.powi(2)));
        assert_eq!(evaluate("1 - -1", &[]), Ok(2.0));
    }

    /// A plain reference evaluator with the usual grammar (right-associative `^` binding tighter
    /// than unary minus), to compare exmex against on random expressions.
    fn reference(tokens: &[&str], vars: &[(String, f64)]) -> Option<f64> {
        fn expr(t: &[&str], i: &mut usize, v: &[(String, f64)]) -> Option<f64> {
            let mut x = term(t, i, v)?;
            while let Some(&op) = t.get(*i).filter(|o| **o == "+" || **o == "-") {
                *i += 1;
                let y = term(t, i, v)?;
                x = if op == "+" { x + y } else { x - y };
            }
            Some(x)
        }
        fn term(t: &[&str], i: &mut usize, v: &[(String, f64)]) -> Option<f64> {
            let mut x = unary(t, i, v)?;
            while let Some(&op) = t.get(*i).filter(|o| **o == "*" || **o == "/") {
                *i += 1;
                let y = unary(t, i, v)?;
                x = if op == "*" { x * y } else { x / y };
            }
            Some(x)
        }
        fn unary(t: &[&str], i: &mut usize, v: &[(String, f64)]) -> Option<f64> {
            match t.get(*i) {
                Some(&"-") => {
                    *i += 1;
                    Some(-unary(t, i, v)?)
                }
                Some(&"+") => {
                    *i += 1;
                    unary(t, i, v)
                }
                _ => power(t, i, v),
            }
        }
        fn power(t: &[&str], i: &mut usize, v: &[(String, f64)]) -> Option<f64> {
            let base = atom(t, i, v)?;
            if t.get(*i) == Some(&"^") {
                *i += 1;
                return Some(base.powf(unary(t, i, v)?));
            }
            Some(base)
        }
        fn atom(t: &[&str], i: &mut usize, v: &[(String, f64)]) -> Option<f64> {
            let tok = *t.get(*i)?;
            *i += 1;
            let f: Option<fn(f64) -> f64> = match tok {
                "sqrt" => Some(f64::sqrt),
                "sin" => Some(f64::sin),
                "cos" => Some(f64::cos),
                "exp" => Some(f64::exp),
                _ => None,
            };
            if let Some(f) = f {
                if t.get(*i) != Some(&"(") {
                    return None;
                }
                *i += 1;
                let x = expr(t, i, v)?;
                (t.get(*i) == Some(&")")).then(|| *i += 1)?;
                return Some(f(x));
            }
            if tok == "(" {
                let x = expr(t, i, v)?;
                (t.get(*i) == Some(&")")).then(|| *i += 1)?;
                return Some(x);
            }
            if tok == "pi" {
                return Some(PI);
            }
            if let Ok(x) = tok.parse::<f64>() {
                return Some(x);
            }
            v.iter().find(|(n, _)| n == tok).map(|(_, x)| *x)
        }
        let mut i = 0;
        let x = expr(tokens, &mut i, vars)?;
        (i == tokens.len()).then_some(x)
    }

    #[test]
    fn random_expressions_never_panic_and_agree_with_the_usual_reading() {
        use rand::{RngExt, SeedableRng};
        let pieces = [
            "v11", "v12", "2", "0.5", "3", "1e-1", "pi", "sqrt", "sin", "cos", "exp", "(", ")",
            "(", ")", "+", "-", "*", "/", "^", "-", "2", "v11",
        ];
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let vars = params();
        let mut accepted = 0;
        for _ in 0..30000 {
            let len = rng.random_range(1..10);
            let tokens: Vec<&str> = (0..len)
                .map(|_| pieces[rng.random_range(0..pieces.len())])
                .collect();
            let text = tokens.join(" ");
            let ours = evaluate(&text, &vars);
            let theirs = reference(&tokens, &vars).filter(|x| x.is_finite());
            match (ours, theirs) {
                (Ok(a), Some(b)) => {
                    accepted += 1;
                    assert!(
                        a == b || (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                        "{text}: exmex {a}, reference {b}"
                    );
                }
                // Rejected as ambiguous (or non-finite) although the usual reading has a value.
                (Err(e), Some(_)) => assert!(
                    e.contains("ambiguous") || e.contains("overflow"),
                    "{text}: {e}"
                ),
                (Ok(a), None) => panic!("{text}: accepted ({a}) but not a valid expression"),
                (Err(_), None) => {}
            }
        }
        assert!(
            accepted > 1000,
            "only {accepted} random expressions were valid"
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = format!("{}1{}", "(".repeat(3000), ")".repeat(3000));
        assert!(evaluate(&deep, &[]).unwrap_err().contains("levels deep"));
        let signs = format!("{}1", "-".repeat(5000));
        assert!(evaluate(&signs, &[]).unwrap_err().contains("levels deep"));
        let long = vec!["1"; 6000].join("+");
        assert!(evaluate(&long, &[]).unwrap_err().contains("longer than"));
        let ok = format!("{}1{}", "(".repeat(30), ")".repeat(30));
        assert_eq!(evaluate(&ok, &[]), Ok(1.0));
        assert_eq!(evaluate(&vec!["1"; 1000].join("+"), &[]), Ok(1000.0));
    }

    #[test]
    fn non_finite_results_are_errors() {
        let err = evaluate("1/0", &[]).unwrap_err();
        assert!(err.contains("division by zero or overflow"), "{err}");
        assert!(evaluate("exp(1000)", &[]).is_err());
        assert!(evaluate("sqrt(-1)", &[]).is_err());
        assert!(evaluate("1e400", &[]).is_err());
    }

    #[test]
    fn param_names() {
        assert!(check_param_name("v11").is_ok());
        assert!(check_param_name("_a1").is_ok());
        assert!(check_param_name("E").is_ok());
        assert!(check_param_name("pi").is_err());
        assert!(check_param_name("sqrt").is_err());
        assert!(check_param_name("1a").is_err());
        assert!(check_param_name("a-b").is_err());
        assert!(check_param_name("").is_err());
    }
}
