//! Campaigns: a matrix of settings × repeats, as a campaign file states it. This module reads
//! the file ([`Campaign::parse`]), expands its axes into cells ([`Campaign::cells`]) and puts
//! the runs in order ([`Campaign::schedule`]); [`summary`] turns the runs' results into one
//! summary per cell with medians and confidence intervals. Running them is the binary's.
//!
//! A setting is named as a flag's long name (`flows`, `block`, `congestion`, `rate`,
//! `target`, `label`…), with `direction` (`up`, `down`, `bidir`) standing for `-R` and
//! `--bidir`: what each maps to is the command line's to say, so a key no flag has is refused
//! there, naming it.

pub mod summary;

use crate::error::SpecError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most cells a campaign may expand to: a matrix past it is a typo, not a plan.
pub const MAX_CELLS: usize = 10_000;
/// The most repeats of a cell.
pub const MAX_REPEATS: u32 = 1_000;

/// Keys a campaign keeps for itself: where results go and how they print is the campaign's.
const OWNED: [(&str, &str); 9] = [
    ("output", "each run's result goes to the campaign's directory (-o DIR)"),
    ("json", "the campaign writes each run's JSON itself"),
    ("quiet", "the campaign prints one line per run"),
    ("hlog", "a campaign keeps each run's histograms in its result"),
    ("find-max", "a campaign runs each cell at its settings; a search is `run --find-max`"),
    ("start-at", "a campaign starts each run when the last one ended"),
    ("frames", "a fleet cell's frames are logged beside its result"),
    ("host", "give the server as `target`"),
    ("metrics", "a campaign runs one fleet per run: scrape the agents (serve --metrics)"),
];

/// One value of a setting: what a flag takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    /// `true` sets a switch (`nodelay = true`: `--nodelay`); `false` leaves it off.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A number with a fraction.
    Float(f64),
    /// Anything else, as the flag reads it (`"64K"`, `"bbr"`, `"2s"`).
    Str(String),
}

impl Scalar {
    /// A value as a command line gives it: `true`/`false` a switch, a whole number a number,
    /// anything else as written.
    pub fn from_arg(s: &str) -> Scalar {
        match s {
            "true" => Scalar::Bool(true),
            "false" => Scalar::Bool(false),
            _ => s.parse::<i64>().map(Scalar::Int).unwrap_or_else(|_| Scalar::Str(s.to_string())),
        }
    }
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Str(s) => f.write_str(s),
        }
    }
}

/// A fixed setting: one value, or several for a flag given more than once (`assert`).
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// The flag's long name (`flows`; `_` in the file reads as `-`).
    pub key: String,
    /// Its values, in order.
    pub values: Vec<Scalar>,
}

/// One axis of the matrix: a setting and the values it takes, in the file's order; or an axis
/// of named sets (`path = [{ name = "service", servers = "…" }, …]`), each value a name that
/// stands for several settings changed together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// The flag's long name, or for an axis of named sets the axis's own name.
    pub name: String,
    /// Its values (for named sets, their names).
    pub values: Vec<Scalar>,
    /// For an axis of named sets: each name's settings (flag long name → value); empty for
    /// an axis of plain values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sets: BTreeMap<String, BTreeMap<String, Scalar>>,
}

impl Axis {
    /// The settings a cell's `value` of this axis stands for: the named set's, or the axis
    /// itself set to the value.
    pub fn expand(&self, value: &Scalar) -> Vec<(String, Scalar)> {
        match self.sets.get(&value.to_string()) {
            Some(set) => set.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            None if self.sets.is_empty() => vec![(self.name.clone(), value.clone())],
            None => Vec::new(),
        }
    }

