//! Checks that the results about to be added can be added: no counter's total passes what a
//! `u64` holds (a result that says 2^64 - 1 bytes would otherwise wrap the total below one of
//! its parts), and no test is counted twice (the same file given twice, or two merged results
//! that hold the same test).

use crate::result::RunResult;
use std::collections::HashMap;

/// Why results cannot be added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SumError {
    /// A counter's total over the inputs passes `u64::MAX`.
    Overflow {
        /// The input whose value made it pass.
        input: String,
        /// The field, as a JSON path without array indices (`summary.ways.sender.bytes`).
        field: String,
    },
    /// One test is in two inputs.
    Twice {
        /// The first input that holds it.
        a: String,
        /// The second.
        b: String,
        /// Its test id.
        test_id: String,
    },
}

impl std::fmt::Display for SumError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SumError::Overflow { input, field } => {
                write!(
                    f,
                    "{input}: {field}: its total over the inputs passes 2^64 - 1; a counter this large is not a measurement"
                )
            }
            SumError::Twice { a, b, test_id } => {
                write!(f, "{a} and {b} both hold test {test_id}: a test is added once (is one file given twice?)")
            }
        }
    }
}

/// The ids of the tests `r` holds: its parts' (a merged result), or its own.
fn tests_of(r: &RunResult) -> Vec<&str> {
    if r.parts.is_empty() { vec![r.test_id.as_str()] } else { r.parts.iter().map(|p| p.test_id.as_str()).collect() }
}

/// Checks `inputs` (name, result) before they are added.
pub fn check(inputs: &[(&str, &RunResult)]) -> Result<(), SumError> {
    let mut totals = Totals::default();
    inputs.iter().try_for_each(|(name, r)| totals.add(name, r))
}

/// The running totals of the results taken so far: each new one is checked against them alone,
/// so taking n results one at a time costs what checking them once does (a fleet's
/// coordinator takes its agents' final results so).
#[derive(Debug, Default)]
pub struct Totals {
    /// Test id → the input that holds it.
    seen: HashMap<String, String>,
    /// Field path → its total.
    totals: HashMap<String, u128>,
}

impl Totals {
    /// Takes `r` (named `name` in errors) when no test of it was taken before and no counter's
    /// total would pass what a `u64` holds; else nothing is taken and the error says why.
    pub fn add(&mut self, name: &str, r: &RunResult) -> Result<(), SumError> {
        let ids: Vec<&str> = tests_of(r).into_iter().filter(|id| !id.is_empty()).collect();
        let mut own = std::collections::HashSet::new();
        for id in &ids {
            if let Some(first) = self.seen.get(*id).map(String::as_str).or(own.get(id).map(|_| name)) {
                return Err(SumError::Twice { a: first.to_string(), b: name.to_string(), test_id: id.to_string() });
            }
            own.insert(*id);
        }
        // This result's own sums first, then each against the totals: nothing is added when
        // any passes.
        let mut mine: HashMap<String, u128> = HashMap::new();
        let v = serde_json::to_value(r).unwrap_or_default();
        walk(&v, &mut String::new(), &mut |field, n| {
            *mine.entry(field.to_string()).or_default() += u128::from(n);
            Ok(())
        })?;
        if let Some((field, _)) =
            mine.iter().find(|(f, n)| self.totals.get(*f).copied().unwrap_or(0) + **n > u128::from(u64::MAX))
        {
            return Err(SumError::Overflow { input: name.to_string(), field: field.clone() });
        }
        for (f, n) in mine {
            *self.totals.entry(f).or_default() += n;
        }
        self.seen.extend(ids.into_iter().map(|id| (id.to_string(), name.to_string())));
        Ok(())
    }
}

/// Calls `f` with every unsigned integer in `v` and its path (arrays add no index). Instants
/// (`*unix_ns`) are not counters and are left out.
fn walk(
    v: &serde_json::Value,
    path: &mut String,
    f: &mut impl FnMut(&str, u64) -> Result<(), SumError>,
) -> Result<(), SumError> {
    match v {
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(n) if !path.ends_with("unix_ns") => f(path, n),
            _ => Ok(()),
        },
        serde_json::Value::Array(a) => a.iter().try_for_each(|x| walk(x, path, f)),
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                walk(x, path, f)?;
                path.truncate(len);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
