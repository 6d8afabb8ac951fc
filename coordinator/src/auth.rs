//! Bearer tokens with roles, compared in constant time.

use subtle::ConstantTimeEq;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Propose and report outcomes.
    Agent,
    /// Flag regions, set overrides and read everything.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Admin => "admin",
        }
    }
}

/// The configured tokens.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<(Vec<u8>, Role)>,
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
    pub fn new(agent: &[String], admin: &[String]) -> Tokens {
        let entries = agent
            .iter()
            .map(|t| (t.as_bytes().to_vec(), Role::Agent))
            .chain(admin.iter().map(|t| (t.as_bytes().to_vec(), Role::Admin)))
            .collect();
        Tokens { entries }
    }

    pub fn count(&self, role: Role) -> usize {
        self.entries.iter().filter(|(_, r)| *r == role).count()
    }

    /// The role of the bearer token in an `Authorization` header value.
    pub fn authenticate(&self, header: Option<&[u8]>) -> Result<Role, AuthError> {
        let header = header.ok_or(AuthError::Missing)?;
        let token = header
            .strip_prefix(b"Bearer ")
            .or_else(|| header.strip_prefix(b"bearer "))
            .ok_or(AuthError::Malformed)?;
        // Check every entry, without an early exit, so timing does not reveal which (or how
        // much of a) token matched.
        let mut found = None;
        for (candidate, role) in &self.entries {
            if bool::from(candidate.as_slice().ct_eq(token)) {
                found = Some(*role);
            }
        }
        found.ok_or(AuthError::Unknown)
    }
}

/// Reads tokens from a file: one per line; blank lines and `#` comments are skipped.
pub fn parse_token_file(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_follow_the_token() {
        let tokens = Tokens::new(
            &["agent-token-0123456789".into()],
            &["admin-token-0123456789".into()],
        );
        type Case = (Option<&'static [u8]>, Result<Role, AuthError>);
        let cases: &[Case] = &[
            (None, Err(AuthError::Missing)),
            (Some(b"agent-token-0123456789"), Err(AuthError::Malformed)),
            (
                Some(b"Basic agent-token-0123456789"),
                Err(AuthError::Malformed),
            ),
            (Some(b"Bearer agent-token-0123456789"), Ok(Role::Agent)),
            (Some(b"Bearer admin-token-0123456789"), Ok(Role::Admin)),
            (
                Some(b"Bearer admin-token-012345678"),
                Err(AuthError::Unknown),
            ),
            (Some(b"Bearer "), Err(AuthError::Unknown)),
        ];
        for (header, want) in cases {
            assert_eq!(tokens.authenticate(*header), *want, "{header:?}");
        }
    }

    #[test]
    fn token_files_skip_blanks_and_comments() {
        let text = "# agents\n\n  tok-a  \ntok-b\n";
        assert_eq!(parse_token_file(text), ["tok-a", "tok-b"]);
    }
}
