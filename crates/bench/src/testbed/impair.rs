//! Random packet loss without netem (absent on this kernel; docs/LINUX-NOTES.md): an nftables table
//! in the namespace drops a random share of what the kernel receives and sends there.
//!
//! The rules hook the kernel's own input and output paths, so they impair the kernel peer's
//! traffic; a raw channel (AF_PACKET, AF_XDP) in the same namespace sees frames before
//! netfilter does and is not affected.

use crate::error::{Error, Result};
use crate::exec;

/// The nftables table the loss rules live in (one per namespace).
const TABLE: &str = "ulnet_loss";

fn nft(ns: &str, args: &[&str]) -> Result<std::process::Output> {
    exec::run_in(ns, "nft", args)
}

/// Makes the kernel in `ns` drop `percent`% of the packets it receives (input hook) and
/// sends (output hook), each chosen independently at random; replaces an earlier setting.
/// 0 removes the loss.
///
/// # Errors
/// [`Error::Invalid`] if `percent > 100`; [`Error::MissingTool`] without nft;
/// [`Error::Command`] if nft refuses.
pub fn set_loss(ns: &str, percent: u8) -> Result<()> {
    if percent > 100 {
        return Err(Error::Invalid(format!(
            "loss of {percent}% is more than 100%"
        )));
    }
    clear_loss(ns)?;
    if percent == 0 {
        return Ok(());
    }
    let pct = percent.to_string();
    // `numgen random mod 100` yields 0..=99, so `< 100` is out of its range for nft: total
    // loss is a plain drop.
    let selector: &[&str] = if percent == 100 {
        &[]
    } else {
        &["numgen", "random", "mod", "100", "<", &pct]
    };
    add_rules(ns, selector)
}

/// Makes the kernel in `ns` drop every `n`th packet it receives and every `n`th it sends
/// (a counter per direction, `numgen inc`): loss whose amount does not depend on chance,
/// for a check that needs some drops out of few packets (64 KB bursts through TSO are a
/// few hundred packets where segments would be thousands). Replaces an earlier setting.
///
/// # Errors
/// [`Error::Invalid`] if `n < 2`; otherwise as [`set_loss`].
pub fn set_loss_every(ns: &str, n: u32) -> Result<()> {
    if n < 2 {
        return Err(Error::Invalid(format!(
            "drop every {n}th packet: n must be at least 2"
        )));
    }
    clear_loss(ns)?;
    let m = n.to_string();
    // `numgen inc mod n` counts 0, 1, ..., n-1 per rule; the last of each run is dropped.
    let last = (n - 1).to_string();
    add_rules(ns, &["numgen", "inc", "mod", &m, "==", &last])
}

/// The table, an input and an output chain, and in each a rule dropping what `selector`
/// matches, counted.
fn add_rules(ns: &str, selector: &[&str]) -> Result<()> {
    nft(ns, &["add", "table", "inet", TABLE])?;
    for hook in ["input", "output"] {
        nft(
            ns,
            &[
                "add", "chain", "inet", TABLE, hook, "{", "type", "filter", "hook", hook,
                "priority", "0", ";", "}",
            ],
        )?;
        let mut rule = vec!["add", "rule", "inet", TABLE, hook];
        rule.extend_from_slice(selector);
        rule.extend(["counter", "drop"]);
        nft(ns, &rule)?;
    }
    Ok(())
}

/// Removes the loss rules from `ns` (nothing to do if there are none).
///
/// # Errors
/// [`Error::MissingTool`] without nft; [`Error::Command`] if nft refuses.
pub fn clear_loss(ns: &str) -> Result<()> {
    // `add table` is idempotent, so the delete that follows always has a table to remove
    // (Debian 12's nft 1.0.6 has no `destroy`).
    nft(ns, &["add", "table", "inet", TABLE])?;
    nft(ns, &["delete", "table", "inet", TABLE])?;
    Ok(())
}

/// How many packets the loss rules in `ns` have dropped so far (input plus output; 0
/// without rules).
///
/// # Errors
/// [`Error::Command`] if nft fails; [`Error::Parse`] if its JSON is not as expected.
pub fn loss_drops(ns: &str) -> Result<u64> {
    let tables = nft(ns, &["-j", "list", "tables"])?;
    let tables: serde_json::Value = parse_json(&tables.stdout, "nft -j list tables")?;
    let has_table = tables["nftables"]
        .as_array()
        .is_some_and(|items| items.iter().any(|i| i["table"]["name"] == TABLE));
    if !has_table {
        return Ok(0);
    }
    let out = nft(ns, &["-j", "list", "table", "inet", TABLE])?;
    let value = parse_json(&out.stdout, "nft -j list table")?;
    Ok(sum_counters(&value))
}

fn parse_json(bytes: &[u8], command: &str) -> Result<serde_json::Value> {
    serde_json::from_slice(bytes).map_err(|e| Error::Parse {
        command: command.to_owned(),
        why: e.to_string(),
    })
}

/// Adds up the `packets` of every `counter` expression in nft's JSON listing.
fn sum_counters(value: &serde_json::Value) -> u64 {
    match value {
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(key, v)| match (key.as_str(), v["packets"].as_u64()) {
                ("counter", Some(packets)) => packets,
                _ => sum_counters(v),
            })
            .sum(),
        serde_json::Value::Array(items) => items.iter().map(sum_counters).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_rule_counters_from_nft_json() {
        let json = r#"{"nftables": [{"metainfo": {"json_schema_version": 1}},
            {"table": {"family": "inet", "name": "ulnet_loss", "handle": 1}},
            {"rule": {"chain": "input", "expr": [{"match": {}}, {"counter": {"packets": 7, "bytes": 588}}, {"drop": null}]}},
            {"rule": {"chain": "output", "expr": [{"counter": {"packets": 5, "bytes": 420}}, {"drop": null}]}}]}"#;
        let value: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(sum_counters(&value), 12);
    }

    #[test]
    fn rejects_more_than_everything() {
        assert!(matches!(set_loss("unused", 101), Err(Error::Invalid(_))));
    }
}
