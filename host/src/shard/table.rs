//! The bucket table: which replica holds each bucket now. It lives in one `ConfigMap` per ring
//! and is only changed with compare-and-swap (the `ConfigMap`'s `resourceVersion`), so two
//! replicas can never both take a bucket.
//!
//! Rules (the coordinator keeps them; [`plan`] decides):
//! - a replica MUST hold a bucket in the table before it serves the bucket's objects;
//! - a replica MUST stop serving a bucket (every pass over its objects ended) before it
//!   clears the bucket in the table;
//! - a replica MAY take a bucket that is free, or whose holder's Lease has expired (a holder
//!   fences itself well before its Lease expires, so it serves nothing by then);
//! - a replica MAY hand a dead holder's bucket to the live replica the ring gives it: every
//!   survivor wakes at the same expiry, and the first swap then takes all of the dead
//!   replica's buckets (the others' swaps, which would conflict, find nothing left to do).

use std::collections::{BTreeMap, BTreeSet};

use super::ring::{BUCKETS, Ring};

/// The `ConfigMap` key of the table.
pub const KEY: &str = "holders";

/// Holder of each bucket (`None`: free).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    holders: Vec<Option<String>>,
}

impl Default for Table {
    fn default() -> Self {
        Self {
            holders: vec![None; usize::from(BUCKETS)],
        }
    }
}

/// A table that does not decode.
#[derive(Debug, thiserror::Error)]
#[error("bucket table: {0}")]
pub struct DecodeError(String);

impl Table {
    /// Decodes the `ConfigMap` value: a JSON array of [`BUCKETS`] strings (`""`: free).
    pub fn decode(text: &str) -> Result<Self, DecodeError> {
        let holders: Vec<String> =
            serde_json::from_str(text).map_err(|e| DecodeError(e.to_string()))?;
        if holders.len() != usize::from(BUCKETS) {
            return Err(DecodeError(format!(
                "{} buckets, expected {BUCKETS}",
                holders.len()
            )));
        }
        Ok(Self {
            holders: holders
                .into_iter()
                .map(|h| Some(h).filter(|h| !h.is_empty()))
                .collect(),
        })
    }

    /// The `ConfigMap` value.
    pub fn encode(&self) -> String {
        let holders: Vec<&str> = self
            .holders
            .iter()
            .map(|h| h.as_deref().unwrap_or(""))
            .collect();
        // A Vec of strings always serializes.
        serde_json::to_string(&holders).unwrap_or_default()
    }

    /// Who holds `bucket`.
    pub fn holder(&self, bucket: u16) -> Option<&str> {
        self.holders
            .get(usize::from(bucket))
            .and_then(|h| h.as_deref())
    }

    /// Sets the holder of `bucket`.
    pub fn set(&mut self, bucket: u16, holder: Option<&str>) {
        if let Some(slot) = self.holders.get_mut(usize::from(bucket)) {
            *slot = holder.map(str::to_owned);
        }
    }

    /// The buckets `member` holds.
    pub fn held_by(&self, member: &str) -> BTreeSet<u16> {
        (0..BUCKETS)
            .filter(|b| self.holder(*b) == Some(member))
            .collect()
    }
}

/// What a replica should do to the table next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Buckets it holds that the ring gives to another live replica: stop, then clear.
    pub release: BTreeSet<u16>,
    /// Buckets the ring gives it that are free or held by a dead replica: take them.
    pub claim: BTreeSet<u16>,
    /// Buckets held by a dead replica that the ring gives another live one: hand them over
    /// in the same swap.
    pub hand: BTreeMap<u16, String>,
}

impl Plan {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.release.is_empty() && self.claim.is_empty() && self.hand.is_empty()
    }

    /// Whether it changes the table before anything is served: claims and hand-overs.
    pub fn takes(&self) -> bool {
        !self.claim.is_empty() || !self.hand.is_empty()
    }

    /// Writes the claims and hand-overs of `me` into `table`.
    pub fn apply_takes(&self, me: &str, table: &mut Table) {
        for bucket in &self.claim {
            table.set(*bucket, Some(me));
        }
        for (bucket, owner) in &self.hand {
            table.set(*bucket, Some(owner));
        }
    }
}