    /// Each value as the file shows it: `service{servers=dns:svc}` for a named set.
    fn shown(&self) -> String {
        let one = |v: &Scalar| match self.sets.get(&v.to_string()) {
            Some(set) => {
                let inner: Vec<String> = set.iter().map(|(k, x)| format!("{k}={x}")).collect();
                format!("{v}{{{}}}", inner.join(" "))
            }
            None => v.to_string(),
        };
        self.values.iter().map(one).collect::<Vec<_>>().join(", ")
    }
}

/// In which order the runs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Round by round (every cell's first run, then every cell's second…), the cells shuffled
    /// anew in each round: drift on the host spreads over every cell instead of landing on one.
    Shuffled,
    /// Cell by cell, each cell's repeats one after another.
    Grouped,
}

/// A campaign as its file states it.
#[derive(Debug, Clone, PartialEq)]
pub struct Campaign {
    /// The base profile (a built-in name or a file), `None`: the command line's default.
    pub profile: Option<String>,
    /// The server every cell aims at, unless an axis or the command line says.
    pub target: Option<String>,
    /// Runs per cell.
    pub repeats: u32,
    /// The runs' order.
    pub order: Order,
    /// The shuffle's seed: the same file runs in the same order.
    pub seed: u64,
    /// The noise band of a change (0.01: ±1%): an interval wholly inside it is no difference.
    pub noise: f64,
    /// Settings every cell has (`[set]`).
    pub set: Vec<Setting>,
    /// The matrix (`[axes]`), the first axis outermost.
    pub axes: Vec<Axis>,
    /// `[fleet]`: each run a fleet with these settings (`clients`, `servers`, `pairing`…);
    /// `None`: each run one test from this host.
    pub fleet: Option<Vec<Setting>>,
}

/// One combination of the axes' values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// 1-based, in the matrix's order.
    pub index: usize,
    /// `c001`: the cell's runs are `runs/c001-r1.json`, …
    pub id: String,
    /// Each axis's value, in the axes' order.
    pub settings: Vec<(String, Scalar)>,
}

impl Cell {
    /// `flows=2 block=64K`, or `(no axes)` for a campaign of repeats alone.
    pub fn name(&self) -> String {
        if self.settings.is_empty() {
            return "(no axes)".into();
        }
        self.settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }

    /// The value this cell gives `axis`.
    pub fn get(&self, axis: &str) -> Option<&Scalar> {
        self.settings.iter().find(|(k, _)| k == axis).map(|(_, v)| v)
    }
}

/// One run of the campaign: a cell's repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId {
    /// The cell's index (1-based).
    pub cell: usize,
    /// The repeat (1-based).
    pub repeat: u32,
}

impl RunId {
    /// Its result's file name in `runs/`: `c003-r2.json`.
    pub fn file_name(&self, cells: &[Cell]) -> String {
        format!("{}-r{}.json", cells[self.cell - 1].id, self.repeat)
    }
}

/// The file as written: every key checked, unknown ones refused by name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    profile: Option<String>,
    target: Option<String>,
    repeats: Option<u32>,
    order: Option<Order>,
    seed: Option<u64>,
    noise: Option<String>,
    set: Option<BTreeMap<toml::Spanned<String>, toml::Value>>,
    axes: Option<BTreeMap<toml::Spanned<String>, toml::Value>>,
    fleet: Option<BTreeMap<toml::Spanned<String>, toml::Value>>,
}

