//! testnet
