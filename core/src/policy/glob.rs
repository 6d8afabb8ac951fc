//! Shell-style globs for approval rules: `*` matches any run of characters, `?` one
//! character, everything else itself (case-sensitive). No character classes: names and ids
//! here are plain.

/// True when `text` matches `pattern` as a whole.
pub fn matches(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Iterative matching with one backtrack point (the last `*`): linear in practice.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn table() {
        let cases = [
            ("orders", "orders", true),
            ("orders", "orders-v2", false),
            ("orders*", "orders-v2", true),
            ("orders*", "orders", true),
            ("*-prod", "payments-prod", true),
            ("*-prod", "payments-prod-2", false),
            ("pay*prod*", "payments-prod-2", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*", "", true),
            ("", "", true),
            ("", "x", false),
            ("eu-*", "eu-west-1", true),
            ("eu-*", "us-east-1", false),
            ("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
            ("Orders", "orders", false),
        ];
        for (pattern, text, want) in cases {
            assert_eq!(matches(pattern, text), want, "{pattern:?} ~ {text:?}");
        }
    }
}
