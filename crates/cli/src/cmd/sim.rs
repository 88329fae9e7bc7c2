//! (placeholder: being written).

/// Subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Placeholder.
    Todo,
}

/// Runs the subcommand.
pub fn run(_c: Command) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
