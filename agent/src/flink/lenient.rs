//! Deserializers that accept what Flink actually sends: integers as JSON numbers or as
//! numeric strings (plain metric values are always strings), and `null` for "unset".

use serde::de::{self, Deserializer, Unexpected, Visitor};

use flink_autoscale_core::samples::parse_flink_number;

struct IntVisitor;

impl Visitor<'_> for IntVisitor {
    type Value = Option<i64>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an integer, a numeric string or null")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        i64::try_from(v)
            .map(Some)
            .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.0e18 {
            Ok(Some(v as i64))
        } else {
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if let Ok(i) = v.trim().parse::<i64>() {
            return Ok(Some(i));
        }
        match parse_flink_number(v) {
            Some(f) => self.visit_f64(f),
            None => Err(E::invalid_value(Unexpected::Str(v), &self)),
        }
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// An optional integer: number, numeric string, or `null`/absent (with `#[serde(default)]`).
pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_any(IntVisitor)
}

/// A required integer (number or numeric string).
pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    opt_i64(d)?.ok_or_else(|| de::Error::custom("expected an integer, got null"))
}

/// A required non-negative integer that fits `u32` (parallelism, max parallelism).
pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = i64(d)?;
    u32::try_from(v).map_err(|_| de::Error::custom(format!("expected 0..=4294967295, got {v}")))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct T {
        #[serde(deserialize_with = "super::u32")]
        p: u32,
        #[serde(default, deserialize_with = "super::opt_i64")]
        t: Option<i64>,
    }

    #[test]
    fn accepts_numbers_strings_and_null() {
        let v: T = serde_json::from_str(r#"{"p":"4","t":null}"#).unwrap();
        assert_eq!((v.p, v.t), (4, None));
        let v: T = serde_json::from_str(r#"{"p":4.0,"t":"1796031858733"}"#).unwrap();
        assert_eq!((v.p, v.t), (4, Some(1_796_031_858_733)));
        let v: T = serde_json::from_str(r#"{"p":4}"#).unwrap();
        assert_eq!(v.t, None);
    }

    #[test]
    fn rejects_wrong_types_and_ranges() {
        assert!(serde_json::from_str::<T>(r#"{"p":"four"}"#).is_err());
        assert!(serde_json::from_str::<T>(r#"{"p":-1}"#).is_err());
        assert!(serde_json::from_str::<T>(r#"{"p":true}"#).is_err());
        assert!(serde_json::from_str::<T>(r#"{"p":"NaN"}"#).is_err());
    }
}
