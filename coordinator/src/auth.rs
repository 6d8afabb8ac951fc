//! Bearer tokens with roles and names, compared in constant time.
//!
//! Every token belongs to a role (`agent`, `viewer`, `admin`) and a name, which the audit
//! records for every admin action. Token files hold `name:token` lines; a bare token (the
//! older one-per-line format) is named by a fingerprint, `token-` and the first 8 hex digits
//! of its SHA-256, so the audit can tell tokens apart without ever holding one.

use subtle::ConstantTimeEq;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Propose, report outcomes, poll its proposals' verdicts.
    Agent,
    /// Read everything an admin reads; change nothing.
    Viewer,
    /// Read everything and act: approvals, pauses, region flags, overrides, policies.
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Agent, Role::Viewer, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Viewer => "viewer",
            Role::Admin => "admin",
        }
    }
}

/// Who made a request: the role and name of its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub role: Role,
    pub name: String,
}

/// One token and the name it acts under.
#[derive(Clone, PartialEq, Eq)]
pub struct NamedToken {
    pub name: String,
    pub token: String,
}

impl std::fmt::Debug for NamedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets.
        f.debug_struct("NamedToken")
            .field("name", &self.name)
            .finish()
    }
}

/// The configured tokens.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<(Vec<u8>, Principal)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets.
        f.debug_struct("Tokens")
            .field("count", &self.entries.len())
            .finish()
    }
}

/// Why a request is not authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    Missing,
    Malformed,
    Unknown,
}

impl AuthError {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthError::Missing => "missing",
            AuthError::Malformed => "malformed",
            AuthError::Unknown => "unknown",
        }
    }
}

impl Tokens {
    /// Tokens per role.
    pub fn new(by_role: &[(Role, Vec<NamedToken>)]) -> Tokens {
        let entries = by_role
            .iter()
            .flat_map(|(role, tokens)| {
                tokens.iter().map(|t| {
                    (
                        t.token.as_bytes().to_vec(),
                        Principal {
                            role: *role,
                            name: t.name.clone(),
                        },
                    )
                })
            })
            .collect();
        Tokens { entries }
    }

    /// How many tokens of `role` `newer` has that this set lacks, and the reverse.
    pub fn changes(&self, newer: &Tokens, role: Role) -> (usize, usize) {
        let of = |t: &Tokens| -> std::collections::HashSet<Vec<u8>> {
            t.entries
                .iter()
                .filter(|(_, p)| p.role == role)
                .map(|(token, _)| token.clone())
                .collect()
        };
        let (old, new) = (of(self), of(newer));
        (new.difference(&old).count(), old.difference(&new).count())
    }

    pub fn count(&self, role: Role) -> usize {
        self.entries.iter().filter(|(_, p)| p.role == role).count()
    }

    /// Who holds the bearer token in an `Authorization` header value.
    pub fn authenticate(&self, header: Option<&[u8]>) -> Result<Principal, AuthError> {
        let header = header.ok_or(AuthError::Missing)?;
        let token = header
            .strip_prefix(b"Bearer ")
            .or_else(|| header.strip_prefix(b"bearer "))
            .ok_or(AuthError::Malformed)?;
        // Check every entry, without an early exit, so timing does not reveal which (or how
        // much of a) token matched.
        let mut found = None;
        for (candidate, principal) in &self.entries {
            if bool::from(candidate.as_slice().ct_eq(token)) {
                found = Some(principal);
            }
        }
        found.cloned().ok_or(AuthError::Unknown)
    }
}

impl Tokens {
    /// Who holds the configured token whose SHA-256 digest is `digest`. Console sessions
    /// keep this digest, never the token, so revoking a token (SIGHUP) ends its sessions at
    /// their next request.
    pub fn principal_of_digest(&self, digest: &[u8]) -> Option<Principal> {
        let mut found = None;
        for (token, principal) in &self.entries {
            let candidate = ring::digest::digest(&ring::digest::SHA256, token);
            if bool::from(candidate.as_ref().ct_eq(digest)) {
                found = Some(principal);
            }
        }
        found.cloned()
    }
}

/// A token file line (or an inline token) that cannot be used. Never holds the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct TokenLineError {
    /// 1-based line number (the entry's position for inline tokens).
    pub line: usize,
    pub message: String,
}