/// The plan of replica `me`, given the live replicas (`me` among them) and the table.
pub fn plan(me: &str, live: &BTreeSet<String>, table: &Table) -> Plan {
    let ring = Ring::new(live);
    let mut plan = Plan::default();
    for bucket in 0..BUCKETS {
        let mine = ring.owner(bucket) == Some(me);
        match table.holder(bucket) {
            Some(holder) if holder == me => {
                if !mine {
                    plan.release.insert(bucket);
                }
            }
            Some(holder) if live.contains(holder) => {}
            // Its holder is dead: to the ring's owner, whoever that is.
            Some(_) => match ring.owner(bucket) {
                Some(owner) if owner == me => {
                    plan.claim.insert(bucket);
                }
                Some(owner) => {
                    plan.hand.insert(bucket, owner.to_owned());
                }
                None => {}
            },
            // Free: its ring owner takes it.
            None => {
                if mine {
                    plan.claim.insert(bucket);
                }
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Runs every replica's plan to a fixed point (releases take effect at once, as after a
    /// drain), the way the coordinators would.
    fn settle(table: &mut Table, members: &BTreeSet<String>) {
        for _ in 0..4 {
            for me in members {
                let p = plan(me, members, table);
                for b in &p.release {
                    table.set(*b, None);
                }
                for b in p.claim.iter().chain(p.hand.keys()) {
                    assert!(
                        table.holder(*b).is_none_or(|h| !members.contains(h)),
                        "{me} took bucket {b} from a live holder"
                    );
                }
                p.apply_takes(me, table);
            }
        }
    }

    #[test]
    fn a_lone_replica_claims_every_free_bucket() {
        let p = plan("a", &live(&["a"]), &Table::default());
        assert_eq!(p.claim.len(), usize::from(BUCKETS));
        assert!(p.release.is_empty());
    }

    #[test]
    fn a_replica_never_claims_a_bucket_a_live_replica_holds_even_if_the_ring_gives_it() {
        let mut table = Table::default();
        for b in 0..BUCKETS {
            table.set(b, Some("a"));
        }
        let p = plan("b", &live(&["a", "b"]), &table);
        assert!(p.is_empty(), "{p:?}");
        // a releases b's share; only then may b claim it.
        let a = plan("a", &live(&["a", "b"]), &table);
        assert!(!a.release.is_empty());
        for bucket in &a.release {
            table.set(*bucket, None);
        }
        let p = plan("b", &live(&["a", "b"]), &table);
        assert_eq!(p.claim, a.release);
    }

    #[test]
    fn the_buckets_of_a_dead_holder_are_claimed_by_the_ring_s_new_owners() {
        let members = live(&["a", "b", "c"]);
        let mut table = Table::default();
        settle(&mut table, &members);
        let c_held = table.held_by("c");
        assert!(!c_held.is_empty());
        let survivors = live(&["a", "b"]);
        let (pa, pb) = (plan("a", &survivors, &table), plan("b", &survivors, &table));
        assert!(pa.release.is_empty() && pb.release.is_empty());
        assert!(pa.claim.is_disjoint(&pb.claim));
        let taken: BTreeSet<u16> = pa.claim.union(&pb.claim).copied().collect();
        assert_eq!(taken, c_held);
    }

    #[test]
    fn one_survivor_s_swap_gives_every_bucket_of_a_dead_holder_to_its_new_owner() {
        let members = live(&["a", "b", "c"]);
        let mut table = Table::default();
        settle(&mut table, &members);
        let (a_before, c_held) = (table.held_by("a"), table.held_by("c"));
        let survivors = live(&["a", "b"]);
        let pa = plan("a", &survivors, &table);
        // a hands b its part of c's buckets, and touches no bucket of a live holder.
        assert!(pa.hand.values().all(|owner| owner == "b"), "{pa:?}");
        let handed: BTreeSet<u16> = pa.hand.keys().copied().collect();
        assert!(handed.is_subset(&c_held) && pa.claim.is_subset(&c_held));
        pa.apply_takes("a", &mut table);
        assert!(table.held_by("c").is_empty());
        assert!(a_before.is_subset(&table.held_by("a")));
        let ring = Ring::new(&survivors);
        for b in &c_held {
            assert_eq!(table.holder(*b), ring.owner(*b), "bucket {b}");
        }
        // b's plan on the new table: nothing left to take.
        assert!(!plan("b", &survivors, &table).takes());
    }

    #[test]
    fn settled_tables_give_every_bucket_to_its_ring_owner() {
        let members = live(&["a", "b", "c"]);
        let mut table = Table::default();
        settle(&mut table, &live(&["a"]));
        settle(&mut table, &live(&["a", "b"]));
        settle(&mut table, &members);
        let ring = Ring::new(&members);
        for b in 0..BUCKETS {
            assert_eq!(table.holder(b), ring.owner(b), "bucket {b}");
        }
        for me in &members {
            assert!(plan(me, &members, &table).is_empty());
        }
    }

    #[test]
    fn the_table_round_trips_and_refuses_a_wrong_length() {
        let mut table = Table::default();
        table.set(7, Some("orchard-1"));
        let decoded = Table::decode(&table.encode()).unwrap();
        assert_eq!(decoded, table);
        assert_eq!(decoded.holder(7), Some("orchard-1"));
        assert_eq!(decoded.holder(8), None);
        let err = Table::decode("[\"a\"]").unwrap_err().to_string();
        assert!(err.contains("1 buckets, expected 256"), "{err}");
        assert!(Table::decode("{").is_err());
    }
}
