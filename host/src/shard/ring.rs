//! Where an object lives: its stable key hashes to one of [`BUCKETS`] buckets (for ever), and
//! a consistent-hash ring with virtual nodes maps buckets to the live replicas. A replica that
//! joins or leaves moves only the buckets the ring gives it or took from it.
//!
//! The hash is SHA-256 (the first 8 bytes): stable across builds and platforms, so replicas
//! of different versions agree on every assignment (`std`'s hasher makes no such promise).

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

/// Buckets of a ring: objects are labelled with one, replicas hold sets of them. Enough
/// that three replicas split within a few percent of a third each; few enough that a
/// replica's label selector stays short.
pub const BUCKETS: u16 = 256;

/// Virtual nodes per replica on the ring.
pub const VNODES: usize = 128;

/// The label that carries an object's bucket; shards watch `<label> in (their buckets)`.
pub const BUCKET_LABEL: &str = "orchard.dev/shard-bucket";

fn hash(text: &str) -> u64 {
    let digest = Sha256::digest(text.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The bucket of the object `namespace/name` of kind `group/kind`.
pub fn bucket_of(group: &str, kind: &str, namespace: &str, name: &str) -> u16 {
    // The modulo of a 64-bit hash by 256 is uniform, and below 256: it always fits.
    u16::try_from(hash(&format!("{group}/{kind}/{namespace}/{name}")) % u64::from(BUCKETS))
        .unwrap_or_default()
}

/// The bucket an object's labels name, when its bucket label holds one as the selectors spell
/// it (`"7"`, not `"07"`, which no selector matches).
pub fn labelled_bucket(labels: &BTreeMap<String, String>) -> Option<u16> {
    let value = labels.get(BUCKET_LABEL)?;
    value
        .parse::<u16>()
        .ok()
        .filter(|b| *b < BUCKETS && b.to_string() == *value)
}

/// A hash ring over a set of replicas.
#[derive(Debug, Clone)]
pub struct Ring {
    /// (position, replica), sorted by position.
    points: Vec<(u64, String)>,
}

impl Ring {
    /// The ring of `members` (replica names), each with [`VNODES`] points.
    pub fn new<'a>(members: impl IntoIterator<Item = &'a String>) -> Self {
        let mut points: Vec<(u64, String)> = members
            .into_iter()
            .flat_map(|m| (0..VNODES).map(move |i| (hash(&format!("{m}#{i}")), m.clone())))
            .collect();
        points.sort();
        Self { points }
    }

    /// The replica that owns `bucket`: the first point clockwise of the bucket's position.
    /// `None` only on an empty ring.
    pub fn owner(&self, bucket: u16) -> Option<&str> {
        let at = hash(&format!("bucket-{bucket}"));
        let i = self.points.partition_point(|(p, _)| *p < at);
        self.points
            .get(i)
            .or_else(|| self.points.first())
            .map(|(_, m)| m.as_str())
    }

    /// Every bucket `member` owns.
    pub fn buckets_of(&self, member: &str) -> BTreeSet<u16> {
        (0..BUCKETS)
            .filter(|b| self.owner(*b) == Some(member))
            .collect()
    }
}

/// The label selector of the objects in `buckets` (non-empty).
pub fn selector(buckets: &BTreeSet<u16>) -> String {
    let list: Vec<String> = buckets.iter().map(u16::to_string).collect();
    format!("{BUCKET_LABEL} in ({})", list.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn three_replicas_each_own_between_a_quarter_and_42_percent_of_1000_objects() {
        let m = members(&["orchard-0", "orchard-1", "orchard-2"]);
        let ring = Ring::new(&m);
        let mut counts = std::collections::HashMap::new();
        for i in 0..1000 {
            let b = bucket_of("pdns.orchard.dev", "DnsZone", "default", &format!("z{i}"));
            *counts.entry(ring.owner(b).unwrap().to_owned()).or_insert(0) += 1;
        }
        for name in &m {
            let share = counts[name];
            assert!((250..=420).contains(&share), "{name}: {share} of 1000");
        }
    }

    #[test]
    fn a_replica_leaving_moves_only_its_own_buckets() {
        let three = members(&["a", "b", "c"]);
        let two = members(&["a", "b"]);
        let (before, after) = (Ring::new(&three), Ring::new(&two));
        for b in 0..BUCKETS {
            let was = before.owner(b).unwrap();
            if was != "c" {
                assert_eq!(after.owner(b), Some(was), "bucket {b} moved");
            }
        }
    }

    #[test]
    fn a_replica_joining_takes_buckets_only_for_itself() {
        let two = members(&["a", "b"]);
        let three = members(&["a", "b", "c"]);
        let (before, after) = (Ring::new(&two), Ring::new(&three));
        let moved: Vec<u16> = (0..BUCKETS)
            .filter(|b| before.owner(*b) != after.owner(*b))
            .collect();
        assert!(!moved.is_empty());
        assert!(moved.iter().all(|b| after.owner(*b) == Some("c")));
    }

    #[test]
    fn every_bucket_has_exactly_one_owner_and_the_order_of_members_does_not_matter() {
        let ring = Ring::new(&members(&["x", "y", "z"]));
        let other = Ring::new(&members(&["z", "x", "y"]));
        let total: usize = ["x", "y", "z"]
            .iter()
            .map(|m| ring.buckets_of(m).len())
            .sum();
        assert_eq!(total, usize::from(BUCKETS));
        for b in 0..BUCKETS {
            assert_eq!(ring.owner(b), other.owner(b));
        }
        assert_eq!(Ring::new(&Vec::<String>::new()).owner(3), None);
    }

    #[test]
    fn only_a_bucket_spelled_as_the_selectors_spell_it_is_a_labelled_bucket() {
        let labels = |v: &str| BTreeMap::from([(BUCKET_LABEL.to_owned(), v.to_owned())]);
        assert_eq!(labelled_bucket(&labels("7")), Some(7));
        assert_eq!(labelled_bucket(&labels("255")), Some(255));
        for not_one in ["07", "256", "-1", "x", ""] {
            assert_eq!(labelled_bucket(&labels(not_one)), None, "{not_one:?}");
        }
        assert_eq!(labelled_bucket(&BTreeMap::new()), None);
    }

    #[test]
    fn the_selector_lists_the_buckets() {
        let buckets: BTreeSet<u16> = [3, 1, 200].into_iter().collect();
        assert_eq!(selector(&buckets), "orchard.dev/shard-bucket in (1,3,200)");
    }
}
