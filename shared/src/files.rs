//! Reading the files an operator names (configuration, token, certificate files): never
//! more than a cap, so `/dev/zero` or a wrong path to a huge file is an error, not an
//! out-of-memory kill; and, for secrets, never a file other users can read.

use std::io::Read;
use std::path::Path;

/// Largest configuration or certificate file read.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Largest token file read (about 10,000 tokens with names).
pub const MAX_SECRET_FILE_BYTES: u64 = 1 << 20;

/// A file that could not be used; the message says why, without the file's content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FileError {
    pub path: String,
    pub message: String,
}

impl FileError {
    fn new(path: &Path, message: impl Into<String>) -> Self {
        FileError {
            path: path.display().to_string(),
            message: message.into(),
        }
    }
}

/// The bytes of `path`, refused if longer than `limit`.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let file =
        std::fs::File::open(path).map_err(|e| FileError::new(path, format!("cannot read: {e}")))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::new(path, format!("cannot read: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(FileError::new(
            path,
            format!("is larger than {limit} bytes; is this the right file?"),
        ));
    }
    Ok(bytes)
}

/// The text of `path` (UTF-8), refused if longer than `limit`.
pub fn read_text_bounded(path: &Path, limit: u64) -> Result<String, FileError> {
    String::from_utf8(read_bounded(path, limit)?)
        .map_err(|_| FileError::new(path, "is not UTF-8 text"))
}

/// Who may read a secret file besides its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretPermissions {
    /// The owner only; or, for a file owned by root, also its group (mode 0640 or 0440, the
    /// packaged layout: root owns the file, the service's group reads it). Nobody else, and
    /// nobody but the owner may write it. PostgreSQL applies the same rule to its key file.
    Strict,
    /// Anything goes (the operator opted out; warned about at every start).
    Any,
}

/// The text of a secret file (a token file): a regular file, at most
/// [`MAX_SECRET_FILE_BYTES`], not readable by others under [`SecretPermissions::Strict`].
/// `opt_out` names the setting that relaxes the rule, for the error message.
pub fn read_secret_file(
    path: &Path,
    permissions: SecretPermissions,
    opt_out: &str,
) -> Result<String, FileError> {
    let meta =
        std::fs::metadata(path).map_err(|e| FileError::new(path, format!("cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(FileError::new(path, "is not a regular file"));
    }
    if permissions == SecretPermissions::Strict {
        check_private(path, &meta, opt_out)?;
    }
    read_text_bounded(path, MAX_SECRET_FILE_BYTES)
}

#[cfg(unix)]
fn check_private(path: &Path, meta: &std::fs::Metadata, opt_out: &str) -> Result<(), FileError> {
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode() & 0o777;
    let group_may_read = meta.uid() == 0;
    let allowed = if group_may_read { 0o740 } else { 0o700 };
    if mode & !allowed == 0 {
        return Ok(());
    }
    let fix = if group_may_read {
        "chmod 0640 (owner root, read by the service's group) or 0600"
    } else {
        "chmod 0600, or make it owned by root and readable by the service's group (0640)"
    };
    Err(FileError::new(
        path,
        format!(
            "holds secrets but has mode {mode:04o}, so other users can read or change it; {fix}, or set {opt_out} = true to accept it"
        ),
    ))
}

#[cfg(not(unix))]
fn check_private(_: &Path, _: &std::fs::Metadata, _: &str) -> Result<(), FileError> {
    Ok(())
}

/// Whether a token looks guessable: fewer than 48 bits by its own character frequencies (16
/// characters of one letter have none, `passwordpassword` 44; a random 22-character base64
/// token has about 90).
pub fn is_low_entropy(token: &str) -> bool {
    let mut counts = std::collections::HashMap::new();
    for c in token.chars() {
        *counts.entry(c).or_insert(0u32) += 1;
    }
    let n = token.chars().count() as f64;
    let bits_per_char: f64 = counts
        .values()
        .map(|&k| {
            let p = f64::from(k) / n;
            -p * p.log2()
        })
        .sum();
    bits_per_char * n < 48.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(mode: u32, text: &str) -> tempfile::NamedTempFile {
        use std::os::unix::fs::PermissionsExt;
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        f
    }

    #[test]
    fn reads_stop_at_the_cap() {
        let f = file_with(0o600, "0123456789");
        assert_eq!(read_bounded(f.path(), 10).unwrap().len(), 10);
        let e = read_bounded(f.path(), 9).unwrap_err();
        assert!(e.message.contains("larger than 9 bytes"), "{e}");
        let e = read_bounded(Path::new("/dev/zero"), 1 << 16).unwrap_err();
        assert!(e.message.contains("larger than"), "{e}");
        let e = read_secret_file(Path::new("/dev/zero"), SecretPermissions::Any, "x").unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
        let e = read_text_bounded(Path::new("/nonexistent/x"), 10).unwrap_err();
        assert!(
            e.to_string().starts_with("/nonexistent/x: cannot read"),
            "{e}"
        );
    }

    #[test]
    fn secrets_readable_by_others_are_refused_unless_opted_out() {
        // The tests run as root or as a user; the rule differs by owner.
        let root = running_as_root();
        for (mode, ok_for_user, ok_for_root) in [
            (0o600, true, true),
            (0o400, true, true),
            (0o640, false, true),
            (0o440, false, true),
            (0o660, false, false),
            (0o644, false, false),
            (0o666, false, false),
            (0o602, false, false),
        ] {
            let f = file_with(mode, "secret-token-0123456789\n");
            let got = read_secret_file(f.path(), SecretPermissions::Strict, "auth.x");
            let want = if root { ok_for_root } else { ok_for_user };
            assert_eq!(got.is_ok(), want, "{mode:o}: {got:?}");
            if let Err(e) = got {
                assert!(e.message.contains(&format!("{mode:04o}")), "{e}");
                assert!(e.message.contains("auth.x = true"), "{e}");
            }
            assert!(read_secret_file(f.path(), SecretPermissions::Any, "auth.x").is_ok());
        }
    }

    fn running_as_root() -> bool {
        use std::os::unix::fs::MetadataExt;
        let f = tempfile::NamedTempFile::new().unwrap();
        f.as_file().metadata().unwrap().uid() == 0
    }

    #[test]
    fn guessable_tokens_are_recognized() {
        for weak in ["aaaaaaaaaaaaaaaa", "abababababababab", "passwordpassword"] {
            assert!(is_low_entropy(weak), "{weak}");
        }
        for strong in [
            "agent-token-0123456789abcdef",
            "Zk3u9PqL0xW7yT2mB5nV8c",
            "0f8e2a1c9b7d4e6f3a5c8b0d2e4f6a8c",
        ] {
            assert!(!is_low_entropy(strong), "{strong}");
        }
    }
}