/// Parses a token file: `name:token` or a bare token per line; blank lines and `#`
/// comments are skipped. Length and character checks of the tokens are the loader's.
pub fn parse_token_file(text: &str) -> Result<Vec<NamedToken>, TokenLineError> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(line, l)| parse_token_entry(l).map_err(|message| TokenLineError { line, message }))
        .collect()
}

/// One `name:token` or bare-token entry.
pub fn parse_token_entry(entry: &str) -> Result<NamedToken, String> {
    let Some((name, token)) = entry.split_once(':') else {
        return Ok(NamedToken {
            name: fingerprint(entry),
            token: entry.to_string(),
        });
    };
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'));
    if !name_ok {
        return Err(
            "the name before ':' must be 1 to 64 letters, digits, '.', '_', '-' or '@' (a token containing ':' needs a name in front: name:token)"
                .to_string(),
        );
    }
    Ok(NamedToken {
        name: name.to_string(),
        token: token.to_string(),
    })
}

/// The name of an unnamed token: `token-` and 8 hex digits of its SHA-256.
pub fn fingerprint(token: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let hex: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("token-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, token: &str) -> NamedToken {
        NamedToken {
            name: name.into(),
            token: token.into(),
        }
    }

    #[test]
    fn roles_and_names_follow_the_token() {
        let tokens = Tokens::new(&[
            (
                Role::Agent,
                vec![named("fleet-a", "agent-token-0123456789")],
            ),
            (Role::Viewer, vec![named("bob", "viewer-token-0123456789")]),
            (Role::Admin, vec![named("alice", "admin-token-0123456789")]),
        ]);
        let who = |role, name: &str| {
            Ok(Principal {
                role,
                name: name.into(),
            })
        };
        type Case = (Option<&'static [u8]>, Result<Principal, AuthError>);
        let cases: Vec<Case> = vec![
            (None, Err(AuthError::Missing)),
            (Some(b"agent-token-0123456789"), Err(AuthError::Malformed)),
            (
                Some(b"Basic agent-token-0123456789"),
                Err(AuthError::Malformed),
            ),
            (
                Some(b"Bearer agent-token-0123456789"),
                who(Role::Agent, "fleet-a"),
            ),
            (
                Some(b"Bearer viewer-token-0123456789"),
                who(Role::Viewer, "bob"),
            ),
            (
                Some(b"bearer admin-token-0123456789"),
                who(Role::Admin, "alice"),
            ),
            (
                Some(b"Bearer admin-token-012345678"),
                Err(AuthError::Unknown),
            ),
            (Some(b"Bearer "), Err(AuthError::Unknown)),
        ];
        for (header, want) in cases {
            assert_eq!(tokens.authenticate(header), want, "{header:?}");
        }
        assert_eq!(tokens.count(Role::Viewer), 1);
    }

    #[test]
    fn token_files_take_names_and_the_old_format() {
        let text = "# admins\n\n  alice:tok-a-0123456789abcdef  \ntok-b-0123456789abcdef\nops.bot@x:t:with:colons\n";
        let parsed = parse_token_file(text).unwrap();
        assert_eq!(
            parsed,
            [
                named("alice", "tok-a-0123456789abcdef"),
                named(
                    &fingerprint("tok-b-0123456789abcdef"),
                    "tok-b-0123456789abcdef"
                ),
                named("ops.bot@x", "t:with:colons"),
            ]
        );
        // The fingerprint is stable and does not contain the token.
        let f = fingerprint("tok-b-0123456789abcdef");
        assert_eq!(f, fingerprint("tok-b-0123456789abcdef"));
        assert!(f.starts_with("token-") && f.len() == 14, "{f}");
        assert_ne!(f, fingerprint("tok-c-0123456789abcdef"));
        assert!(!f.contains("tok-b"));
    }

    #[test]
    fn a_bad_name_is_reported_by_line_without_the_token() {
        let text = "alice:good-token-0123456789\n\nbad name:secret-token-0123456789\n";
        let err = parse_token_file(text).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(!err.to_string().contains("secret"), "{err}");
        assert!(parse_token_entry(":token-0123456789abcdef").is_err());
    }
}
