//! What a run found: one finding per rule (pass, fail or skip, with evidence), and what the
//! cleanup did. Rendered as a table for people or as JSON for tools.

use std::fmt::Write as _;

use serde::Serialize;

use super::rules::{Level, Rule};

/// The outcome of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The plugin keeps the rule.
    Pass,
    /// The plugin breaks it; the evidence says how.
    Fail,
    /// Not checked: a precondition failed or the plugin does not offer the feature.
    Skip,
}

impl Outcome {
    /// `pass`, `FAIL` or `skip` (a failure stands out in the table).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "FAIL",
            Self::Skip => "skip",
        }
    }
}

/// The verdict of one phase: its outcome and the lines of evidence (calls made, answers got).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Evidence {
    lines: Vec<String>,
}

impl Evidence {
    /// Adds a line.
    pub fn note(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    /// The rule holds.
    pub fn pass(self) -> Verdict {
        Verdict {
            outcome: Outcome::Pass,
            evidence: self.lines,
        }
    }

    /// The rule is broken; `why` is the last line.
    pub fn fail(mut self, why: impl Into<String>) -> Verdict {
        self.lines.push(why.into());
        Verdict {
            outcome: Outcome::Fail,
            evidence: self.lines,
        }
    }

    /// The rule could not be checked; `why` is the last line.
    pub fn skip(mut self, why: impl Into<String>) -> Verdict {
        self.lines.push(why.into());
        Verdict {
            outcome: Outcome::Skip,
            evidence: self.lines,
        }
    }
}

/// What one phase concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Pass, fail or skip.
    pub outcome: Outcome,
    /// What was called and answered, in order.
    pub evidence: Vec<String>,
}

/// One rule's line in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// `MUST` or `SHOULD`.
    pub level: Level,
    /// Pass, fail or skip.
    pub outcome: Outcome,
    /// What was called and answered, in order.
    pub evidence: Vec<String>,
}

/// A resource the kit created and could not delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Leftover {
    /// Its id.
    pub id: String,
    /// Why it is still there (the failed call, or that it did not go within the budget).
    pub reason: String,
}

/// What the cleanup did with the resources the kit created.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cleanup {
    /// Deleted by the cleanup (a rule failed before its `delete` phase, or a duplicate).
    pub deleted: Vec<String>,
    /// Created by the kit and gone already (deleted by the `delete` phase).
    pub already_gone: Vec<String>,
    /// Still there: delete them by hand.
    pub leftovers: Vec<Leftover>,
}

/// The report of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The plugin's name.
    pub plugin: String,
    /// `Kind.group`, when `describe` answered.
    pub kind: Option<String>,
    /// `namespace/name` of the sample object.
    pub object: String,
    /// One finding per rule, in phase order.
    pub rules: Vec<Finding>,
    /// What the cleanup did.
    pub cleanup: Cleanup,
    /// No rule failed and nothing was left over.
    pub passed: bool,
}

impl Report {
    /// The rules that failed.
    pub fn failed(&self) -> Vec<Rule> {
        self.rules
            .iter()
            .filter(|f| f.outcome == Outcome::Fail)
            .map(|f| f.rule)
            .collect()
    }

    /// The finding of `rule`.
    pub fn finding(&self, rule: Rule) -> Option<&Finding> {
        self.rules.iter().find(|f| f.rule == rule)
    }

    /// The table for people: one row per rule, evidence lines indented below it.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "conformance of plugin {} ({}) with sample {}",
            self.plugin,
            self.kind.as_deref().unwrap_or("kind unknown"),
            self.object
        );
        let width = Rule::ALL
            .iter()
            .map(|r| r.as_str().len())
            .max()
            .unwrap_or(0);
        let _ = writeln!(out, "{:width$}  LEVEL   RESULT  EVIDENCE", "RULE");
        for f in &self.rules {
            let mut lines = f.evidence.iter();
            let _ = writeln!(
                out,
                "{:width$}  {:6}  {:6}  {}",
                f.rule.as_str(),
                f.level.as_str(),
                f.outcome.as_str(),
                lines.next().map_or("", String::as_str)
            );
            for line in lines {
                let _ = writeln!(out, "{:width$}  {:6}  {:6}  {line}", "", "", "");
            }
        }
        let c = &self.cleanup;
        let list = |ids: &[String]| {
            if ids.is_empty() {
                "none".to_owned()
            } else {
                ids.join(", ")
            }
        };
        let _ = writeln!(
            out,
            "cleanup: deleted {}; already gone {}",
            list(&c.deleted),
            list(&c.already_gone)
        );
        for l in &c.leftovers {
            let _ = writeln!(out, "LEFTOVER {}: {} (delete it by hand)", l.id, l.reason);
        }
        let count = |o: Outcome| self.rules.iter().filter(|f| f.outcome == o).count();
        let _ = write!(
            out,
            "summary: {} of {} rules pass; failing: {}; skipped: {}",
            count(Outcome::Pass),
            self.rules.len(),
            count(Outcome::Fail),
            count(Outcome::Skip)
        );
        out
    }
}
