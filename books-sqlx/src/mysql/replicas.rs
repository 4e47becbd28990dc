//! MariaDB replicas ([`crate::replicas`]): positions are GTID positions, one
//! `domain-server-sequence` per replication domain. The primary's is
//! `@@gtid_binlog_pos` (every transaction it has written to its binary log); a replica's
//! is `@@gtid_slave_pos` (every replicated transaction it has applied).

use std::fmt::Write as _;
use std::str::FromStr;

use sqlx::Row;
use sqlx::mysql::{MySql, MySqlPool, MySqlRow};

use crate::servers::replicas::{Position, Standby};

/// A GTID position: for each replication domain, the last transaction's server id and
/// sequence number (sequence numbers only grow within a domain, whichever server wrote).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gtid(Vec<(u32, u32, u64)>);

impl FromStr for Gtid {
    type Err = String;

    /// `0-1-42,1-2-7` (empty: no transaction yet).
    fn from_str(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let mut numbers = part.splitn(3, '-');
            let mut next = || {
                numbers
                    .next()
                    .ok_or_else(|| format!("not a GTID: {part:?}"))
            };
            let (domain, server, sequence) = (next()?, next()?, next()?);
            let bad = |_| format!("not a GTID: {part:?}");
            parts.push((
                domain.parse().map_err(bad)?,
                server.parse().map_err(bad)?,
                sequence.parse().map_err(bad)?,
            ));
        }
        parts.sort_unstable();
        Ok(Self(parts))
    }
}

impl Gtid {
    fn sequence(&self, domain: u32) -> Option<u64> {
        self.0
            .iter()
            .find(|part| part.0 == domain)
            .map(|part| part.2)
    }

    /// Whether no transaction is known (a primary without a binary log has no position
    /// a replica could be measured against).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Position for Gtid {
    fn reached(&self, target: &Self) -> bool {
        target
            .0
            .iter()
            .all(|&(domain, _, sequence)| self.sequence(domain).is_some_and(|s| s >= sequence))
    }

    fn newest(mut self, other: &Self) -> Self {
        for &(domain, server, sequence) in &other.0 {
            match self.0.iter_mut().find(|part| part.0 == domain) {
                Some(part) if part.2 < sequence => *part = (domain, server, sequence),
                Some(_) => {}
                None => self.0.push((domain, server, sequence)),
            }
        }
        self.0.sort_unstable();
        self
    }

    fn behind(&self, primary: &Self) -> u64 {
        primary
            .0
            .iter()
            .map(|&(domain, _, sequence)| {
                sequence.saturating_sub(self.sequence(domain).unwrap_or(0))
            })
            .sum()
    }

    fn show(&self) -> String {
        let mut text = String::new();
        for (domain, server, sequence) in &self.0 {
            let comma = if text.is_empty() { "" } else { "," };
            write!(text, "{comma}{domain}-{server}-{sequence}").expect("writing to a String");
        }
        text
    }
}

impl Standby for MySql {
    type Position = Gtid;
    /// Every transaction the primary wrote to its binary log (empty without one).
    const PRIMARY_POSITION: &'static str = "SELECT @@gtid_binlog_pos";
    const LAG_METRIC: &'static str = "books_store_replica_lag_transactions";

    /// Two statements in one message, each with a snapshot of its own (autocommit).
    fn read_text(statement: Option<&str>) -> String {
        match statement {
            Some(statement) => format!("SELECT @@gtid_slave_pos; {statement}"),
            None => "SELECT @@gtid_slave_pos".to_owned(),
        }
    }

    /// An empty position: not replicating (or nothing applied yet, which reaches no
    /// position a primary with a binary log reports); on a primary, no binary log.
    fn applied(row: &MySqlRow) -> Result<Option<Gtid>, sqlx::Error> {
        let text: Option<String> = row.try_get(0)?;
        let gtid = text.as_deref().unwrap_or_default().parse::<Gtid>();
        let gtid = gtid.map_err(|e| sqlx::Error::Decode(e.into()))?;
        Ok((!gtid.is_empty()).then_some(gtid))
    }

    fn label(pool: &MySqlPool) -> String {
        let options = pool.connect_options();
        format!("{}:{}", options.get_host(), options.get_port())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gtid(text: &str) -> Gtid {
        text.parse().unwrap()
    }

    #[test]
    fn positions_are_compared_domain_by_domain() {
        let primary = gtid("0-1-42,1-2-7");
        assert!(
            gtid("1-2-7,0-1-42").reached(&primary),
            "order does not matter"
        );
        assert!(
            gtid("0-3-50,1-2-9").reached(&primary),
            "another server, further on"
        );
        assert!(!gtid("0-1-41,1-2-9").reached(&primary));
        assert!(
            !gtid("0-1-42").reached(&primary),
            "a domain not applied at all"
        );
        assert!(gtid("0-1-1").reached(&gtid("")), "nothing to wait for");
        assert_eq!(gtid("0-1-40,1-2-7").behind(&primary), 2);
        assert_eq!(gtid("0-1-40").newest(&primary).show(), "0-1-42,1-2-7");
        assert_eq!(primary.show(), "0-1-42,1-2-7");
    }

    #[test]
    fn what_is_not_a_gtid_is_refused() {
        for text in ["0-1", "a-b-c", "0-1-x", "0-1-2-3"] {
            assert!(text.parse::<Gtid>().is_err(), "{text}");
        }
        assert!(gtid(" ").is_empty());
    }
}
