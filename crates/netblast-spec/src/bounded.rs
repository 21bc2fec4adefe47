//! Lists and texts refused past a bound while they are read: a peer's frame of 16 MiB could
//! otherwise hold a million request headers or addresses, each an allocation, and multiply
//! into hundreds of megabytes before anything validated it. Each bound is named in the error
//! with the field it holds.

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use std::fmt;
use std::marker::PhantomData;

/// Request headers of an HTTP test (`http.headers`).
pub const MAX_HEADERS: usize = 256;
/// URLs of an HTTP test (`http.urls`, and their `http.weights`).
pub const MAX_URLS: usize = 65_536;
/// Characters of a profile's description or an order's label (one line each).
pub const MAX_LINE: usize = 4096;
/// Steps of an open-loop HTTP test (`http.steps`).
pub const MAX_STEPS: usize = 4096;
/// Addresses an agent reports (`addresses`) or networks it allows (`allow`).
pub const MAX_ADDRESSES: usize = 4096;

/// A list of at most `max` items, refused with `what` named as soon as it has one more.
pub fn seq<'de, D, T>(d: D, what: &'static str, max: usize) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    d.deserialize_seq(Bounded { what, max, item: PhantomData })
}

/// A text of at most `max` bytes, refused with `what` named.
pub fn text<'de, D: Deserializer<'de>>(d: D, what: &'static str, max: usize) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s.len() > max {
        return Err(de::Error::custom(format!("{what}: {} bytes, over the limit of {max}", s.len())));
    }
    Ok(s)
}

struct Bounded<T> {
    what: &'static str,
    max: usize,
    item: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Bounded<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a list of at most {} items ({})", self.max, self.what)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max).min(1024));
        while let Some(item) = seq.next_element()? {
            if out.len() == self.max {
                return Err(de::Error::custom(format!(
                    "{}: more than {} items, over the limit of {}",
                    self.what, self.max, self.max
                )));
            }
            out.push(item);
        }
        Ok(out)
    }
}

/// `http.headers`.
pub fn headers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    seq(d, "http.headers", MAX_HEADERS)
}

/// `http.urls`.
pub fn urls<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    seq(d, "http.urls", MAX_URLS)
}

/// `http.weights`.
pub fn weights<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u32>>, D::Error> {
    #[derive(Deserialize)]
    struct W(#[serde(deserialize_with = "weights_seq")] Vec<u32>);
    fn weights_seq<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u32>, D::Error> {
        seq(d, "http.weights", MAX_URLS)
    }
    Ok(Option::<W>::deserialize(d)?.map(|w| w.0))
}

/// `http.steps`.
pub fn steps<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    seq(d, "http.steps", MAX_STEPS)
}

/// An order's `label`.
pub fn label<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    text(d, "label", MAX_LINE)
}

/// An agent's `addresses`.
pub fn addresses<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<std::net::IpAddr>, D::Error> {
    seq(d, "addresses", MAX_ADDRESSES)
}

/// An agent's `allow`.
pub fn allow<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    seq(d, "allow", MAX_ADDRESSES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct H {
        #[serde(deserialize_with = "headers")]
        headers: Vec<String>,
        #[serde(default, deserialize_with = "weights")]
        weights: Option<Vec<u32>>,
        #[serde(default, deserialize_with = "label")]
        label: String,
    }

    #[test]
    fn a_list_past_its_bound_is_refused_with_the_field_named() {
        let ok = format!(r#"{{"headers": {}}}"#, serde_json::to_string(&vec!["a: b"; MAX_HEADERS]).unwrap());
        assert_eq!(serde_json::from_str::<H>(&ok).unwrap().headers.len(), MAX_HEADERS);
        let over = format!(r#"{{"headers": {}}}"#, serde_json::to_string(&vec!["a: b"; MAX_HEADERS + 1]).unwrap());
        let e = serde_json::from_str::<H>(&over).unwrap_err().to_string();
        assert!(e.contains("http.headers") && e.contains(&MAX_HEADERS.to_string()), "{e}");
        let w = serde_json::from_str::<H>(r#"{"headers": [], "weights": [1, 2], "label": "a"}"#).unwrap();
        assert_eq!((w.weights, w.label.as_str()), (Some(vec![1, 2]), "a"));
        let long = format!(r#"{{"headers": [], "label": "{}"}}"#, "x".repeat(MAX_LINE + 1));
        let e = serde_json::from_str::<H>(&long).unwrap_err().to_string();
        assert!(e.contains("label") && e.contains("4096"), "{e}");
    }

    #[test]
    fn toml_profiles_are_bounded_too() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct T {
            #[serde(deserialize_with = "headers")]
            headers: Vec<String>,
        }
        let list: Vec<String> = vec!["\"a: b\"".into(); MAX_HEADERS + 1];
        let doc = format!("headers = [{}]\n", list.join(", "));
        let e = toml::from_str::<T>(&doc).unwrap_err().to_string();
        assert!(e.contains("http.headers"), "{e}");
    }
}
