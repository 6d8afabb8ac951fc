use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn main(_args: Args) -> ExitCode {
    eprintln!("this command is not built yet");
    ExitCode::FAILURE
}