impl Campaign {
    /// Reads a campaign file's text; `origin` (its path) names it in errors, with the key at
    /// fault.
    pub fn parse(text: &str, origin: &str) -> Result<Campaign, SpecError> {
        let raw: Raw =
            toml::from_str(text).map_err(|e| SpecError::Parse { origin: origin.into(), message: e.to_string() })?;
        let bad = |field: String, message: String| SpecError::Invalid { origin: origin.into(), field, message };
        let repeats = raw.repeats.unwrap_or(3);
        if !(1..=MAX_REPEATS).contains(&repeats) {
            return Err(bad("repeats".into(), format!("{repeats}: from 1 to {MAX_REPEATS}")));
        }
        let set = settings("set", raw.set, origin)?
            .into_iter()
            .map(|(key, values)| Setting { key, values })
            .collect::<Vec<_>>();
        let mut axes = Vec::new();
        let (plain, named, order) = split_named(raw.axes, origin)?;
        for (name, values) in settings("axes", Some(plain), origin)? {
            let field = format!("axes.{name}");
            if values.is_empty() {
                return Err(bad(field, "has no values: give at least one".into()));
            }
            if let Some(dup) = values.iter().enumerate().find(|(i, v)| values[..*i].contains(v)).map(|(_, v)| v) {
                return Err(bad(field, format!("{dup} is given twice: each value is one cell")));
            }
            if set.iter().any(|s| s.key == name) {
                return Err(bad(field, format!("{name} is in [set] too: a setting is fixed or an axis")));
            }
            axes.push(Axis { name, values, sets: BTreeMap::new() });
        }
        for axis in named {
            let taken = |k: &str| {
                set.iter().any(|s| s.key == k)
                    || axes.iter().any(|a: &Axis| a.name == k || a.sets.values().any(|x| x.contains_key(k)))
            };
            if let Some(k) = axis.sets.values().flat_map(|x| x.keys()).find(|k| taken(k)) {
                return Err(bad(
                    format!("axes.{}", axis.name),
                    format!("{k} is in [set] or another axis too: a setting is fixed or changes along one axis"),
                ));
            }
            axes.push(axis);
        }
        axes.sort_by_key(|a| order.iter().position(|n| *n == a.name));
        let fleet = match raw.fleet {
            Some(t) => {
                let f: Vec<Setting> = settings("fleet", Some(t), origin)?
                    .into_iter()
                    .map(|(key, values)| Setting { key, values })
                    .collect();
                let every_set_has = |key: &str| {
                    axes.iter().any(|a| !a.sets.is_empty() && a.sets.values().all(|set| set.contains_key(key)))
                };
                if !f.iter().any(|s| s.key == "clients") && !every_set_has("clients") {
                    return Err(bad("fleet.clients".into(), "a fleet campaign names its client agents".into()));
                }
                Some(f)
            }
            None => None,
        };
        let noise = match raw.noise.as_deref() {
            None => 0.01,
            Some(n) => crate::units::parse_share(n)
                .and_then(|v| if (0.0..=0.5).contains(&v) { Ok(v) } else { Err(format!("{n}: from 0% to 50%")) })
                .map_err(|m| bad("noise".into(), m))?,
        };
        let c = Campaign {
            noise,
            profile: raw.profile,
            target: raw.target,
            repeats,
            order: raw.order.unwrap_or(Order::Shuffled),
            seed: raw.seed.unwrap_or(1),
            set,
            axes,
            fleet,
        };
        if c.target.is_some() && c.axes.iter().any(|a| a.name == "target") {
            return Err(bad("axes.target".into(), "the target is an axis and a top-level key: give one".into()));
        }
        let cells: usize = c.axes.iter().map(|a| a.values.len()).product();
        if cells > MAX_CELLS {
            return Err(bad("axes".into(), format!("{cells} cells: at most {MAX_CELLS}")));
        }
        Ok(c)
    }

    /// Sets `key` as the command line's `--set KEY=VALUE` does: the base `profile` or `target`,
    /// a `[fleet]` setting when the fleet has it, else a `[set]` one (replaced or added). An
    /// axis, or a key the campaign keeps for itself, is refused.
    pub fn set_value(&mut self, key: &str, value: Scalar) -> Result<(), String> {
        let key = key.replace('_', "-");
        if let Some((_, why)) = OWNED.iter().find(|(o, _)| *o == key) {
            return Err(format!("{key} is the campaign's own: {why}"));
        }
        if self.axes.iter().any(|a| a.name == key) {
            return Err(format!("{key} is an axis: --axis {key}=V1,V2 gives its values"));
        }
        if let Some(a) = self.axes.iter().find(|a| a.sets.values().any(|s| s.contains_key(&key))) {
            return Err(format!("{key} changes along the axis {}: each of its named sets gives it", a.name));
        }
        match key.as_str() {
            "profile" => self.profile = Some(value.to_string()),
            "target" => self.target = Some(value.to_string()),
            _ => {
                let values = vec![value];
                if let Some(s) = self.fleet.iter_mut().flatten().find(|s| s.key == key) {
                    s.values = values;
                } else if let Some(s) = self.set.iter_mut().find(|s| s.key == key) {
                    s.values = values;
                } else {
                    self.set.push(Setting { key, values });
                }
            }
        }
        Ok(())
    }

