//! Errors of the decision engine. Every message names the offending input field.

use super::config::ConfigError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// The input is malformed: `field` is a path such as `vertices[2].inputs[0].id`.
    #[error("{field}: {message}")]
    InvalidInput { field: String, message: String },
    /// A source has no target data rate (upstream fails the whole evaluation here).
    #[error(
        "samples: the target data rate of source `{vertex}` is NaN; its num_records_in must be present in at least two samples"
    )]
    NoTargetDataRate { vertex: String },
    #[error("config: {0}")]
    Config(#[from] ConfigError),
}

impl EngineError {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> EngineError {
        EngineError::InvalidInput {
            field: field.into(),
            message: message.into(),
        }
    }
}
