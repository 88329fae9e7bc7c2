//! One module per subcommand.

pub mod bench;
pub mod ping;
pub mod pktest;
pub mod run;
pub mod serve;
pub mod serve_iperf3;
pub mod sim;
pub mod testbed;
