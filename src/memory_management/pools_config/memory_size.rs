//! `MemorySize`: byte counts written as integers or strings with units (KiB = 1024 bytes,
//! kB = 1000 bytes).

use super::*;

// ---------------------------------------------------------------------------------------
// MemorySize
// ---------------------------------------------------------------------------------------

/// A size in bytes, as written in the configuration.
///
/// Read from a TOML integer (`>= 0`) or a string `<number>[ws]<unit>` (see
/// [`MemorySize::parse`]); written back as a plain integer of bytes, so a value read and
/// written again reads back the same. (A size past `i64::MAX`, which a TOML integer
/// cannot hold, is written as a string of its bytes instead.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemorySize(pub u64);

/// Multipliers of the accepted units, lower-case: the IEC binary units (`KiB` = 2^10
/// bytes ...) and the SI decimal ones (`kB` = 10^3 bytes ...), each with its standard
/// meaning (IEC 80000-13).
const UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("b", 1),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
];

/// Bare prefixes, refused: `64M` reads as 2^20 bytes in some tools (ulimit, the JVM,
/// Docker) and 10^6 in others, so whichever we picked would surprise someone. Each with
/// its binary and decimal spelling, for the error message.
const AMBIGUOUS: &[(&str, &str, &str)] = &[
    ("k", "KiB", "kB"),
    ("m", "MiB", "MB"),
    ("g", "GiB", "GB"),
    ("t", "TiB", "TB"),
];

impl MemorySize {
    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// Parses a size string into bytes.
    ///
    /// The grammar is `<number>[whitespace]<unit>`, surrounded by optional whitespace:
    ///
    /// - `<number>`: decimal digits, optionally with one `.` and a fraction (`"1.5"`);
    ///   `_` may separate digits (`"1_048_576"`). A fraction of a byte is truncated.
    /// - `<unit>`, in any case, except a lower-case `b` beside an upper-case letter
    ///   (`"Mb"`, `"Kib"`: how bits are written, refused): none or `B` (bytes); the binary units `KiB` (2^10 bytes),
    ///   `MiB` (2^20), `GiB` (2^30), `TiB` (2^40); the decimal units `kB` (10^3 bytes),
    ///   `MB` (10^6), `GB` (10^9), `TB` (10^12). Each means what the standard says
    ///   (IEC 80000-13): `"64 MB"` is 64 000 000 bytes and `"64 MiB"` is 67 108 864. A
    ///   bare prefix (`"64M"`, `"8k"`) is refused: tools disagree on whether it means
    ///   2^20 or 10^6.
    ///
    /// # Errors
    ///
    /// A reason, for the caller to put in [`PoolConfigError::BadSize`], when the string is
    /// empty, negative, not a number (`"nan"`, `"abc"`), has a misplaced `_` or a second
    /// `.`, names an unknown unit (`"5XB"`), a unit written as bits (`"64 Mb"`) or a bare prefix (`"64M"`: the reason names
    /// `64 MiB` and `64 MB`), or comes to more than `u64::MAX` bytes.
    ///
    /// # Panics
    ///
    /// Never.
    pub fn parse(text: &str) -> Result<u64, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the size is empty".to_owned());
        }
        if text.starts_with('-') {
            return Err("a size cannot be negative".to_owned());
        }
        let number_len = text
            .find(|c: char| !(c.is_ascii_digit() || c == '_' || c == '.'))
            .unwrap_or(text.len());
        let (number, rest) = text.split_at(number_len);
        let unit = rest.trim_start().to_ascii_lowercase();
        if !number.bytes().any(|b| b.is_ascii_digit()) {
            return Err(format!(
                "{text:?} does not start with a number (expected digits, then an optional unit)"
            ));
        }
        if let Some((_, binary, decimal)) = AMBIGUOUS.iter().find(|(name, ..)| *name == unit) {
            return Err(format!(
                "{text:?} is ambiguous: write \"{number} {binary}\" ({binary} = 1024-based) or \
                 \"{number} {decimal}\" ({decimal} = 1000-based)"
            ));
        }
        let written = rest.trim_start();
        if written.ends_with('b') && written.chars().any(|c| c.is_ascii_uppercase()) {
            // IEC 80000-13: `b` is the bit, `B` the byte. "64 Mb" (an upper-case prefix
            // and a lower-case `b`) is how megabits are written; a unit all in lower case
            // ("64 mb") is a byte unit typed in lower case.
            let bytes = format!("{}B", &written[..written.len() - 1]);
            return Err(format!(
                "{text:?}: unit {written:?} is written as bits (`b` beside an upper-case \
                 prefix); sizes are in bytes: write \"{number} {bytes}\""
            ));
        }
        let multiplier = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|&(_, multiplier)| multiplier)
            .ok_or_else(|| {
                format!(
                    "unknown unit {:?} (B; KiB, MiB, GiB, TiB: 1024-based; kB, MB, GB, TB: \
                     1000-based)",
                    rest.trim_start()
                )
            })?;
        check_underscores(number)?;
        let digits: String = number.chars().filter(|&c| c != '_').collect();
        let (whole, fraction) = match digits.split_once('.') {
            Some((whole, fraction)) => (whole, fraction),
            None => (digits.as_str(), ""),
        };
        if fraction.contains('.') {
            return Err(format!("{number:?} has more than one decimal point"));
        }
        let too_large = || format!("{text:?} is more than {} bytes (u64::MAX)", u64::MAX);
        let whole = if whole.is_empty() {
            0
        } else {
            whole.parse::<u64>().map_err(|_| too_large())?
        };
        // floor(0.fraction * multiplier), exact: Horner's rule from the last digit, where
        // each step's floor division loses nothing that a later step would need, and the
        // running value stays below `multiplier`.
        let mut fraction_bytes: u64 = 0;
        for digit in fraction.bytes().rev() {
            fraction_bytes = (u64::from(digit - b'0') * multiplier + fraction_bytes) / 10;
        }
        whole
            .checked_mul(multiplier)
            .and_then(|bytes| bytes.checked_add(fraction_bytes))
            .ok_or_else(too_large)
    }
}

