//! One module per subcommand.

pub mod demo;
pub mod sim;
pub mod testbed;
