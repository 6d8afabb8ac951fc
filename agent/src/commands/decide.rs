//! `flink-autoscale-agent decide --input FILE`: evaluated per-vertex figures, per-job state
//! and configuration in (one JSON object, `-` for stdin), the decision out (one JSON object).
//! Exit 0 on success, 2 on invalid input with a message naming the offending field.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::de::DeserializeOwned;
use serde::Serialize;

use flink_autoscale_core::engine::{decide, DecideInput, EngineError};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// JSON input file, or `-` for stdin.
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
}

pub fn main(args: Args) -> ExitCode {
    run_json_command(&args.input, |input: &DecideInput| decide(input))
}

/// Reads one JSON object from `path`, runs `stage` on it and prints one JSON object.
pub(crate) fn run_json_command<I, O>(
    path: &Path,
    stage: impl Fn(&I) -> Result<O, EngineError>,
) -> ExitCode
where
    I: DeserializeOwned,
    O: Serialize,
{
    const INVALID_INPUT: u8 = 2;
    let text = match read_input(path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: --input {}: {e}", path.display());
            return ExitCode::from(INVALID_INPUT);
        }
    };
    let input: I = match parse_input(&text) {
        Ok(input) => input,
        Err(message) => {
            eprintln!("error: invalid input: {message}");
            return ExitCode::from(INVALID_INPUT);
        }
    };
    let output = match stage(&input) {
        Ok(output) => output,
        Err(e) => {
            eprintln!("error: invalid input: {e}");
            return ExitCode::from(INVALID_INPUT);
        }
    };
    let mut stdout = std::io::stdout().lock();
    let written = serde_json::to_writer_pretty(&mut stdout, &output)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(stdout));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write the output: {e}");
            ExitCode::FAILURE
        }
    }
}

fn read_input(path: &Path) -> std::io::Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text)
    } else {
        std::fs::read_to_string(path)
    }
}

/// Parses JSON, naming the path of the offending field (`vertices[2].parallelism`).
fn parse_input<I: DeserializeOwned>(text: &str) -> Result<I, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value: I = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.into_inner().to_string()
        } else {
            format!("{path}: {}", e.into_inner())
        }
    })?;
    de.end()
        .map_err(|e| format!("trailing characters after the JSON object: {e}"))?;
    Ok(value)
}