/// Refuses a `_` that does not sit between two digits.
pub(super) fn check_underscores(number: &str) -> Result<(), String> {
    let bytes = number.as_bytes();
    for (index, &byte) in bytes.iter().enumerate() {
        if byte != b'_' {
            continue;
        }
        let before = index.checked_sub(1).and_then(|i| bytes.get(i));
        let after = bytes.get(index + 1);
        let between_digits =
            before.is_some_and(u8::is_ascii_digit) && after.is_some_and(u8::is_ascii_digit);
        if !between_digits {
            return Err(format!(
                "{number:?} has a `_` that is not between two digits"
            ));
        }
    }
    Ok(())
}

impl From<u64> for MemorySize {
    fn from(bytes: u64) -> Self {
        Self(bytes)
    }
}

impl From<MemorySize> for u64 {
    fn from(size: MemorySize) -> Self {
        size.0
    }
}

impl Serialize for MemorySize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if i64::try_from(self.0).is_ok() {
            serializer.serialize_u64(self.0)
        } else {
            // A TOML integer is an i64: larger sizes go out as a string of bytes, which
            // `MemorySize::parse` reads back to the same value.
            serializer.serialize_str(&self.0.to_string())
        }
    }
}

impl<'de> Deserialize<'de> for MemorySize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;

        impl Visitor<'_> for SizeVisitor {
            type Value = MemorySize;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a size: an integer of bytes or a string such as \"64 MiB\"")
            }

            fn visit_u64<E: de::Error>(self, bytes: u64) -> Result<MemorySize, E> {
                Ok(MemorySize(bytes))
            }

            fn visit_i64<E: de::Error>(self, bytes: i64) -> Result<MemorySize, E> {
                size_from_integer(None, "size", bytes).map_err(|error| E::custom(error.to_string()))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<MemorySize, E> {
                Err(E::custom(size_from_float(None, "size", value).to_string()))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<MemorySize, E> {
                size_from_str(None, "size", text).map_err(|error| E::custom(error.to_string()))
            }
        }

        deserializer.deserialize_any(SizeVisitor)
    }
}

/// A TOML integer as a size.
pub(super) fn size_from_integer(
    entry: Option<usize>,
    field: &'static str,
    bytes: i64,
) -> Result<MemorySize, PoolConfigError> {
    u64::try_from(bytes)
        .map(MemorySize)
        .map_err(|_| PoolConfigError::BadSize {
            entry,
            field,
            value: bytes.to_string(),
            reason: "a size cannot be negative".to_owned(),
        })
}

/// A TOML float as a size: always refused, with the reason that fits it.
pub(super) fn size_from_float(
    entry: Option<usize>,
    field: &'static str,
    value: f64,
) -> PoolConfigError {
    let reason = if value.is_nan() {
        "NaN is not a size"
    } else if value.is_sign_negative() {
        "a size cannot be negative"
    } else {
        "a bare number must be a whole number of bytes; write a fraction as a string with \
         a unit, such as \"1.5 GiB\""
    };
    PoolConfigError::BadSize {
        entry,
        field,
        value: value.to_string(),
        reason: reason.to_owned(),
    }
}

/// A TOML string as a size.
pub(super) fn size_from_str(
    entry: Option<usize>,
    field: &'static str,
    text: &str,
) -> Result<MemorySize, PoolConfigError> {
    MemorySize::parse(text)
        .map(MemorySize)
        .map_err(|reason| PoolConfigError::BadSize {
            entry,
            field,
            value: format!("{text:?}"),
            reason,
        })
}