    /// Gives an axis of the file other values, as `--axis NAME=V1,V2` does (a target per
    /// site, a shorter list for a trial); an axis the file lacks is refused.
    pub fn replace_axis(&mut self, name: &str, values: Vec<Scalar>) -> Result<(), String> {
        let name = name.replace('_', "-");
        let names: Vec<&str> = self.axes.iter().map(|a| a.name.as_str()).collect();
        let known = names.join(", ");
        let axis = self.axes.iter_mut().find(|a| a.name == name).ok_or_else(|| {
            format!("the campaign has no axis {name} (its axes: {})", if known.is_empty() { "none" } else { &known })
        })?;
        if values.is_empty() {
            return Err(format!("--axis {name}: give at least one value"));
        }
        if let Some(v) = values.iter().find(|v| !axis.sets.is_empty() && !axis.sets.contains_key(&v.to_string())) {
            let names: Vec<&str> = axis.sets.keys().map(String::as_str).collect();
            return Err(format!("--axis {name}: {v} is not one of its named sets ({})", names.join(", ")));
        }
        if let Some(dup) = values.iter().enumerate().find(|(i, v)| values[..*i].contains(v)).map(|(_, v)| v) {
            return Err(format!("--axis {name}: {dup} is given twice"));
        }
        axis.values = values;
        Ok(())
    }

    /// The settings `cell` gives, its named sets expanded, in the axes' order.
    pub fn cell_settings(&self, cell: &Cell) -> Vec<(String, Scalar)> {
        cell.settings
            .iter()
            .flat_map(|(name, value)| match self.axes.iter().find(|a| a.name == *name) {
                Some(a) => a.expand(value),
                None => vec![(name.clone(), value.clone())],
            })
            .collect()
    }

    /// Every combination of the axes' values, the first axis outermost (one cell when there
    /// are no axes).
    pub fn cells(&self) -> Vec<Cell> {
        let mut combos: Vec<Vec<(String, Scalar)>> = vec![Vec::new()];
        for a in &self.axes {
            combos = combos
                .into_iter()
                .flat_map(|prefix| {
                    a.values.iter().map(move |v| {
                        let mut c = prefix.clone();
                        c.push((a.name.clone(), v.clone()));
                        c
                    })
                })
                .collect();
        }
        let width = combos.len().to_string().len().max(3);
        combos
            .into_iter()
            .enumerate()
            .map(|(i, settings)| Cell { index: i + 1, id: format!("c{:0width$}", i + 1), settings })
            .collect()
    }

