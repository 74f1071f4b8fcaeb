//! What a run of host preflights found: one line per check, the run's result, and how it is
//! shown (a table, coloured on a terminal, or JSON) and told in an exit code.

use serde::{Deserialize, Serialize};

/// A check's outcome. `None` is a check that gave no outcome (no outcome matched, or its
/// collector gathered nothing): troubleshoot drops these; Berth shows them and counts them
/// as neither pass nor problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    None,
    Pass,
    Warn,
    Fail,
}

impl Outcome {
    pub fn word(self) -> &'static str {
        match self {
            Outcome::None => "NONE",
            Outcome::Pass => "PASS",
            Outcome::Warn => "WARN",
            Outcome::Fail => "FAIL",
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Outcome::None => "\x1b[2m",
            Outcome::Pass => "\x1b[32m",
            Outcome::Warn => "\x1b[33m",
            Outcome::Fail => "\x1b[31m",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    pub title: String,
    pub outcome: Outcome,
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// The document and line it comes from.
    pub origin: String,
    /// The analyzer's kind.
    pub kind: String,
    /// Set when a hostPreflightIgnore run kept a failure or warning from stopping it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignored: bool,
}

/// Every check of one run, in the order the documents list their analyzers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub results: Vec<CheckResult>,
    /// How long collecting and analyzing took, in milliseconds.
    pub milliseconds: u64,
}

/// troubleshoot's `preflight` exit codes.
pub const EXIT_PASS: i32 = 0;
pub const EXIT_SPEC_ISSUES: i32 = 2;
pub const EXIT_FAIL: i32 = 3;
pub const EXIT_WARN: i32 = 4;

impl Report {
    /// The worst outcome among the checks (`None` when none gave one).
    pub fn worst(&self) -> Outcome {
        self.results
            .iter()
            .map(|result| result.outcome)
            .max()
            .unwrap_or(Outcome::None)
    }

    pub fn count(&self, outcome: Outcome) -> usize {
        self.results
            .iter()
            .filter(|result| result.outcome == outcome)
            .count()
    }

    /// 0 when nothing failed or warned, 3 when a check failed, 4 when one warned.
    pub fn exit_code(&self) -> i32 {
        match self.worst() {
            Outcome::Fail => EXIT_FAIL,
            Outcome::Warn => EXIT_WARN,
            _ => EXIT_PASS,
        }
    }

    /// What [`Report::exit_code`] means, in words: the closing line of a run.
    pub fn exit_meaning(&self) -> String {
        let code = self.exit_code();
        let meaning = match code {
            EXIT_FAIL => "a check failed",
            EXIT_WARN => "a check warned and none failed",
            _ => "no check failed or warned",
        };
        format!("exit {code}: {meaning}")
    }

    /// Each check as the printed documents carry it (`berth preflight -o json`, and the
    /// node's status).
    pub fn checks(&self) -> Vec<berth_formats::output::PreflightCheck> {
        self.results
            .iter()
            .map(|result| berth_formats::output::PreflightCheck {
                title: result.title.clone(),
                outcome: result.outcome.word().to_string(),
                message: result.message.clone(),
                analyzer: result.kind.clone(),
                origin: result.origin.clone(),
                uri: Some(result.uri.clone()).filter(|uri| !uri.is_empty()),
                ignored: result.ignored,
            })
            .collect()
    }

    /// The document `berth preflight -o json|yaml` prints.
    pub fn document(&self) -> berth_formats::output::PreflightReport {
        berth_formats::output::PreflightReport {
            api_version: berth_formats::output::ApiVersion::V1,
            kind: berth_formats::output::PreflightReportKind::PreflightReport,
            summary: self.summary(),
            checks: self.checks(),
            milliseconds: self.milliseconds,
        }
    }

    /// `3 passed, 1 warning, 0 failed, 2 without outcome`.
    pub fn summary(&self) -> String {
        format!(
            "{} passed, {} warned, {} failed, {} without an outcome",
            self.count(Outcome::Pass),
            self.count(Outcome::Warn),
            self.count(Outcome::Fail),
            self.count(Outcome::None)
        )
    }

    /// The table: outcome, check, message; coloured when `colour`.
    pub fn table(&self, colour: bool) -> String {
        let width = self
            .results
            .iter()
            .map(|result| result.title.chars().count())
            .max()
            .unwrap_or(5)
            .clamp(5, 60);
        let mut out = format!("{:<7} {:<width$}  MESSAGE\n", "RESULT", "CHECK");
        for result in &self.results {
            let word = result.outcome.word();
            let word = if result.ignored {
                format!("{word}*")
            } else {
                word.to_string()
            };
            let padded = format!("{word:<7}");
            let shown = if colour {
                format!("{}{padded}\x1b[0m", result.outcome.colour())
            } else {
                padded
            };
            let message = result.message.replace('\n', "; ");
            out.push_str(&format!(
                "{shown} {:<width$}  {message}\n",
                truncate(&result.title, width)
            ));
        }
        if self.results.iter().any(|result| result.ignored) {
            out.push_str("* ignored: hostPreflightIgnore is set\n");
        }
        out
    }
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}
