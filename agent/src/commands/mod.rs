//! One module per subcommand of `flink-autoscale-agent`. Each exposes `Args` (clap) and
//! `main(Args) -> ExitCode`.

pub mod check_config;
pub mod collect;
pub mod decide;
pub mod evaluate;
pub mod run;