    /// Every run in the order they go ([`Order`]); a round's shuffle depends only on the seed
    /// and the round, so adding repeats later appends rounds and keeps the earlier ones.
    pub fn schedule(&self) -> Vec<RunId> {
        let n = self.cells().len();
        let mut runs = Vec::with_capacity(n * self.repeats as usize);
        match self.order {
            Order::Grouped => {
                for cell in 1..=n {
                    runs.extend((1..=self.repeats).map(|repeat| RunId { cell, repeat }));
                }
            }
            Order::Shuffled => {
                for repeat in 1..=self.repeats {
                    let mut cells: Vec<usize> = (1..=n).collect();
                    shuffle(&mut cells, self.seed ^ (repeat as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    runs.extend(cells.into_iter().map(|cell| RunId { cell, repeat }));
                }
            }
        }
        runs
    }

    /// What differs from `earlier` (the file a directory's runs were made with), each named;
    /// empty when nothing does. More repeats are not a difference: they add runs.
    pub fn differences(&self, earlier: &Campaign) -> Vec<String> {
        let mut d = Vec::new();
        let mut field = |name: &str, a: String, b: String| {
            if a != b {
                d.push(format!("{name}: {b} then, {a} now"));
            }
        };
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "(none)".into());
        field("profile", opt(&self.profile), opt(&earlier.profile));
        field("target", opt(&self.target), opt(&earlier.target));
        field("order", format!("{:?}", self.order).to_lowercase(), format!("{:?}", earlier.order).to_lowercase());
        field("seed", self.seed.to_string(), earlier.seed.to_string());
        field("noise", format!("{}%", self.noise * 100.0), format!("{}%", earlier.noise * 100.0));
        if self.repeats < earlier.repeats {
            d.push(format!("repeats: {} then, {} now (fewer would leave runs out)", earlier.repeats, self.repeats));
        }
        let show = |s: &[Setting]| -> BTreeMap<String, String> {
            s.iter()
                .map(|s| (s.key.clone(), s.values.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")))
                .collect()
        };
        let axes = |a: &[Axis]| -> BTreeMap<String, String> { a.iter().map(|a| (a.name.clone(), a.shown())).collect() };
        let empty = Vec::new();
        for (section, now, then) in [
            ("set", show(&self.set), show(&earlier.set)),
            ("axes", axes(&self.axes), axes(&earlier.axes)),
            ("fleet", show(self.fleet.as_ref().unwrap_or(&empty)), show(earlier.fleet.as_ref().unwrap_or(&empty))),
        ] {
            let keys: std::collections::BTreeSet<&String> = now.keys().chain(then.keys()).collect();
            for k in keys {
                match (then.get(k), now.get(k)) {
                    (Some(a), Some(b)) if a != b => d.push(format!("{section}.{k}: [{a}] then, [{b}] now")),
                    (Some(a), None) => d.push(format!("{section}.{k}: [{a}] then, gone now")),
                    (None, Some(b)) => d.push(format!("{section}.{k}: new, [{b}]")),
                    _ => {}
                }
            }
        }
        let order = |a: &[Axis]| a.iter().map(|a| a.name.clone()).collect::<Vec<_>>();
        if d.is_empty() && order(&self.axes) != order(&earlier.axes) {
            d.push(format!(
                "the axes' order: {} then, {} now",
                order(&earlier.axes).join(", "),
                order(&self.axes).join(", ")
            ));
        }
        d
    }
}

/// A table's keys in the file's order (`_` read as `-`), each with its values; a key the
/// campaign keeps for itself, or a value that is not a scalar (or, outside `[axes]`, a list
/// of scalars), is refused naming it.
fn settings(
    section: &str,
    table: Option<BTreeMap<toml::Spanned<String>, toml::Value>>,
    origin: &str,
) -> Result<Vec<(String, Vec<Scalar>)>, SpecError> {
    let mut entries: Vec<(toml::Spanned<String>, toml::Value)> = table.unwrap_or_default().into_iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    let mut out: Vec<(String, Vec<Scalar>)> = Vec::new();
    for (k, v) in entries {
        let key = k.into_inner().replace('_', "-");
        let field = format!("{section}.{key}");
        let bad = |message: String| SpecError::Invalid { origin: origin.into(), field: field.clone(), message };
        if let Some((_, why)) = OWNED.iter().find(|(o, _)| *o == key) {
            return Err(bad(format!("is the campaign's own: {why}")));
        }
        if out.iter().any(|(o, _)| *o == key) {
            return Err(bad("is given twice (as - and _)".into()));
        }
        let values = match v {
            toml::Value::Array(items) => {
                if section != "axes" && items.is_empty() {
                    return Err(bad("is an empty list".into()));
                }
                items.into_iter().map(scalar).collect::<Result<Vec<_>, _>>().map_err(bad)?
            }
            // An axis lists its values: one value alone is a fixed setting.
            _ if section == "axes" => {
                return Err(bad("lists its values: [1, 2]; one fixed value goes in [set]".into()));
            }
            other => vec![scalar(other).map_err(bad)?],
        };
        out.push((key, values));
    }
    Ok(out)
}

/// `[axes]` parted into its plain axes (for [`settings`]) and its axes of named sets, with
/// every axis's name in the file's order. An axis of named sets lists inline tables, each with
/// a `name` and the settings it stands for (one value each).
#[allow(clippy::type_complexity)]
fn split_named(
    table: Option<BTreeMap<toml::Spanned<String>, toml::Value>>,
    origin: &str,
) -> Result<(BTreeMap<toml::Spanned<String>, toml::Value>, Vec<Axis>, Vec<String>), SpecError> {
    let mut entries: Vec<(toml::Spanned<String>, toml::Value)> = table.unwrap_or_default().into_iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    let order = entries.iter().map(|(k, _)| k.get_ref().replace('_', "-")).collect();
    let (mut plain, mut named) = (BTreeMap::new(), Vec::new());
    for (k, v) in entries {
        let tables = matches!(&v, toml::Value::Array(items) if items.iter().any(toml::Value::is_table));
        if !tables {
            plain.insert(k, v);
            continue;
        }
        let name = k.into_inner().replace('_', "-");
        let bad =
            |message: String| SpecError::Invalid { origin: origin.into(), field: format!("axes.{name}"), message };
        let toml::Value::Array(items) = v else { unreachable!("matched above") };
        let mut axis = Axis { name: name.clone(), values: Vec::new(), sets: BTreeMap::new() };
        for (i, item) in items.into_iter().enumerate() {
            let toml::Value::Table(t) = item else {
                return Err(bad(format!(
                    "value {}: every value is a named set ({{ name = \"…\", … }}) or none is",
                    i + 1
                )));
            };
            let mut set = BTreeMap::new();
            let mut label = None;
            for (key, value) in t {
                let key = key.replace('_', "-");
                let at = |m: String| bad(format!("value {}: {key}: {m}", i + 1));
                if key == "name" {
                    label = Some(match value {
                        toml::Value::String(s) if !s.trim().is_empty() => s,
                        _ => return Err(at("the set's name, a string".into())),
                    });
                    continue;
                }
                if let Some((_, why)) = OWNED.iter().find(|(o, _)| *o == key) {
                    return Err(at(format!("is the campaign's own: {why}")));
                }
                if set.insert(key.clone(), scalar(value).map_err(at)?).is_some() {
                    return Err(at("is given twice (as - and _)".into()));
                }
            }
            let label = label.ok_or_else(|| bad(format!("value {}: a named set needs its name = \"…\"", i + 1)))?;
            if set.is_empty() {
                return Err(bad(format!("{label}: names no setting")));
            }
            if axis.sets.insert(label.clone(), set).is_some() {
                return Err(bad(format!("{label} is given twice: each value is one cell")));
            }
            axis.values.push(Scalar::Str(label));
        }
        named.push(axis);
    }
    Ok((plain, named, order))
}

/// One TOML value as a setting's value.
fn scalar(v: toml::Value) -> Result<Scalar, String> {
    match v {
        toml::Value::String(s) => Ok(Scalar::Str(s)),
        toml::Value::Integer(i) => Ok(Scalar::Int(i)),
        toml::Value::Float(f) => Ok(Scalar::Float(f)),
        toml::Value::Boolean(b) => Ok(Scalar::Bool(b)),
        other => Err(format!("{other} is not a value a flag takes: a string, a number or true/false")),
    }
}

/// Shuffles `v` in place (Fisher–Yates over splitmix64 from `seed`): the same seed, the same
/// order, on every build and host.
fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..v.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
profile = "bulk-1flow"
target = "127.0.0.1:5210"
repeats = 3
[set]
duration = "1s"
[axes]
flows = [1, 2]
block = ["64K", "1M"]
"#;

    #[test]
    fn a_campaign_expands_in_the_files_order() {
        let c = Campaign::parse(FILE, "c.toml").unwrap();
        assert_eq!((c.repeats, c.order, c.fleet.is_none()), (3, Order::Shuffled, true));
        let cells = c.cells();
        let names: Vec<String> = cells.iter().map(Cell::name).collect();
        assert_eq!(names, ["flows=1 block=64K", "flows=1 block=1M", "flows=2 block=64K", "flows=2 block=1M"]);
        assert_eq!((cells[2].id.as_str(), cells[2].get("block")), ("c003", Some(&Scalar::Str("64K".into()))));
        let runs = c.schedule();
        assert_eq!(runs.len(), 12);
        // Round by round: every cell once in each round, the rounds in order.
        for (round, chunk) in runs.chunks(4).enumerate() {
            let mut cells: Vec<usize> = chunk.iter().map(|r| r.cell).collect();
            assert!(chunk.iter().all(|r| r.repeat == round as u32 + 1), "{chunk:?}");
            cells.sort();
            assert_eq!(cells, [1, 2, 3, 4]);
        }
        assert_eq!(runs, c.schedule(), "the same file, the same order");
        assert_ne!(runs[..4], runs[4..8], "each round is shuffled anew (seed 1)");
        let mut more = c.clone();
        more.repeats = 5;
        assert_eq!(more.schedule()[..12], runs[..], "more repeats append rounds");
        let grouped = Campaign { order: Order::Grouped, ..c.clone() }.schedule();
        assert_eq!(
            grouped[..3],
            [RunId { cell: 1, repeat: 1 }, RunId { cell: 1, repeat: 2 }, RunId { cell: 1, repeat: 3 }]
        );
        assert_eq!(RunId { cell: 3, repeat: 2 }.file_name(&cells), "c003-r2.json");
    }

    #[test]
    fn bad_files_are_refused_naming_the_key() {
        let err = |text: &str| Campaign::parse(text, "c.toml").unwrap_err().to_string();
        assert!(err("[axes]\nflows = []\n").contains("axes.flows"), "{}", err("[axes]\nflows = []\n"));
        assert!(err("[axes]\nflows = 2\n").contains("one fixed value goes in [set]"));
        assert!(err("[axes]\nflows = [1, 1]\n").contains("1 is given twice"));
        assert!(err("[set]\noutput = \"x\"\n").contains("set.output"));
        assert!(err("[set]\nflows = 1\n[axes]\nflows = [1, 2]\n").contains("in [set] too"));
        assert!(err("repeats = 0\n").contains("invalid repeats"));
        assert!(err("rounds = 3\n").contains("rounds"), "unknown top-level keys are named");
        assert!(err("[axes]\nflows = [[1]]\n").contains("axes.flows"));
        assert!(err("[fleet]\nservers = \"a\"\n").contains("fleet.clients"));
        assert!(err("target = \"a\"\n[axes]\ntarget = [\"b\", \"c\"]\n").contains("axes.target"));
        let big = format!("[axes]\na = [{}]\nb = [{}]\n", nums(101), nums(101));
        assert!(err(&big).contains("10201 cells"), "{}", err(&big));
    }

    fn nums(n: usize) -> String {
        (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
    }

    #[test]
    fn a_changed_file_is_named_and_more_repeats_are_not_a_change() {
        let c = Campaign::parse(FILE, "c.toml").unwrap();
        let more = Campaign::parse(&FILE.replace("repeats = 3", "repeats = 5"), "c.toml").unwrap();
        assert!(more.differences(&c).is_empty());
        assert_eq!(c.differences(&more), ["repeats: 5 then, 3 now (fewer would leave runs out)"]);
        let other = Campaign::parse(&FILE.replace("\"1M\"", "\"4M\""), "c.toml").unwrap();
        assert_eq!(other.differences(&c), ["axes.block: [64K, 1M] then, [64K, 4M] now"]);
        let set =
            Campaign::parse(&FILE.replace("duration = \"1s\"", "duration = \"2s\"\nnodelay = true"), "c").unwrap();
        assert_eq!(set.differences(&c), ["set.duration: [1s] then, [2s] now", "set.nodelay: new, [true]"]);
    }

    const PATHS: &str = r#"
[fleet]
token-file = "t"
[axes]
path = [
  { name = "near", clients = "a:1", servers = "s:1" },
  { name = "service", clients = "b:1", servers = "svc:1" },
]
profile = ["bulk-1flow", "latency"]
"#;

    #[test]
    fn an_axis_of_named_sets_changes_its_settings_together() {
        let c = Campaign::parse(PATHS, "c").unwrap();
        let cells = c.cells();
        let names: Vec<String> = cells.iter().map(Cell::name).collect();
        assert_eq!(names[..2], ["path=near profile=bulk-1flow", "path=near profile=latency"]);
        let s = |k: &str, v: &str| (k.to_string(), Scalar::Str(v.into()));
        assert_eq!(
            c.cell_settings(&cells[2]),
            [s("clients", "b:1"), s("servers", "svc:1"), s("profile", "bulk-1flow")],
            "the fleet's clients come from the set"
        );
        let mut fewer = c.clone();
        fewer.replace_axis("path", vec![Scalar::Str("service".into())]).unwrap();
        assert_eq!(fewer.cells().len(), 2);
        let far = c.clone().replace_axis("path", vec![Scalar::Str("far".into())]).unwrap_err();
        assert!(far.contains("not one of its named sets (near, service)"), "{far}");
        let err = c.clone().set_value("servers", Scalar::Str("x".into())).unwrap_err();
        assert!(err.contains("changes along the axis path"), "{err}");
        let other = Campaign::parse(&PATHS.replace("svc:1", "svc:2"), "c").unwrap();
        assert_eq!(
            other.differences(&c),
            ["axes.path: [near{clients=a:1 servers=s:1}, service{clients=b:1 servers=svc:1}] then, \
              [near{clients=a:1 servers=s:1}, service{clients=b:1 servers=svc:2}] now"]
        );
    }

    #[test]
    fn bad_named_sets_are_refused_naming_the_axis() {
        let err = |text: &str| Campaign::parse(text, "c.toml").unwrap_err().to_string();
        let mixed = err("[axes]\np = [{ name = \"a\", flows = 1 }, 2]\n");
        assert!(mixed.contains("axes.p") && mixed.contains("value 2"), "{mixed}");
        assert!(err("[axes]\np = [{ flows = 1 }]\n").contains("needs its name"));
        assert!(err("[axes]\np = [{ name = \"a\" }]\n").contains("names no setting"));
        let twice = err("[axes]\np = [{ name = \"a\", flows = 1 }, { name = \"a\", flows = 2 }]\n");
        assert!(twice.contains("a is given twice"), "{twice}");
        let fixed = err("[set]\nflows = 1\n[axes]\np = [{ name = \"a\", flows = 2 }]\n");
        assert!(fixed.contains("flows is in [set] or another axis"), "{fixed}");
        assert!(err("[axes]\np = [{ name = \"a\", output = \"x\" }]\n").contains("campaign's own"));
        assert!(err("[axes]\np = [{ name = \"a\", flows = [1] }]\n").contains("not a value a flag takes"));
        assert!(
            err("[fleet]\ntoken-file = \"t\"\n[axes]\np = [{ name = \"a\", servers = \"s\" }]\n")
                .contains("fleet.clients")
        );
    }
}
